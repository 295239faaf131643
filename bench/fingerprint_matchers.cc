// Issue 16: the service's four matchers (lssr, dmc, fusion, cascade) side by
// side in one run, through the searcher the service uses (searcher.h, CPU),
// on FVC2002 DB1-DB4 set B and on latent-style crops:
//
//   bazel run -c opt //bench:fingerprint_matchers -- [--padding=1000]
//       [--cascade_candidates=200] [--weights=0.2,0.3,...] [--data=DIR]
//
// Scenarios. DBn: gallery = the DB's 80 impressions + `padding` synthetic
// non-mates made from them (synthetic_gallery.h, mated_templates = 0);
// probes = the 80 impressions, each one's own entry left out. Latent DBa-b:
// gallery = the 160 impressions of the two DBs + `padding` synthetic
// non-mates; probes = `crops` crops per impression (latent_eval.h
// CropLatent, 12-30 nearest minutiae), the source impression left out.
// Metrics: rank-1 / rank-20 over the whole padded gallery (rank = 1 + the
// non-mates scoring at least the best mate); EER over the real pairs only
// (probe vs every real template but itself, as FVC does). A cascade returns
// only its shortlist, so a real template outside it counts as a score of -1
// (rejected): its EER is that of the search it serves. matches/s = probes x
// gallery / the Search call's wall time (descriptors included), all cores.
//
// Tuning: the fusion weight is chosen on the DB1-DB2 sets only (DB1, DB2,
// latent DB1-2: lowest mean EER; differences under `eer_tie` percent are
// ties, broken by the mean rank-1, then by nearness to the default) from the
// lssr and dmc scores of this run; DB3, DB4 and latent DB3-4 are the
// validation split. The fusion and cascade rows use the chosen weight.
// Speed at scale: `speed_probes` crops against `speed_gallery` synthetic
// templates, each matcher timed on the same probes and gallery.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench/fingerprint_data.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bench/bench_util.h"
#include "common/status.h"
#include "services/fingerprint/eval/eval.h"
#include "services/fingerprint/search/fusion_score.h"
#include "services/fingerprint/formats/fvc_data.h"
#include "services/fingerprint/eval/latent_eval.h"
#include "services/fingerprint/search/searcher.h"
#include "services/fingerprint/eval/synthetic_gallery.h"

ABSL_FLAG(std::string, data, "", "fingerprint data directory (default: fvc_data.h's search)");
ABSL_FLAG(int64_t, padding, 1000, "synthetic non-mates added to every gallery");
ABSL_FLAG(int, cascade_candidates, tessera::fingerprint::kDefaultCascadeCandidates,
          "cascade: LSS-R candidates re-scored per probe");
ABSL_FLAG(std::vector<std::string>, weights,
          std::vector<std::string>({"0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8"}),
          "fusion weights tried on DB1-DB2");
ABSL_FLAG(uint64_t, seed, 20261202, "synthetic padding and crops");
ABSL_FLAG(int, crops, 2, "latent crops per impression");
ABSL_FLAG(double, eer_tie, 0.1, "tuning: mean EER differences below this (percent) are ties");
ABSL_FLAG(int64_t, speed_gallery, 20000, "speed table: synthetic gallery size (0: no speed table)");
ABSL_FLAG(int, speed_probes, 32, "speed table: latent crops searched in one call");

namespace tessera::fingerprint {
namespace {

constexpr float kMissing = -1.0f;  // a template the search did not return

struct Scenario {
  std::string name;
  bool tuning = false;
  std::vector<std::shared_ptr<const StoredTemplate>> gallery;
  std::vector<int64_t> identity;  // per gallery slot
  int real = 0;                   // gallery[0, real) are real impressions
  std::vector<std::vector<MinutiaPoint>> probes;
  std::vector<int64_t> probe_identity;
  std::vector<int> probe_source;  // gallery slot left out
};

// scores[p][g] for every gallery slot (kMissing where not returned).
using ScoreRows = std::vector<std::vector<float>>;

struct Run {
  ScoreRows rows;
  double seconds = 0;
};

struct Metrics {
  double rank1 = 0, rank20 = 0, eer = 0;
};

using bench::NowSeconds;

std::shared_ptr<const StoredTemplate> Entry(int slot, std::vector<MinutiaPoint> minutiae) {
  auto t = std::make_shared<StoredTemplate>();
  t->id = absl::StrCat(slot);
  t->minutiae = std::move(minutiae);
  t->seq = slot + 1;
  return t;
}

absl::Status Pad(const std::vector<BaseTemplate>& bases, Scenario* s, uint64_t seed) {
  SyntheticGalleryOptions o;
  o.seed = seed;
  o.size = absl::GetFlag(FLAGS_padding);
  o.mated_templates = 0;
  TESSERA_ASSIGN_OR_RETURN(SyntheticGallery synthetic, SyntheticGallery::Create(bases, o));
  for (int64_t i = 0; i < synthetic.size(); ++i) {
    s->gallery.push_back(Entry(static_cast<int>(s->gallery.size()), synthetic.Minutiae(i)));
    s->identity.push_back(synthetic.Identity(i));
  }
  return absl::OkStatus();
}

absl::Status AddCrops(Scenario* s, uint64_t seed) {
  SplitMix64 rng(seed);
  for (int c = 0; c < absl::GetFlag(FLAGS_crops); ++c) {
    for (int g = 0; g < s->real; ++g) {
      s->probes.push_back(CropLatent(s->gallery[g]->minutiae, LatentCropParams{}, rng));
      s->probe_identity.push_back(s->identity[g]);
      s->probe_source.push_back(g);
    }
  }
  return absl::OkStatus();
}

// DB1, DB2, latent DB1-2 (tuning), DB3, DB4, latent DB3-4 (validation).
absl::StatusOr<std::vector<Scenario>> MakeScenarios(const std::string& dir, std::vector<BaseTemplate>* all_bases) {
  std::vector<Scenario> out;
  for (int half = 0; half < 2; ++half) {
    Scenario latent;
    latent.name = half == 0 ? "latent DB1-2" : "latent DB3-4";
    latent.tuning = half == 0;
    std::vector<BaseTemplate> latent_bases;
    for (int db = 2 * half + 1; db <= 2 * half + 2; ++db) {
      TESSERA_ASSIGN_OR_RETURN(std::vector<FvcImpression> imps, LoadFvc2002(dir, db));
      Scenario s;
      s.name = absl::StrCat("DB", db);
      s.tuning = latent.tuning;
      std::vector<BaseTemplate> bases;
      for (const FvcImpression& imp : imps) {
        const int64_t id = db * 1000 + imp.finger;
        const int slot = static_cast<int>(s.gallery.size());
        s.probes.push_back(ToMinutiaPoints(imp.view));
        s.probe_identity.push_back(id);
        s.probe_source.push_back(slot);
        s.gallery.push_back(Entry(slot, ToMinutiaPoints(imp.view)));
        s.identity.push_back(id);
        bases.push_back({ToMinutiaPoints(imp.view), id});
        latent.gallery.push_back(Entry(static_cast<int>(latent.gallery.size()), ToMinutiaPoints(imp.view)));
        latent.identity.push_back(id);
      }
      s.real = static_cast<int>(s.gallery.size());
      TESSERA_RETURN_IF_ERROR(Pad(bases, &s, absl::GetFlag(FLAGS_seed) + db));
      latent_bases.insert(latent_bases.end(), bases.begin(), bases.end());
      out.push_back(std::move(s));
    }
    latent.real = static_cast<int>(latent.gallery.size());
    TESSERA_RETURN_IF_ERROR(AddCrops(&latent, absl::GetFlag(FLAGS_seed) + 10 + half));
    TESSERA_RETURN_IF_ERROR(Pad(latent_bases, &latent, absl::GetFlag(FLAGS_seed) + 20 + half));
    all_bases->insert(all_bases->end(), latent_bases.begin(), latent_bases.end());
    out.push_back(std::move(latent));
  }
  return out;
}

absl::StatusOr<Run> Search(const Scenario& s, const std::string& matcher, double weight, int top_k) {
  SearcherOptions o;
  o.matcher = matcher;
  o.device = "cpu";
  o.fusion_weight = weight;
  o.cascade_candidates = absl::GetFlag(FLAGS_cascade_candidates);
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<GallerySearcher> searcher, CreateSearcher(o));
  TESSERA_RETURN_IF_ERROR(searcher->Add(s.gallery));
  Run run;
  const double t0 = NowSeconds();
  TESSERA_ASSIGN_OR_RETURN(auto lists, searcher->Search(s.probes, top_k));
  run.seconds = NowSeconds() - t0;
  run.rows.assign(s.probes.size(), std::vector<float>(s.gallery.size(), kMissing));
  for (size_t p = 0; p < lists.size(); ++p) {
    for (const SearchCandidate& c : lists[p]) run.rows[p][std::stoi(c.id)] = c.score;
  }
  return run;
}

Metrics Evaluate(const Scenario& s, const ScoreRows& rows) {
  Metrics m;
  std::vector<double> genuine, impostor;
  int r1 = 0, r20 = 0;
  for (size_t p = 0; p < rows.size(); ++p) {
    float best_mate = -HUGE_VALF;
    for (size_t g = 0; g < rows[p].size(); ++g) {
      if (static_cast<int>(g) == s.probe_source[p]) continue;
      const bool mate = s.identity[g] == s.probe_identity[p];
      if (mate) best_mate = std::max(best_mate, rows[p][g]);
      if (static_cast<int>(g) < s.real) (mate ? genuine : impostor).push_back(rows[p][g]);
    }
    int rank = 1;
    for (size_t g = 0; g < rows[p].size(); ++g) {
      if (static_cast<int>(g) == s.probe_source[p] || s.identity[g] == s.probe_identity[p]) continue;
      rank += rows[p][g] >= best_mate;
    }
    if (best_mate == kMissing) rank = 1 << 30;  // the mate was not returned
    r1 += rank <= 1;
    r20 += rank <= 20;
  }
  m.rank1 = 100.0 * r1 / rows.size();
  m.rank20 = 100.0 * r20 / rows.size();
  m.eer = 100.0 * ComputeVerificationMetrics(genuine, impostor).eer;
  return m;
}

ScoreRows Fuse(const ScoreRows& lssr, const ScoreRows& dmc, double w) {
  ScoreRows out = lssr;
  for (size_t p = 0; p < out.size(); ++p) {
    for (size_t g = 0; g < out[p].size(); ++g) out[p][g] = FuseScores(lssr[p][g], dmc[p][g], w);
  }
  return out;
}

// matches/s of each matcher on the same crops and synthetic gallery.
int SpeedTable(const std::vector<BaseTemplate>& bases, double weight) {
  const int64_t size = absl::GetFlag(FLAGS_speed_gallery);
  if (size <= 0) return 0;
  Scenario s;
  SyntheticGalleryOptions o;
  o.seed = absl::GetFlag(FLAGS_seed) + 30;
  o.size = size;
  auto synthetic = SyntheticGallery::Create(bases, o);
  if (!synthetic.ok()) {
    std::fprintf(stderr, "%s\n", synthetic.status().ToString().c_str());
    return 1;
  }
  for (int64_t i = 0; i < size; ++i) {
    s.gallery.push_back(Entry(static_cast<int>(i), synthetic->Minutiae(i)));
    s.identity.push_back(synthetic->Identity(i));
  }
  SplitMix64 rng(o.seed);
  for (int p = 0; p < absl::GetFlag(FLAGS_speed_probes); ++p) {
    s.probes.push_back(CropLatent(bases[p % bases.size()].points, LatentCropParams{}, rng));
  }
  std::printf("\n## Speed: %zu latent crops x %lld synthetic templates, one Search call each (CPU, all cores)\n\n",
              s.probes.size(), static_cast<long long>(size));
  std::printf("| matcher | seconds | matches/s | vs lssr |\n|---|---|---|---|\n");
  double lssr_rate = 0;
  for (const std::string m : {"lssr", "cascade", "fusion", "dmc"}) {
    auto r = Search(s, m, weight, 10);
    if (!r.ok()) {
      std::fprintf(stderr, "speed %s: %s\n", m.c_str(), r.status().ToString().c_str());
      return 1;
    }
    const double rate = static_cast<double>(s.probes.size()) * size / r->seconds;
    if (m == "lssr") lssr_rate = rate;
    std::printf("| %s | %.2f | %.0f | %.2f |\n", m.c_str(), r->seconds, rate, rate / lssr_rate);
  }
  return 0;
}

int Main() {
  std::string dir = absl::GetFlag(FLAGS_data);
  dir = FingerprintDataDirOrExit(dir);
  std::vector<double> weights;
  for (const std::string& w : absl::GetFlag(FLAGS_weights)) {
    double v;
    if (!absl::SimpleAtod(w, &v) || !ValidateFusionWeight(v).ok()) {
      std::fprintf(stderr, "--weights: '%s' is not a weight in [0, 1]\n", w.c_str());
      return 2;
    }
    weights.push_back(v);
  }
  std::vector<BaseTemplate> all_bases;
  auto scenarios = MakeScenarios(dir, &all_bases);
  if (!scenarios.ok()) {
    std::fprintf(stderr, "%s\n", scenarios.status().ToString().c_str());
    return 1;
  }
  // lssr and dmc: every score, for the metrics and the weight sweep.
  std::map<std::string, std::vector<Run>> runs;
  for (const Scenario& s : *scenarios) {
    for (const std::string m : {"lssr", "dmc"}) {
      auto r = Search(s, m, kDefaultFusionWeight, static_cast<int>(s.gallery.size()));
      if (!r.ok()) {
        std::fprintf(stderr, "%s %s: %s\n", s.name.c_str(), m.c_str(), r.status().ToString().c_str());
        return 1;
      }
      runs[m].push_back(*std::move(r));
    }
  }
  std::printf("## Fusion weight sweep: EER %% (rank-1 %%) per set; tuned on the DB1-DB2 sets only\n\n|  w |");
  for (const Scenario& s : *scenarios) std::printf(" %s%s |", s.name.c_str(), s.tuning ? " (tuning)" : "");
  std::printf(" tuning mean EER %% |\n|---|");
  for (size_t i = 0; i <= scenarios->size(); ++i) std::printf("---|");
  std::printf("\n");
  double best_w = kDefaultFusionWeight, best_eer = HUGE_VAL, best_r1 = -1;
  const double tie = absl::GetFlag(FLAGS_eer_tie);
  for (double w : weights) {
    double eer = 0, r1 = 0;
    int tuning = 0;
    std::printf("| %.2f |", w);
    for (size_t i = 0; i < scenarios->size(); ++i) {
      const Metrics m = Evaluate((*scenarios)[i], Fuse(runs["lssr"][i].rows, runs["dmc"][i].rows, w));
      std::printf(" %.2f (%.2f) |", m.eer, m.rank1);
      if ((*scenarios)[i].tuning) eer += m.eer, r1 += m.rank1, ++tuning;
    }
    eer /= tuning;
    r1 /= tuning;
    std::printf(" %.3f |\n", eer);
    const bool tied = std::abs(eer - best_eer) < tie;
    const bool better = (!tied && eer < best_eer) ||
                        (tied && (r1 > best_r1 + 1e-9 ||
                                  (std::abs(r1 - best_r1) <= 1e-9 &&
                                   std::abs(w - kDefaultFusionWeight) < std::abs(best_w - kDefaultFusionWeight))));
    if (better) best_w = w, best_eer = eer, best_r1 = r1;
  }
  std::printf("\nchosen on the DB1-DB2 sets: w = %.2f (mean EER %.3f %%, mean rank-1 %.2f %%; EER ties < %.2f %%)\n\n",
              best_w, best_eer, best_r1, tie);

  const int cascade = absl::GetFlag(FLAGS_cascade_candidates);
  for (const Scenario& s : *scenarios) {
    auto f = Search(s, "fusion", best_w, static_cast<int>(s.gallery.size()));
    auto c = Search(s, "cascade", best_w, std::min(cascade, static_cast<int>(s.gallery.size())));
    if (!f.ok() || !c.ok()) {
      std::fprintf(stderr, "%s: %s %s\n", s.name.c_str(), f.status().ToString().c_str(), c.status().ToString().c_str());
      return 1;
    }
    runs["fusion"].push_back(*std::move(f));
    runs["cascade"].push_back(*std::move(c));
  }
  std::printf("## Matchers (CPU searcher, all cores; gallery = real + %lld synthetic non-mates; cascade %d)\n\n",
              static_cast<long long>(absl::GetFlag(FLAGS_padding)), cascade);
  std::printf("| set | split | matcher | gallery | probes | rank-1 %% | rank-20 %% | EER %% | matches/s |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (size_t i = 0; i < scenarios->size(); ++i) {
    const Scenario& s = (*scenarios)[i];
    const char* split = s.tuning ? "tuning" : "validation";
    for (const std::string m : {"lssr", "dmc", "fusion", "cascade"}) {
      const Run& r = runs[m][i];
      const Metrics x = Evaluate(s, r.rows);
      std::printf("| %s | %s | %s | %zu | %zu | %.2f | %.2f | %.2f | %.0f |\n", s.name.c_str(), split, m.c_str(),
                  s.gallery.size(), s.probes.size(), x.rank1, x.rank20, x.eer,
                  static_cast<double>(s.probes.size()) * s.gallery.size() / r.seconds);
    }
  }
  return SpeedTable(all_bases, best_w);
}

}  // namespace
}  // namespace tessera::fingerprint

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tessera::fingerprint::Main();
}
