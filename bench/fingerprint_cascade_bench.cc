// Can "cascade" be the default 1:N matcher? Search throughput of the
// service's searcher (searcher.h) with matcher "lssr" and with "cascade" at
// several cascade_candidates, side by side in one run: the same gallery, the
// same probes, the same top_k, calls interleaved round by round.
//
//   fingerprint_cascade_bench [--sizes=100000,1000000] [--latents=16] [--top=10]
//       [--candidates=10,25,50,100,200] [--repeats=3] [--device=auto|cpu|cuda]
//       [--seed=S] [--data=DIR]
//
// Gallery: synthetic_gallery.h (4 perturbed impressions of each real FVC2002
// impression, the mates; the rest impressions of synthetic identities),
// descriptors on the GPU when the searcher runs there, appended to the
// searcher with their cylinders (as a snapshot reload does); sizes grow one
// gallery (a smaller size is a prefix of the next). Probes: --latents crops
// of 12-30 minutiae of real impressions (latent_eval.h CropLatent), all in
// one Search call, as fingerprint_pipeline_bench's searcher rows.
// Per size: a warm-up call per matcher (the GPU pipeline is built by the
// first), then --repeats rounds of lssr then cascade at each count. Row:
// best wall of the rounds (descriptors + scoring + top-k: the whole call),
// probes/s and gallery matches/s from it, cascade / lssr throughput (lssr's
// best wall over the row's), the same from the median process CPU time of a
// call (all threads: on a shared machine what the call cost, whatever else
// ran; the fair ratio when both use every core, as both do on the CPU), the
// cascade's extra CPU ms per probe over lssr, and mate at rank 1. With a
// GPU, read the wall columns: CPU time is then only the host's share.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "bench/fingerprint_bases.h"
#include "bench/searcher_fill.h"
#include "common/device.h"
#include "common/parallel.h"
#include "kernels/fingerprint/mcc.h"
#include "services/fingerprint/eval/latent_eval.h"
#include "services/fingerprint/eval/synthetic_gallery.h"
#include "services/fingerprint/search/fusion_score.h"
#include "services/fingerprint/search/searcher.h"

namespace tessera {
namespace fingerprint {
namespace {

using bench::NowSeconds;

struct Config {
  std::vector<int64_t> sizes = {100000, 1000000};
  int latents = 16;
  int top = 10;
  std::vector<int> candidates = {10, 25, 50, 100, 200};
  int repeats = 3;
  std::string device = "auto";
  uint64_t seed = 20261130;
  std::string data_dir;
};

// Appends synthetic templates [from, to) to the searcher in blocks (one
// block's arrays at a time besides the searcher's), their identities to
// `identity`; id = the template index.
bool Grow(const SyntheticGallery& synthetic, const Stream& stream, int64_t from, int64_t to,
          GallerySearcher* searcher, std::vector<int64_t>* identity) {
  constexpr int64_t kBlock = 65536;
  for (int64_t b = from; b < to; b += kBlock) {
    const int64_t e = std::min(to, b + kBlock);
    MccGallery block;
    if (absl::Status s = synthetic.AppendTo(stream, b, e, &block, identity); !s.ok()) {
      std::fprintf(stderr, "gallery: %s\n", std::string(s.message()).c_str());
      return false;
    }
    if (b == from) searcher->Reserve(to - from, static_cast<int64_t>(block.num_cylinders()) * (to - from) / (e - b));
    if (!AppendToSearcher(block, 0, e - b, searcher, /*first_id=*/b, /*reserve=*/false)) return false;
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
  std::printf("fingerprint_cascade_bench: %s; %d CPU threads; searcher device %s (default matcher %s, "
              "default cascade_candidates %d); %d latent crops per Search call, top_k %d, best of %d rounds\n",
              DeviceRegistry::Get().Describe().c_str(), CpuThreads(), cfg.device.c_str(), searcher.matcher().c_str(),
              kDefaultCascadeCandidates, cfg.latents, cfg.top, cfg.repeats);

  const std::vector<BaseTemplate> bases = LoadBenchBases(cfg.data_dir, cfg.seed);
  std::vector<std::vector<MinutiaPoint>> probes;
  std::vector<int64_t> probe_identity;
  for (int i = 0; i < cfg.latents; ++i) {
    const BaseTemplate& b = bases[(static_cast<size_t>(i) * 37 + 3) % bases.size()];
    SplitMix64 rng(cfg.seed + 7919 * i);
    probes.push_back(CropLatent(b.points, LatentCropParams(), rng));
    probe_identity.push_back(b.identity);
  }
  std::vector<int64_t> sizes = cfg.sizes;
  std::sort(sizes.begin(), sizes.end());
  const SyntheticGalleryOptions go = BenchGalleryOptions(sizes.back(), cfg.seed, bases.size());
  auto synthetic = SyntheticGallery::Create(bases, go);
  // Descriptors of the gallery built where the search runs.
  absl::StatusOr<Stream> build_stream = gpu ? Stream::Create(Backend::kCuda) : absl::StatusOr<Stream>(Stream::Cpu());
  for (const absl::Status& s : {synthetic.status(), build_stream.status()}) {
    if (s.ok()) continue;
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 1;
  }

  // Row 0: lssr; row 1 + j: cascade at cfg.candidates[j].
  struct Case {
    std::string label;
    std::string matcher;
    int candidates;
  };
  std::vector<Case> cases = {{"lssr", "lssr", 0}};
  for (int c : cfg.candidates) cases.push_back({absl::StrCat("cascade ", c), "cascade", c});

  std::vector<int64_t> identity;
  for (int64_t size : sizes) {
    const double g0 = NowSeconds();
    if (!Grow(*synthetic, *build_stream, searcher.size(), size, &searcher, &identity)) return 1;
    std::printf("\n== %lld templates (%lld mated impressions of the real fingers); generated + descriptors (%s) + "
                "appended in %.1f s ==\n",
                static_cast<long long>(size), static_cast<long long>(std::min(size, go.mated_templates)),
                gpu ? "GPU" : "CPU", NowSeconds() - g0);
    std::fflush(stdout);
    auto search = [&](const Case& c, const std::vector<std::vector<MinutiaPoint>>& p, SearchStats* stats) {
      SearchOptions o;
      o.top_k = cfg.top;
      o.matcher = c.matcher;
      o.cascade_candidates = c.candidates;
      return searcher.Search(p, o, stats);
    };
    // Warm-up: builds the GPU pipeline (lssr), loads DMC's kernels (cascade).
    const double w0 = NowSeconds();
    for (const Case& c : {cases[0], cases.back()}) {
      if (auto r = search(c, {probes[0]}, nullptr); !r.ok()) {
        std::fprintf(stderr, "%s: %s\n", c.label.c_str(), std::string(r.status().message()).c_str());
        return 1;
      }
    }
    std::printf("warm-up (one probe per matcher; with a GPU, builds the searcher's pipeline): %.2f s; "
                "load average %.2f\n",
                NowSeconds() - w0, bench::LoadAverage());
    std::vector<std::vector<double>> walls(cases.size()), cpus(cases.size());
    std::vector<SearchStats> best_stats(cases.size());
    std::vector<int> rank1(cases.size(), 0);
    for (int round = 0; round < cfg.repeats; ++round) {
      for (size_t k = 0; k < cases.size(); ++k) {
        SearchStats stats;
        const double c0 = bench::ProcessCpuSeconds();
        const double t0 = NowSeconds();
        auto r = search(cases[k], probes, &stats);
        const double wall = NowSeconds() - t0;
        cpus[k].push_back(bench::ProcessCpuSeconds() - c0);
        if (!r.ok()) {
          std::fprintf(stderr, "%s: %s\n", cases[k].label.c_str(), std::string(r.status().message()).c_str());
          return 1;
        }
        if (walls[k].empty() || wall < *std::min_element(walls[k].begin(), walls[k].end())) best_stats[k] = stats;
        walls[k].push_back(wall);
        if (round == 0) {
          for (int i = 0; i < cfg.latents; ++i) {
            int64_t t = -1;
            rank1[k] += !(*r)[i].empty() && absl::SimpleAtoi((*r)[i][0].id, &t) && identity[t] == probe_identity[i];
          }
        }
      }
    }
    const double lssr_best = *std::min_element(walls[0].begin(), walls[0].end());
    const double lssr_cpu = bench::Median(cpus[0]);
    std::printf("load average after the rounds %.2f\n\n"
                "| templates | matcher | backend | wall s (best of %d) | all walls s | probes/s | gallery M matches/s "
                "| vs lssr (wall) | CPU s (median) | vs lssr (CPU) | extra CPU ms/probe | prepare / score s | "
                "mate rank 1 |\n"
                "|---:|---|---|---:|---|---:|---:|---:|---:|---:|---:|---|---:|\n",
                bench::LoadAverage(), cfg.repeats);
    for (size_t k = 0; k < cases.size(); ++k) {
      const double best = *std::min_element(walls[k].begin(), walls[k].end());
      const double cpu = bench::Median(cpus[k]);
      std::string all;
      for (double w : walls[k]) absl::StrAppend(&all, all.empty() ? "" : " ", absl::StrFormat("%.3f", w));
      std::printf("| %lld | %s | %s | %.3f | %s | %.1f | %.2f | **%.3f** | %.2f | **%.3f** | %.1f | %.3f / %.3f | "
                  "%d / %d |\n",
                  static_cast<long long>(size), cases[k].label.c_str(), best_stats[k].backend.c_str(), best,
                  all.c_str(), cfg.latents / best, size * static_cast<double>(cfg.latents) / best / 1e6,
                  lssr_best / best, cpu, lssr_cpu / cpu, 1e3 * (cpu - lssr_cpu) / cfg.latents,
                  best_stats[k].prepare_seconds, best_stats[k].score_seconds, rank1[k], cfg.latents);
    }
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
    std::vector<int64_t> list;
    bool ok = true;
    if (const char* v = value("--sizes")) {
      ok = tessera::bench::ParseIntList(v, 1, (int64_t{1} << 31) - 2, &cfg.sizes);
    } else if (const char* v = value("--latents")) {
      ok = absl::SimpleAtoi(v, &n) && n >= 1 && n <= 4096;
      cfg.latents = static_cast<int>(n);
    } else if (const char* v = value("--top")) {
      ok = absl::SimpleAtoi(v, &n) && n >= 1 && n <= kMaxCascadeCandidates;
      cfg.top = static_cast<int>(n);
    } else if (const char* v = value("--candidates")) {
      ok = tessera::bench::ParseIntList(v, 1, kMaxCascadeCandidates, &list);
      cfg.candidates.assign(list.begin(), list.end());
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
                   "usage: %s [--sizes=N,N,...] [--latents=L] [--top=K] [--candidates=N,N,... (1-%d)]\n"
                   "          [--repeats=R] [--device=auto|cpu|cuda] [--seed=S] [--data=DIR]\n",
                   argv[0], kMaxCascadeCandidates);
      return 2;
    }
  }
  return Run(cfg);
}
