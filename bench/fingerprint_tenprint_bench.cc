// Issue 33: ten-print search on FVC2002 set B used as "cards" — rank-1
// subject identification of the fused card, its gain over the best single
// finger, and sum vs max fusion (tenprint_search.h TenPrintFusion) decided by
// measurement.
//
//   fingerprint_tenprint_bench [--source=templates|images] [--cache=DIR] [--refresh-cache]
//       [--background=B[,B...]] [--seed=S] [--matchers=lssr,cascade,dmc] [--per-finger=K]
//       [--cascade-candidates=C] [--device=auto|cpu|cuda] [--stage-budget-s=T]
//       [--timing-cards=N] [--data=DIR]
//   (every flag also as "--name VALUE")
//
// Construction. Subject s = FVC2002 finger id 101..110 (set B; the same id in
// DB1..DB4 is treated as one person's four fingers — they are in fact
// different fingers of different volunteers on different sensors, which is
// what makes them independent evidence). Card (s, i): the DB1, DB2, DB3, DB4
// impressions i of finger s, finger positions 1, 2, 3, 4, so a card finger
// searches only its own DB's templates (as a thumb searches only thumbs).
// Gallery g: the cards (s, g) of the 10 subjects; probe cards: (s, p) for
// every p != g: all 8 x 7 = 56 ordered (g, p) pairs x 10 subjects = 560 probe
// cards (2240 finger searches). To make rank 1 non-trivial the gallery also
// holds B background subjects, each with 4 fingers (positions 1-4): finger d
// of background subject j is synthetic template j of a generator built from
// DB d's 80 templates (eval/synthetic_gallery.h, mated_templates 0: mirrored,
// warped chimeras of two real bases, a new identity per finger, so none is a
// mate of anything).
//
// How the galleries are held. Every FVC2002 template is enrolled once with
// metadata (subject "s<id>", finger position = DB, impression type = its
// impression number 1-8: the field is used here as a label) and the
// background with impression type 0; gallery g is the filter {positions {d},
// impression types {g, 0}} (searcher.h: the top-k is exact within it). The
// accuracy runs use one searcher per position (the DB's 80 templates + B
// background fingers) and search each position's 70 probe fingers of a
// gallery g in one batched Search call; the per-finger candidate lists are
// fused by the engine's FuseBySubject for every subset of the four fingers
// (tenprint_cards.h). Per-finger candidates: --per-finger (default 100,
// TenPrintSearch's default for top_k 10).
//
// Timing per card: the batched calls' wall and process CPU time / 560; and
// --timing-cards (default 20, spread over the 560) searched one card at a
// time through the engine (kSum, top_k 10) on one searcher holding all four
// positions (what the service has: 320 + 4B templates, fingers separated by
// the filter) with (a) TenPrintSearchBatched (one Search call, per-probe
// filters) and (b) TenPrintSearch (one call per finger), and (c)
// TenPrintSearch on the per-position searchers; every result is checked
// against the batched ones (subjects and scores of the top 10, exact).
//
// Sources: --source=templates, the shipped ISO 19794-2 templates (*.iso);
// --source=images, the TIFFs extracted with the service's path
// (image_template.h TemplateFromImage) at 500 ppi, DB2 at 569 ppi, cached
// as ISO records in --cache=DIR/DB<n>_B/<name>.iso (keyed by name only:
// --refresh-cache after an extractor change).
//
// Background sizes: a list grows the same galleries (a smaller size is a
// prefix). After each size a matcher whose batched searches would take more
// than --stage-budget-s (default 300, projected linearly in the gallery size)
// at the next size skips the larger sizes.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/types/span.h"
#include "bench/bench_util.h"
#include "bench/fingerprint_data.h"
#include "bench/latent_rank.h"
#include "bench/tenprint_cards.h"
#include "common/device.h"
#include "common/parallel.h"
#include "common/status.h"
#include "kernels/fingerprint/mcc.h"
#include "services/fingerprint/eval/synthetic_gallery.h"
#include "services/fingerprint/extract/image_template.h"
#include "services/fingerprint/formats/template.h"
#include "services/fingerprint/formats/template_io.h"
#include "services/fingerprint/search/fusion_score.h"
#include "services/fingerprint/search/searcher.h"
#include "services/fingerprint/search/tenprint_search.h"

namespace tessera {
namespace fingerprint {
namespace {

namespace fs = std::filesystem;
using bench::NowSeconds;
using bench::ProcessCpuSeconds;

constexpr int kDbs = 4;
constexpr int kSubjects = 10;  // finger ids 101..110
constexpr int kFirstId = 101;
constexpr int kImpressions = 8;
constexpr int kBackgroundImpression = 0;  // the background's impression type (a label)
constexpr int kSubsets = (1 << kDbs) - 1;
constexpr int kFusedTopK = 10;  // TenPrintSearch's top_k in the timing runs

struct Config {
  std::string source = "templates";
  std::string cache;
  bool refresh_cache = false;
  std::vector<int64_t> background = {0, 1000, 10000};
  uint64_t seed = 20261206;
  std::vector<std::string> matchers = {"lssr", "cascade", "dmc"};
  int per_finger = 0;  // 0: TenPrintSearch's default for top_k 10
  int cascade_candidates = kDefaultCascadeCandidates;
  std::string device = "auto";
  double stage_budget_s = 300;
  int timing_cards = 20;
  std::string data_dir;
};

std::string Message(const absl::Status& s) { return std::string(s.message()); }

absl::StatusOr<std::string> ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The matchers' view of a record, as the service parses one: view 0.
absl::StatusOr<std::vector<MinutiaPoint>> PointsOfRecord(absl::Span<const uint8_t> record) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<Template> views, ParseTemplateRecord(record));
  if (views.empty()) return absl::InvalidArgumentError("record without a finger view");
  std::vector<MinutiaPoint> out;
  for (const Minutia& m : views[0].minutiae) {
    out.push_back({static_cast<float>(m.x), static_cast<float>(m.y), static_cast<float>(m.angle)});
  }
  if (out.empty()) return absl::InvalidArgumentError("template has no minutiae");
  TESSERA_RETURN_IF_ERROR(ValidateMccInput(out, MccParams{}));
  return out;
}

// ---- the prints -----------------------------------------------------------

struct Print {
  bool ok = false;
  std::string error;
  std::vector<uint8_t> record;
  std::vector<MinutiaPoint> points;
};

// prints[db - 1][finger - 101][impression - 1].
using Prints = std::array<std::array<std::array<Print, kImpressions>, kSubjects>, kDbs>;

double FvcPpi(int db) { return db == 2 ? 569 : 500; }

std::string SubjectId(int s) { return absl::StrCat("s", kFirstId + s); }

struct LoadStats {
  int extracted = 0;  // this run
  int failed = 0;
  double seconds = 0;
};

LoadStats LoadPrints(const Config& cfg, const std::string& data_dir, Prints* prints) {
  LoadStats st;
  const bool images = cfg.source == "images";
  std::vector<char> fresh(kDbs * kSubjects * kImpressions, 0);
  const double t0 = NowSeconds();
  ParallelForDynamic(kDbs * kSubjects * kImpressions, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t k = begin; k < end; ++k) {
      const int d = static_cast<int>(k / (kSubjects * kImpressions));
      const int s = static_cast<int>(k / kImpressions % kSubjects);
      const int i = static_cast<int>(k % kImpressions);
      Print& p = (*prints)[d][s][i];
      const std::string dir_name = absl::StrCat("DB", d + 1, "_B");
      const std::string stem = absl::StrCat(kFirstId + s, "_", i + 1);
      const fs::path dir = fs::path(data_dir) / "fvc2002" / dir_name;
      const std::string cached = cfg.cache.empty() ? "" : (fs::path(cfg.cache) / dir_name / (stem + ".iso")).string();
      std::string bytes;
      if (!images) {
        auto b = ReadWhole((dir / (stem + ".iso")).string());
        if (!b.ok()) {
          p.error = b.status().ToString();
          continue;
        }
        bytes = *std::move(b);
      } else if (!cached.empty() && !cfg.refresh_cache && fs::exists(cached)) {
        auto b = ReadWhole(cached);
        if (!b.ok()) {
          p.error = b.status().ToString();
          continue;
        }
        bytes = *std::move(b);
      } else {
        const std::string source = (dir / (stem + ".tif")).string();
        auto image = ReadWhole(source);
        if (!image.ok()) {
          p.error = image.status().ToString();
          continue;
        }
        ImageInput input;
        input.decode.ppi = FvcPpi(d + 1);
        absl::StatusOr<ImageTemplate> made = TemplateFromImage(*image, input, TemplateFormat::kIso19794);
        if (!made.ok()) {
          p.error = Annotate(made.status(), source).ToString();
          continue;
        }
        bytes.assign(made->record.begin(), made->record.end());
        fresh[k] = 1;
        if (!cached.empty()) {
          std::error_code ec;
          fs::create_directories(fs::path(cached).parent_path(), ec);
          std::ofstream f(cached, std::ios::binary | std::ios::trunc);
          f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
          if (!f) std::fprintf(stderr, "cannot write %s (continuing)\n", cached.c_str());
        }
      }
      p.record.assign(bytes.begin(), bytes.end());
      auto points = PointsOfRecord(p.record);
      if (!points.ok()) {
        p.error = points.status().ToString();
        continue;
      }
      p.points = *std::move(points);
      p.ok = true;
    }
  });
  st.seconds = NowSeconds() - t0;
  for (int d = 0; d < kDbs; ++d) {
    for (int s = 0; s < kSubjects; ++s) {
      for (int i = 0; i < kImpressions; ++i) {
        const Print& p = (*prints)[d][s][i];
        st.extracted += fresh[(d * kSubjects + s) * kImpressions + i];
        if (!p.ok) {
          ++st.failed;
          std::printf("  DB%d_B/%d_%d: %s\n", d + 1, kFirstId + s, i + 1, p.error.c_str());
        }
      }
    }
  }
  return st;
}

// ---- per-stage results ----------------------------------------------------

// Candidates of finger (d, s, p) searched against gallery g: index of
// lists in a Stage.
inline int ListIndex(int d, int g, int s, int p) { return ((d * kImpressions + g) * kSubjects + s) * kImpressions + p; }

struct SubsetTally {
  int rank1 = 0;
  int ties = 0;    // cards whose subject would be first but for a tie
  int missed = 0;  // subject not among any finger's candidates
};

struct Result {
  std::string matcher;
  int64_t background = 0;
  bool ran = false;
  std::string error;
  int cards = 0;
  // [subset mask - 1][fusion 0 sum, 1 max]
  std::array<std::array<SubsetTally, 2>, kSubsets> tally{};
  // Per card, per subset and rule: rank 1.
  std::vector<std::array<std::array<bool, 2>, kSubsets>> rank1;
  // Open set, per subset and rule, per card: the subject's fused score when
  // it is rank 1 (else NaN) and the best non-mate's (tenprint_cards.h
  // TpirAtFpir).
  std::array<std::array<std::vector<float>, 2>, kSubsets> mated, nonmated;
  double wall_s = 0, cpu_s = 0;  // the batched searches
  // TenPrintSearch one card at a time: per-card wall and CPU seconds.
  // [mode]: kModeNames.
  std::array<std::vector<double>, 3> card_wall, card_cpu;
  std::array<int, 3> mismatch{};
  std::string first_mismatch;
};

const std::vector<std::string>& FingerNames() {
  static const std::vector<std::string> names = {"DB1", "DB2", "DB3", "DB4"};
  return names;
}

int Popcount(unsigned m) { return __builtin_popcount(m); }

std::string Pct(int n, int of) { return of > 0 ? absl::StrFormat("%.1f %%", 100.0 * n / of) : "-"; }

// Best single finger (by sum rank-1; one finger's sum and max are equal).
int BestSingle(const Result& r) {
  int best = 0;
  for (int f = 0; f < kDbs; ++f) {
    if (r.tally[(1u << f) - 1][0].rank1 > r.tally[(1u << best) - 1][0].rank1) best = f;
  }
  return best;
}

// Cards right by rule a only and by b only, over every subset of `size` fingers.
std::pair<int, int> Discordant(const Result& r, int size, int a_subset_or_0, int a_rule, int b_rule) {
  int a = 0, b = 0;
  for (unsigned m = 1; m <= kSubsets; ++m) {
    if (a_subset_or_0 != 0 ? m != static_cast<unsigned>(a_subset_or_0) : Popcount(m) != size) continue;
    for (const auto& card : r.rank1) {
      a += card[m - 1][a_rule] && !card[m - 1][b_rule];
      b += !card[m - 1][a_rule] && card[m - 1][b_rule];
    }
  }
  return {a, b};
}

// The ways a card is searched one at a time: TenPrintSearchBatched (one
// Search call, per-probe filters) and TenPrintSearch (one call per finger) on
// the searcher holding every position, and TenPrintSearch on the per-position
// searchers.
const char* const kModeNames[3] = {"one searcher, one pass (TenPrintSearchBatched)",
                                   "one searcher, per finger (TenPrintSearch)",
                                   "per-position searchers, per finger (TenPrintSearch)"};

constexpr double kFpir = 0.01;

double Tpir(const Result& r, unsigned mask, int rule) {
  return TpirAtFpir(r.mated[mask - 1][rule], r.nonmated[mask - 1][rule], kFpir);
}

// The single finger with the highest TPIR at kFpir.
int BestSingleOpen(const Result& r) {
  int best = 0;
  for (int f = 0; f < kDbs; ++f) {
    if (Tpir(r, 1u << f, 0) > Tpir(r, 1u << best, 0)) best = f;
  }
  return best;
}

void PrintResult(const Result& r) {
  if (!r.ran) {
    std::printf("\n%s, B = %lld: %s\n", r.matcher.c_str(), static_cast<long long>(r.background), r.error.c_str());
    return;
  }
  const int n = r.cards;
  std::printf("\n### %s, background B = %lld: %d probe cards\n\n", r.matcher.c_str(),
              static_cast<long long>(r.background), n);
  std::printf("| fingers | sum: rank-1 | sum rate | max: rank-1 | max rate | sum ties / max ties | not found | "
              "TPIR at FPIR %.0f %%: sum | max |\n"
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
              100 * kFpir);
  for (int size = 1; size <= kDbs; ++size) {
    for (unsigned m = 1; m <= kSubsets; ++m) {
      if (Popcount(m) != size) continue;
      const SubsetTally& s = r.tally[m - 1][0];
      const SubsetTally& x = r.tally[m - 1][1];
      std::printf("| %s | %d | %s | %d | %s | %d / %d | %d | %.1f %% | %.1f %% |\n", SubsetName(m, FingerNames()).c_str(),
                  s.rank1, Pct(s.rank1, n).c_str(), x.rank1, Pct(x.rank1, n).c_str(), s.ties, x.ties, s.missed,
                  100 * Tpir(r, m, 0), 100 * Tpir(r, m, 1));
    }
  }
  const int best = BestSingle(r);
  const int single = r.tally[(1u << best) - 1][0].rank1;
  const SubsetTally& all_sum = r.tally[kSubsets - 1][0];
  const SubsetTally& all_max = r.tally[kSubsets - 1][1];
  std::printf("\nbest single finger: %s, %d of %d (%s)\n", FingerNames()[best].c_str(), single, n, Pct(single, n).c_str());
  for (int rule = 0; rule < 2; ++rule) {
    const SubsetTally& t = rule == 0 ? all_sum : all_max;
    int single_right_only = 0, tp_right_only = 0;
    for (const auto& card : r.rank1) {
      tp_right_only += card[kSubsets - 1][rule] && !card[(1u << best) - 1][0];
      single_right_only += !card[kSubsets - 1][rule] && card[(1u << best) - 1][0];
    }
    std::printf("4 fingers, %s: %d of %d (%s); gain over the best single finger %+.1f points, error reduction %.0f %% "
                "(%d cards right only with the card, %d only with %s; sign test p = %.2g)\n",
                rule == 0 ? "sum" : "max", t.rank1, n, Pct(t.rank1, n).c_str(), 100.0 * (t.rank1 - single) / n,
                100 * ErrorReduction(n - single, n - t.rank1), tp_right_only, single_right_only,
                FingerNames()[best].c_str(), SignTestP(tp_right_only, single_right_only));
  }
  {
    const int bo = BestSingleOpen(r);
    const double single_open = Tpir(r, 1u << bo, 0);
    std::printf("open set (FPIR %.0f %%, the cards' best non-mates as the non-mated searches): best single finger %s "
                "TPIR %.1f %%; 4 fingers sum %.1f %% (FNIR reduction %.0f %%), max %.1f %% (%.0f %%)\n",
                100 * kFpir, FingerNames()[bo].c_str(), 100 * single_open, 100 * Tpir(r, kSubsets, 0),
                100 * (1 - (1 - Tpir(r, kSubsets, 0)) / std::max(1e-12, 1 - single_open)), 100 * Tpir(r, kSubsets, 1),
                100 * (1 - (1 - Tpir(r, kSubsets, 1)) / std::max(1e-12, 1 - single_open)));
  }
  for (int size = 2; size <= kDbs; ++size) {
    int sum = 0, max = 0, subsets = 0;
    double open_sum = 0, open_max = 0;
    for (unsigned m = 1; m <= kSubsets; ++m) {
      if (Popcount(m) != size) continue;
      sum += r.tally[m - 1][0].rank1;
      max += r.tally[m - 1][1].rank1;
      open_sum += Tpir(r, m, 0);
      open_max += Tpir(r, m, 1);
      ++subsets;
    }
    const auto [a, b] = Discordant(r, size, 0, 0, 1);
    std::printf("%d-finger subsets (%d): sum %s, max %s mean rank-1; cards right only by sum %d, only by max %d "
                "(sign test p = %.2g; pooled subsets are not independent); mean TPIR at FPIR %.0f %%: sum %.1f %%, "
                "max %.1f %%\n",
                size, subsets, Pct(sum, n * subsets).c_str(), Pct(max, n * subsets).c_str(), a, b, SignTestP(a, b),
                100 * kFpir, 100 * open_sum / subsets, 100 * open_max / subsets);
  }
  std::printf("batched search: %.1f s wall, %.1f s CPU for %d cards = %.3f s wall, %.3f s CPU per card\n", r.wall_s,
              r.cpu_s, n, r.wall_s / std::max(1, n), r.cpu_s / std::max(1, n));
  if (!r.card_wall[0].empty()) {
    std::printf("one card at a time (sum, top %d), %zu cards, median s/card wall (CPU), results differing from the "
                "batched ones:\n",
                kFusedTopK, r.card_wall[0].size());
    for (int mode = 0; mode < 3; ++mode) {
      std::printf("  %s: %.3f (%.3f), %d differ\n", kModeNames[mode], bench::Median(r.card_wall[mode]),
                  bench::Median(r.card_cpu[mode]), r.mismatch[mode]);
    }
    if (!r.first_mismatch.empty()) std::printf("  first difference: %s\n", r.first_mismatch.c_str());
  }
  std::fflush(stdout);
}

// A card's fused top-k from TenPrintSearch against the batched lists' fusion.
std::string CompareFused(const std::vector<SubjectMatch>& got, const std::vector<SubjectMatch>& want) {
  if (got.size() != want.size()) return absl::StrCat(got.size(), " subjects vs ", want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].subject_id != want[i].subject_id || got[i].score != want[i].score) {
      return absl::StrFormat("#%d %s %.6f vs %s %.6f", i + 1, got[i].subject_id, got[i].score, want[i].subject_id,
                             want[i].score);
    }
  }
  return "";
}

struct Searchers {
  std::array<std::unique_ptr<GallerySearcher>, kDbs> positional;
  std::unique_ptr<GallerySearcher> combined;  // null without timing cards
};

std::shared_ptr<StoredTemplate> Stored(std::string id, std::string subject, int position, int impression,
                                       uint64_t seq) {
  auto t = std::make_shared<StoredTemplate>();
  t->id = std::move(id);
  t->seq = seq;
  t->metadata.subject_id = std::move(subject);
  t->metadata.finger_position = position;
  t->metadata.impression_type = impression;
  return t;
}

Result RunStage(const Config& cfg, const std::string& matcher, int64_t background, const Prints& prints,
                Searchers& searchers) {
  Result r;
  r.matcher = matcher;
  r.background = background;
  const int per_finger = cfg.per_finger > 0 ? cfg.per_finger : std::max(100, 10 * kFusedTopK);
  std::vector<std::vector<SearchCandidate>> lists(kDbs * kImpressions * kSubjects * kImpressions);
  const double c0 = ProcessCpuSeconds(), t0 = NowSeconds();
  for (int d = 0; d < kDbs; ++d) {
    for (int g = 0; g < kImpressions; ++g) {
      std::vector<std::vector<MinutiaPoint>> probes;
      std::vector<std::pair<int, int>> who;
      for (int s = 0; s < kSubjects; ++s) {
        for (int p = 0; p < kImpressions; ++p) {
          if (p == g || !prints[d][s][p].ok) continue;
          probes.push_back(prints[d][s][p].points);
          who.emplace_back(s, p);
        }
      }
      if (probes.empty()) continue;
      SearchOptions o;
      o.top_k = per_finger;
      o.matcher = matcher;
      o.cascade_candidates = matcher == "cascade" ? cfg.cascade_candidates : 0;
      o.filter.finger_positions = {d + 1};
      o.filter.impression_types = {g + 1, kBackgroundImpression};
      auto found = searchers.positional[d]->Search(probes, o);
      if (!found.ok()) {
        r.error = absl::StrCat("DB", d + 1, " gallery ", g + 1, ": ", found.status().ToString());
        return r;
      }
      for (size_t k = 0; k < who.size(); ++k) {
        lists[ListIndex(d, g, who[k].first, who[k].second)] = std::move((*found)[k]);
      }
    }
  }
  r.wall_s = NowSeconds() - t0;
  r.cpu_s = ProcessCpuSeconds() - c0;
  r.ran = true;

  const std::vector<int> positions = {1, 2, 3, 4};
  const std::vector<std::pair<int, int>> pairs = CardPairs(kImpressions);
  struct CardRef {
    int g, p, s;
  };
  std::vector<CardRef> cards;
  for (const auto& [g1, p1] : pairs) {
    for (int s = 0; s < kSubjects; ++s) cards.push_back({g1 - 1, p1 - 1, s});
  }
  r.cards = static_cast<int>(cards.size());
  r.rank1.resize(cards.size());
  const auto card_lists = [&](const CardRef& c) {
    std::vector<std::vector<SearchCandidate>> per(kDbs);
    for (int d = 0; d < kDbs; ++d) per[d] = lists[ListIndex(d, c.g, c.s, c.p)];
    return per;
  };
  for (size_t k = 0; k < cards.size(); ++k) {
    const std::vector<std::vector<SearchCandidate>> per = card_lists(cards[k]);
    for (unsigned m = 1; m <= kSubsets; ++m) {
      for (int rule = 0; rule < 2; ++rule) {
        const MateRank rank = SubjectRank(
            FuseSubset(positions, per, m, rule == 0 ? TenPrintFusion::kSum : TenPrintFusion::kMax),
            SubjectId(cards[k].s));
        SubsetTally& t = r.tally[m - 1][rule];
        const bool first = rank.found && rank.rank == 1;
        r.rank1[k][m - 1][rule] = first;
        r.mated[m - 1][rule].push_back(first ? rank.mate_score : std::numeric_limits<float>::quiet_NaN());
        r.nonmated[m - 1][rule].push_back(rank.best_nonmate);
        t.rank1 += first;
        t.ties += rank.found && rank.rank - rank.ties == 1 && rank.ties > 0;
        t.missed += !rank.found;
      }
    }
  }

  // TenPrintSearch itself, one card at a time.
  for (int i = 0; i < cfg.timing_cards && searchers.combined != nullptr; ++i) {
    const CardRef& c = cards[static_cast<size_t>(i) * cards.size() / cfg.timing_cards];
    std::vector<CardFinger> card;
    for (int d = 0; d < kDbs; ++d) {
      if (prints[d][c.s][c.p].ok) card.push_back({d + 1, prints[d][c.s][c.p].points});
    }
    if (card.empty()) continue;
    TenPrintOptions to;
    to.top_k = kFusedTopK;
    to.per_finger_candidates = per_finger;
    to.fusion = TenPrintFusion::kSum;
    std::vector<int> card_positions;
    std::vector<std::vector<SearchCandidate>> want_lists;
    const std::vector<std::vector<SearchCandidate>> per = card_lists(c);
    for (const CardFinger& f : card) {
      card_positions.push_back(f.finger_position);
      want_lists.push_back(per[f.finger_position - 1]);
    }
    const std::vector<SubjectMatch> want = FuseBySubject(card_positions, want_lists, TenPrintFusion::kSum, kFusedTopK);
    const auto options_for = [&](const TemplateFilter& filter, int top_k) {
      SearchOptions o;
      o.top_k = top_k;
      o.matcher = matcher;
      o.cascade_candidates = matcher == "cascade" ? cfg.cascade_candidates : 0;
      o.filter = filter;
      o.filter.impression_types = {c.g + 1, kBackgroundImpression};
      return o;
    };
    for (int mode = 0; mode < 3; ++mode) {
      const double cc = ProcessCpuSeconds(), tt = NowSeconds();
      absl::StatusOr<std::vector<SubjectMatch>> got;
      if (mode == 0) {
        CardSearchFn fn = [&](const std::vector<std::vector<MinutiaPoint>>& probes,
                              const std::vector<TemplateFilter>& filters,
                              int top_k) -> absl::StatusOr<std::vector<std::vector<SearchCandidate>>> {
          SearchOptions o = options_for({}, top_k);
          o.filter = {};
          for (const TemplateFilter& f : filters) o.probe_filters.push_back(options_for(f, top_k).filter);
          return searchers.combined->Search(probes, o);
        };
        got = TenPrintSearchBatched(card, to, fn);
      } else {
        FingerSearchFn fn = [&](const std::vector<MinutiaPoint>& probe, const TemplateFilter& filter,
                                int top_k) -> absl::StatusOr<std::vector<SearchCandidate>> {
          GallerySearcher& s =
              mode == 1 ? *searchers.combined : *searchers.positional[filter.finger_positions.at(0) - 1];
          TESSERA_ASSIGN_OR_RETURN(auto found, s.Search({probe}, options_for(filter, top_k)));
          return std::move(found[0]);
        };
        got = TenPrintSearch(card, to, fn);
      }
      r.card_wall[mode].push_back(NowSeconds() - tt);
      r.card_cpu[mode].push_back(ProcessCpuSeconds() - cc);
      const std::string diff = got.ok() ? CompareFused(*got, want) : got.status().ToString();
      if (!diff.empty()) {
        ++r.mismatch[mode];
        if (r.first_mismatch.empty()) {
          r.first_mismatch = absl::StrCat(kModeNames[mode], ", card ", SubjectId(c.s), " g ", c.g + 1, " p ", c.p + 1,
                                          ": ", diff);
        }
      }
    }
  }
  return r;
}

// Appends background subjects [from, to) to every searcher.
bool Grow(const std::array<std::unique_ptr<SyntheticGallery>, kDbs>& generators, const Stream& stream, int64_t from,
          int64_t to, Searchers& searchers, uint64_t* seq) {
  constexpr int64_t kBlock = 16384;
  for (int d = 0; d < kDbs; ++d) {
    for (int64_t b = from; b < to; b += kBlock) {
      const int64_t e = std::min(to, b + kBlock);
      MccGallery block;
      if (absl::Status s = generators[d]->AppendTo(stream, b, e, &block, nullptr); !s.ok()) {
        std::fprintf(stderr, "synthetic gallery: %s\n", Message(s).c_str());
        return false;
      }
      for (int64_t j = b; j < e; ++j) {
        auto t = Stored(absl::StrCat("bg", j, "/DB", d + 1), absl::StrCat("bg", j), d + 1, kBackgroundImpression,
                        ++*seq);
        const int local = static_cast<int>(j - b);
        absl::Status s = searchers.positional[d]->AddWithCylinders(t, block.Get(local));
        if (s.ok() && searchers.combined) s = searchers.combined->AddWithCylinders(t, block.Get(local));
        if (!s.ok()) {
          std::fprintf(stderr, "searcher: %s\n", Message(s).c_str());
          return false;
        }
      }
    }
  }
  return true;
}

int Run(const Config& cfg) {
  const std::string data_dir = FingerprintDataDirOrExit(cfg.data_dir);
  const bool gpu = cfg.device == "cuda" || (cfg.device == "auto" && DeviceRegistry::Get().cuda_available());
  std::printf("fingerprint_tenprint_bench: %s; %d CPU threads; searcher device %s; source %s; data %s\n",
              DeviceRegistry::Get().Describe().c_str(), CpuThreads(), cfg.device.c_str(), cfg.source.c_str(),
              data_dir.c_str());

  auto prints = std::make_unique<Prints>();
  const LoadStats load = LoadPrints(cfg, data_dir, prints.get());
  for (int d = 0; d < kDbs; ++d) {
    double minutiae = 0;
    int ok = 0;
    for (const auto& subject : (*prints)[d]) {
      for (const Print& p : subject) {
        if (!p.ok) continue;
        ++ok;
        minutiae += p.points.size();
      }
    }
    std::printf("DB%d_B: %d of %d %s, mean %.1f minutiae\n", d + 1, ok, kSubjects * kImpressions,
                cfg.source == "images" ? "images extracted" : "templates", ok > 0 ? minutiae / ok : 0.0);
  }
  std::printf("loaded in %.1f s (%d extracted now, %d failed%s)\n", load.seconds, load.extracted, load.failed,
              cfg.source == "images" ? absl::StrCat("; cache ", cfg.cache.empty() ? "(none)" : cfg.cache).c_str() : "");

  // The searchers and the FVC2002 templates.
  Searchers searchers;
  SearcherOptions so;
  so.device = cfg.device;
  so.cascade_candidates = cfg.cascade_candidates;
  for (int d = 0; d <= kDbs; ++d) {
    if (d == kDbs && cfg.timing_cards <= 0) break;
    auto created = CreateSearcher(so);
    if (!created.ok()) {
      std::fprintf(stderr, "searcher: %s\n", Message(created.status()).c_str());
      return 1;
    }
    (d < kDbs ? searchers.positional[d] : searchers.combined) = *std::move(created);
  }
  uint64_t seq = 0;
  std::array<std::vector<std::shared_ptr<const StoredTemplate>>, kDbs> real;
  for (int d = 0; d < kDbs; ++d) {
    for (int s = 0; s < kSubjects; ++s) {
      for (int i = 0; i < kImpressions; ++i) {
        const Print& p = (*prints)[d][s][i];
        if (!p.ok) continue;
        auto t = Stored(absl::StrCat("DB", d + 1, "/", kFirstId + s, "_", i + 1), SubjectId(s), d + 1, i + 1, ++seq);
        t->format = TemplateFormat::kIso19794;
        t->bytes.assign(p.record.begin(), p.record.end());
        t->minutiae = p.points;
        real[d].push_back(std::move(t));
      }
    }
    absl::Status s = searchers.positional[d]->Add(real[d]);
    if (s.ok() && searchers.combined) s = searchers.combined->Add(real[d]);
    if (!s.ok()) {
      std::fprintf(stderr, "searcher: %s\n", Message(s).c_str());
      return 1;
    }
  }

  // One background generator per DB, from that DB's templates.
  std::vector<int64_t> sizes = cfg.background;
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  std::array<std::unique_ptr<SyntheticGallery>, kDbs> generators;
  for (int d = 0; d < kDbs; ++d) {
    std::vector<BaseTemplate> bases;
    for (int s = 0; s < kSubjects; ++s) {
      for (int i = 0; i < kImpressions; ++i) {
        if ((*prints)[d][s][i].ok) bases.push_back({(*prints)[d][s][i].points, (d + 1) * 1000 + s * 10 + i});
      }
    }
    SyntheticGalleryOptions go;
    go.seed = cfg.seed + d;
    go.size = sizes.back();
    go.mated_templates = 0;
    auto made = SyntheticGallery::Create(bases, go);
    if (!made.ok()) {
      std::fprintf(stderr, "synthetic DB%d: %s\n", d + 1, Message(made.status()).c_str());
      return 1;
    }
    generators[d] = std::make_unique<SyntheticGallery>(*std::move(made));
  }
  absl::StatusOr<Stream> build_stream = gpu ? Stream::Create(Backend::kCuda) : absl::StatusOr<Stream>(Stream::Cpu());
  if (!build_stream.ok()) {
    std::fprintf(stderr, "%s\n", Message(build_stream.status()).c_str());
    return 1;
  }
  std::printf("background: seed %llu (+ DB - 1), up to %lld subjects x 4 fingers; per-finger candidates %d; cascade "
              "shortlist %d; timing cards %d\n",
              static_cast<unsigned long long>(cfg.seed), static_cast<long long>(sizes.back()),
              cfg.per_finger > 0 ? cfg.per_finger : std::max(100, 10 * kFusedTopK), cfg.cascade_candidates,
              cfg.timing_cards);

  std::vector<Result> results;
  std::vector<std::string> active = cfg.matchers;
  int64_t have = 0;
  for (size_t si = 0; si < sizes.size(); ++si) {
    const int64_t size = sizes[si];
    if (size > have) {
      const double g0 = NowSeconds();
      if (!Grow(generators, *build_stream, have, size, searchers, &seq)) return 1;
      std::printf("\nbackground %lld -> %lld subjects: generated + descriptors (%s) + appended in %.1f s\n",
                  static_cast<long long>(have), static_cast<long long>(size), gpu ? "GPU" : "CPU", NowSeconds() - g0);
      have = size;
    }
    std::printf("\n== B = %lld background subjects: %lld templates per position (80 FVC2002 + %lld), gallery of each "
                "card search %lld subjects; load average %.2f ==\n",
                static_cast<long long>(size), static_cast<long long>(searchers.positional[0]->size()),
                static_cast<long long>(size), static_cast<long long>(size + kSubjects), bench::LoadAverage());
    std::vector<std::string> still;
    for (const std::string& m : active) {
      Result r = RunStage(cfg, m, size, *prints, searchers);
      PrintResult(r);
      if (r.ran && si + 1 < sizes.size()) {
        const double projected =
            r.wall_s * static_cast<double>(sizes[si + 1] + 80) / static_cast<double>(size + 80);
        if (projected > cfg.stage_budget_s) {
          std::printf("%s: the next size (B = %lld) would take ~%.0f s of batched search (> %.0f s): skipped there\n",
                      m.c_str(), static_cast<long long>(sizes[si + 1]), projected, cfg.stage_budget_s);
        } else {
          still.push_back(m);
        }
      }
      results.push_back(std::move(r));
    }
    active = still;
  }

  // Summary.
  std::printf("\n## Summary (%s; %d probe cards per row; rank-1 of the subject, ties against it)\n\n",
              cfg.source.c_str(), results.empty() ? 0 : results[0].cards);
  std::printf("| matcher | B | DB1 | DB2 | DB3 | DB4 | best single | 4-finger sum | 4-finger max | gain sum (max) "
              "| error reduction sum (max) | 4 fingers: sum-only / max-only cards | 2-finger mean sum / max | 3-finger "
              "mean sum / max | TPIR at FPIR 1 %%: best single / sum / max | batched s/card wall (CPU) | one card, s wall: "
              "one searcher one pass / per finger / per-position searchers |\n"
              "|---|---:|---:|---:|---:|---:|---|---:|---:|---|---|---|---|---|---|---|---|\n");
  for (const Result& r : results) {
    if (!r.ran) {
      std::printf("| %s | %lld | %s |\n", r.matcher.c_str(), static_cast<long long>(r.background), r.error.c_str());
      continue;
    }
    const int n = r.cards;
    const auto rate = [&](int k) { return absl::StrFormat("%.1f", 100.0 * k / n); };
    const int best = BestSingle(r);
    const int single = r.tally[(1u << best) - 1][0].rank1;
    const int sum = r.tally[kSubsets - 1][0].rank1, max = r.tally[kSubsets - 1][1].rank1;
    const auto [sum_only, max_only] = Discordant(r, 0, kSubsets, 0, 1);
    std::string means[2];
    for (int size = 2; size <= 3; ++size) {
      int s = 0, x = 0, k = 0;
      for (unsigned m = 1; m <= kSubsets; ++m) {
        if (Popcount(m) != size) continue;
        s += r.tally[m - 1][0].rank1;
        x += r.tally[m - 1][1].rank1;
        ++k;
      }
      means[size - 2] = absl::StrFormat("%.1f / %.1f", 100.0 * s / (n * k), 100.0 * x / (n * k));
    }
    std::printf("| %s | %lld | %s | %s | %s | %s | %s %s | **%s** | %s | %+.1f (%+.1f) | %.0f %% (%.0f %%) | %d / %d "
                "(p = %.2g) | %s | %s | %s | %.3f (%.3f) | %s |\n",
                r.matcher.c_str(), static_cast<long long>(r.background), rate(r.tally[0][0].rank1).c_str(),
                rate(r.tally[1][0].rank1).c_str(), rate(r.tally[3][0].rank1).c_str(), rate(r.tally[7][0].rank1).c_str(),
                FingerNames()[best].c_str(), rate(single).c_str(), rate(sum).c_str(), rate(max).c_str(),
                100.0 * (sum - single) / n, 100.0 * (max - single) / n, 100 * ErrorReduction(n - single, n - sum),
                100 * ErrorReduction(n - single, n - max), sum_only, max_only, SignTestP(sum_only, max_only),
                means[0].c_str(), means[1].c_str(),
                absl::StrFormat("%s %.1f / %.1f / %.1f", FingerNames()[BestSingleOpen(r)],
                                100 * Tpir(r, 1u << BestSingleOpen(r), 0), 100 * Tpir(r, kSubsets, 0),
                                100 * Tpir(r, kSubsets, 1))
                    .c_str(),
                r.wall_s / n, r.cpu_s / n,
                r.card_wall[0].empty() ? "-"
                                       : absl::StrFormat("%.3f / %.3f / %.3f", bench::Median(r.card_wall[0]),
                                                         bench::Median(r.card_wall[1]), bench::Median(r.card_wall[2]))
                                              .c_str());
  }
  return 0;
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera

int main(int argc, char** argv) {
  using namespace tessera::fingerprint;
  Config cfg;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    auto value = [&](const char* name) { return tessera::bench::FlagValueOrNext(argc, argv, &i, name); };
    int64_t n = 0;
    bool ok = true;
    if (const char* v = value("--source")) {
      cfg.source = v;
      ok = cfg.source == "templates" || cfg.source == "images";
    } else if (const char* v = value("--cache")) {
      cfg.cache = v;
    } else if (std::strcmp(a, "--refresh-cache") == 0) {
      cfg.refresh_cache = true;
    } else if (const char* v = value("--background")) {
      ok = tessera::bench::ParseIntList(v, 0, 1 << 24, &cfg.background);
    } else if (const char* v = value("--seed")) {
      ok = absl::SimpleAtoi(v, &cfg.seed);
    } else if (const char* v = value("--matchers")) {
      cfg.matchers = absl::StrSplit(v, ',', absl::SkipEmpty());
      const std::vector<std::string> known = SearcherMatchers();
      for (const std::string& m : cfg.matchers) ok = ok && std::find(known.begin(), known.end(), m) != known.end();
      ok = ok && !cfg.matchers.empty();
    } else if (const char* v = value("--per-finger")) {
      ok = absl::SimpleAtoi(v, &n) && n >= 1 && n <= 100000;
      cfg.per_finger = static_cast<int>(n);
    } else if (const char* v = value("--cascade-candidates")) {
      ok = absl::SimpleAtoi(v, &n) && n >= 1 && n <= kMaxCascadeCandidates;
      cfg.cascade_candidates = static_cast<int>(n);
    } else if (const char* v = value("--device")) {
      cfg.device = v;
      ok = cfg.device == "auto" || cfg.device == "cpu" || cfg.device == "cuda";
    } else if (const char* v = value("--stage-budget-s")) {
      ok = absl::SimpleAtod(v, &cfg.stage_budget_s) && cfg.stage_budget_s > 0;
    } else if (const char* v = value("--timing-cards")) {
      ok = absl::SimpleAtoi(v, &n) && n >= 0 && n <= 560;
      cfg.timing_cards = static_cast<int>(n);
    } else if (const char* v = value("--data")) {
      cfg.data_dir = v;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr,
                   "usage: %s [--source=templates|images] [--cache=DIR] [--refresh-cache] [--background=B[,B...]]\n"
                   "          [--seed=S] [--matchers=lssr,cascade,dmc] [--per-finger=K] [--cascade-candidates=C]\n"
                   "          [--device=auto|cpu|cuda] [--stage-budget-s=T] [--timing-cards=N (0-560)] [--data=DIR]\n",
                   argv[0]);
      return 2;
    }
  }
  return Run(cfg);
}
