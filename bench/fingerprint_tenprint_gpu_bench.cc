// Ten-print search throughput: a card's fingers searched in one pass over the
// gallery (TenPrintSearchBatched: SearchOptions::probe_filters, each finger
// limited to its finger position; on the GPU one ALFI pipeline run for all
// fingers) against one search per finger (TenPrintSearch), side by side in
// one run on the same searcher.
//
//   fingerprint_tenprint_gpu_bench [--sizes=100000,1000000] [--cards=4] [--fingers=10]
//       [--top=10] [--repeats=3] [--device=auto|cpu|cuda] [--seed=S] [--data=DIR]
//
// Gallery: synthetic_gallery.h templates; template i is subject i / 10's
// finger 1 + i % 10 (so a filter by position keeps a tenth of the gallery).
// Cards: --cards cards of --fingers fingers, each finger a latent-like crop
// (latent_eval.h CropLatent) of a real impression, given positions 1..10.
// Per size: a warm-up of each mode (the GPU pipeline is built by the first),
// then --repeats rounds of batched then per-finger; the best wall per card of
// each, the ratio, and whether both gave the same subjects.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bench/bench_util.h"
#include "bench/fingerprint_bases.h"
#include "bench/searcher_fill.h"
#include "common/device.h"
#include "common/parallel.h"
#include "services/fingerprint/eval/latent_eval.h"
#include "services/fingerprint/eval/synthetic_gallery.h"
#include "services/fingerprint/search/searcher.h"
#include "services/fingerprint/search/tenprint_search.h"

namespace tessera {
namespace fingerprint {
namespace {

using bench::NowSeconds;

struct Config {
  std::vector<int64_t> sizes = {100000, 1000000};
  int cards = 4;
  int fingers = 10;
  int top = 10;
  int repeats = 3;
  std::string device = "auto";
  uint64_t seed = 20261206;
  std::string data_dir;
};

void Annotate(int64_t id, StoredTemplate* t) {
  t->metadata.subject_id = absl::StrCat("s", id / 10);
  t->metadata.finger_position = 1 + static_cast<int>(id % 10);
}

bool Grow(const SyntheticGallery& synthetic, const Stream& stream, int64_t from, int64_t to,
          GallerySearcher* searcher) {
  constexpr int64_t kBlock = 65536;
  for (int64_t b = from; b < to; b += kBlock) {
    const int64_t e = std::min(to, b + kBlock);
    MccGallery block;
    if (absl::Status s = synthetic.AppendTo(stream, b, e, &block, nullptr); !s.ok()) {
      std::fprintf(stderr, "gallery: %s\n", std::string(s.message()).c_str());
      return false;
    }
    if (b == from) searcher->Reserve(to - from, static_cast<int64_t>(block.num_cylinders()) * (to - from) / (e - b));
    if (!AppendToSearcher(block, 0, e - b, searcher, /*first_id=*/b, /*reserve=*/false, Annotate)) return false;
  }
  return true;
}

int Run(const Config& cfg) {
  SearcherOptions so;
  so.device = cfg.device;
  auto created = CreateSearcher(so);
  if (!created.ok()) {
    std::fprintf(stderr, "searcher: %s\n", std::string(created.status().message()).c_str());
    return 1;
  }
  GallerySearcher& searcher = **created;
  const bool gpu = cfg.device == "cuda" || (cfg.device == "auto" && DeviceRegistry::Get().cuda_available());
  std::printf("fingerprint_tenprint_gpu_bench: %s; %d CPU threads; searcher device %s; %d cards of %d fingers, "
              "top %d subjects, best of %d rounds\n",
              DeviceRegistry::Get().Describe().c_str(), CpuThreads(), cfg.device.c_str(), cfg.cards, cfg.fingers,
              cfg.top, cfg.repeats);
  const std::vector<BaseTemplate> bases = LoadBenchBases(cfg.data_dir, cfg.seed);
  std::vector<std::vector<CardFinger>> cards(cfg.cards);
  for (int c = 0; c < cfg.cards; ++c) {
    for (int f = 0; f < cfg.fingers; ++f) {
      const BaseTemplate& b = bases[(static_cast<size_t>(c * cfg.fingers + f) * 37 + 3) % bases.size()];
      SplitMix64 rng(cfg.seed + 7919 * (c * cfg.fingers + f));
      cards[c].push_back({1 + f % 10, CropLatent(b.points, LatentCropParams(), rng)});
    }
  }
  std::vector<int64_t> sizes = cfg.sizes;
  std::sort(sizes.begin(), sizes.end());
  auto synthetic = SyntheticGallery::Create(bases, BenchGalleryOptions(sizes.back(), cfg.seed, bases.size()));
  absl::StatusOr<Stream> build_stream = gpu ? Stream::Create(Backend::kCuda) : absl::StatusOr<Stream>(Stream::Cpu());
  for (const absl::Status& s : {synthetic.status(), build_stream.status()}) {
    if (s.ok()) continue;
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 1;
  }
  TenPrintOptions options;
  options.top_k = cfg.top;
  CardSearchFn batched = [&](const std::vector<std::vector<MinutiaPoint>>& probes,
                             const std::vector<TemplateFilter>& filters, int k) {
    SearchOptions o;
    o.top_k = k;
    o.probe_filters = filters;
    return searcher.Search(probes, o);
  };
  FingerSearchFn one_by_one = [&](const std::vector<MinutiaPoint>& probe, const TemplateFilter& filter,
                                  int k) -> absl::StatusOr<std::vector<SearchCandidate>> {
    SearchOptions o;
    o.top_k = k;
    o.filter = filter;
    auto r = searcher.Search({probe}, o);
    if (!r.ok()) return r.status();
    return std::move((*r)[0]);
  };
  for (int64_t size : sizes) {
    const double g0 = NowSeconds();
    if (!Grow(*synthetic, *build_stream, searcher.size(), size, &searcher)) return 1;
    std::printf("\n== %lld templates (%lld subjects x 10 fingers); built and appended in %.1f s ==\n",
                static_cast<long long>(size), static_cast<long long>(size / 10), NowSeconds() - g0);
    std::fflush(stdout);
    double best_batched = 1e30, best_single = 1e30;
    bool same = true;
    for (int round = -1; round < cfg.repeats; ++round) {  // round -1: warm-up
      double t0 = NowSeconds();
      std::vector<std::vector<SubjectMatch>> a, b;
      for (const auto& card : cards) {
        auto r = TenPrintSearchBatched(card, options, batched);
        if (!r.ok()) {
          std::fprintf(stderr, "batched: %s\n", std::string(r.status().message()).c_str());
          return 1;
        }
        a.push_back(std::move(*r));
      }
      const double batched_s = (NowSeconds() - t0) / cfg.cards;
      t0 = NowSeconds();
      for (const auto& card : cards) {
        auto r = TenPrintSearch(card, options, one_by_one);
        if (!r.ok()) {
          std::fprintf(stderr, "per finger: %s\n", std::string(r.status().message()).c_str());
          return 1;
        }
        b.push_back(std::move(*r));
      }
      const double single_s = (NowSeconds() - t0) / cfg.cards;
      for (size_t c = 0; c < a.size(); ++c) {
        same = same && a[c].size() == b[c].size();
        for (size_t i = 0; same && i < a[c].size(); ++i) same = a[c][i].subject_id == b[c][i].subject_id;
      }
      if (round < 0) continue;
      best_batched = std::min(best_batched, batched_s);
      best_single = std::min(best_single, single_s);
    }
    // Each finger against its position's tenth of the gallery (what a filter keeps).
    const double matches = static_cast<double>(size) / 10 * cfg.fingers;
    std::printf("one pass (probe_filters): %8.1f ms/card  %7.1f M filtered matches/s\n", best_batched * 1e3,
                matches / best_batched / 1e6);
    std::printf("one search per finger:    %8.1f ms/card  %7.1f M filtered matches/s\n", best_single * 1e3,
                matches / best_single / 1e6);
    std::printf("per-finger / one-pass wall: %.2fx; same subjects: %s\n", best_single / best_batched,
                same ? "yes" : "NO");
    std::fflush(stdout);
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
    auto value = [&](const char* name) { return tessera::bench::FlagValue(a, name); };
    int64_t n = 0;
    bool ok = true;
    if (const char* v = value("--sizes")) {
      ok = tessera::bench::ParseIntList(v, 10, (int64_t{1} << 31) - 2, &cfg.sizes);
    } else if (const char* v = value("--cards")) {
      ok = absl::SimpleAtoi(v, &n) && n >= 1 && n <= 1000;
      cfg.cards = static_cast<int>(n);
    } else if (const char* v = value("--fingers")) {
      ok = absl::SimpleAtoi(v, &n) && n >= 1 && n <= 10;
      cfg.fingers = static_cast<int>(n);
    } else if (const char* v = value("--top")) {
      ok = absl::SimpleAtoi(v, &n) && n >= 1 && n <= 100;
      cfg.top = static_cast<int>(n);
    } else if (const char* v = value("--repeats")) {
      ok = absl::SimpleAtoi(v, &n) && n >= 1 && n <= 100;
      cfg.repeats = static_cast<int>(n);
    } else if (const char* v = value("--device")) {
      cfg.device = v;
      ok = cfg.device == "auto" || cfg.device == "cpu" || cfg.device == "cuda";
    } else if (const char* v = value("--seed")) {
      ok = absl::SimpleAtoi(v, &cfg.seed);
    } else if (const char* v = value("--data")) {
      cfg.data_dir = v;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr,
                   "usage: %s [--sizes=N,N,...] [--cards=C] [--fingers=1-10] [--top=K] [--repeats=R]\n"
                   "          [--device=auto|cpu|cuda] [--seed=S] [--data=DIR]\n",
                   argv[0]);
      return 2;
    }
  }
  return Run(cfg);
}
