// LSS-R search with and without pruning by the running k-th best (issue 16),
// side by side in one run, top-k lists compared (ids and scores):
//   CPU: one thread through the ALFI pipeline's CPU backend on --cpu_gallery
//        templates: matches/s per core (thread CPU time is the pipeline's
//        wall on 1 thread), old (LssBatchMatcher prune=false) vs new;
// The GPU pipeline scores every pair: its pruning kernel gave wrong top-k
// lists on the H200 and was no faster (2026-12-02: streamed 0.94x, resident
// 1.03x at 10^6 templates), so it was taken out and the GPU rows with it.
//
//   fingerprint_prune_bench [--latents=16] [--top=100]
//       [--cpu_gallery=20000] [--seed=S] [--data=DIR]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/bench_util.h"
#include "bench/fingerprint_bases.h"
#include "common/device.h"
#include "kernels/fingerprint/lss.h"
#include "kernels/fingerprint/mcc.h"
#include "services/fingerprint/search/alfi_pipeline.h"
#include "services/fingerprint/eval/latent_eval.h"
#include "services/fingerprint/eval/synthetic_gallery.h"

ABSL_FLAG(int, latents, 16, "latents per search call");
ABSL_FLAG(int, top, 100, "candidates per latent");
ABSL_FLAG(int64_t, cpu_gallery, 20000, "CPU gallery templates (one thread)");
ABSL_FLAG(uint64_t, seed, 20261130, "seed");
ABSL_FLAG(std::string, data, "", "FVC2002 data directory (default: found)");

namespace tessera {
namespace fingerprint {
namespace {

using bench::NowSeconds;

struct Timed {
  double seconds = 0;
  std::vector<std::vector<Candidate>> top;
};

bool Search(AlfiPipeline& p, BatchMatcher& m, const std::vector<MccTemplate>& latents, Timed* out) {
  const double t0 = NowSeconds();
  auto top = p.Search(m, latents);
  out->seconds = NowSeconds() - t0;
  if (!top.ok()) {
    std::fprintf(stderr, "search: %s\n", std::string(top.status().message()).c_str());
    return false;
  }
  out->top = std::move(*top);
  return true;
}

int Same(const Timed& a, const Timed& b) {
  int n = 0;
  for (size_t i = 0; i < a.top.size(); ++i) n += a.top[i] == b.top[i];
  return n;
}

// Old vs new through `options` on `gallery`: one markdown row.
bool Compare(const char* path, std::shared_ptr<const MccGallery> gallery, const PipelineOptions& options,
             const std::vector<MccTemplate>& latents) {
  auto p = AlfiPipeline::Create(gallery, options);
  if (!p.ok()) {
    std::fprintf(stderr, "pipeline: %s\n", std::string(p.status().message()).c_str());
    return false;
  }
  LssBatchMatcher old_matcher(MccScore::kLssR, LssParams(), MccParams(), cuda::LssCudaKernel::kBlock, false);
  LssBatchMatcher new_matcher(MccScore::kLssR, LssParams(), MccParams(), cuda::LssCudaKernel::kBlock, true);
  (void)(*p)->Search(old_matcher, {latents[0]});  // warm-up
  Timed old_run, new_run;
  if (!Search(**p, old_matcher, latents, &old_run) || !Search(**p, new_matcher, latents, &new_run)) return false;
  const double matches = static_cast<double>(gallery->num_templates()) * latents.size();
  const double scale = options.backend == Backend::kCpu ? 1e3 : 1e6;
  std::printf("| %s | %d | %zu | %.1f | %.1f | **%.2fx** | %d of %zu |\n", path, gallery->num_templates(),
              latents.size(), matches / old_run.seconds / scale, matches / new_run.seconds / scale,
              old_run.seconds / new_run.seconds, Same(old_run, new_run), latents.size());
  std::fflush(stdout);
  return true;
}

int Run() {
  const int L = absl::GetFlag(FLAGS_latents);
  const uint64_t seed = absl::GetFlag(FLAGS_seed);
  std::printf("fingerprint_prune_bench (CPU); LSS-R popcount path %s\n",
              cpu::PopcountPath(MakeLssConstants(LssParams())));
  const std::vector<BaseTemplate> bases = LoadBenchBases(absl::GetFlag(FLAGS_data), seed);
  std::vector<MccTemplate> latents;
  for (int i = 0; i < L; ++i) {
    const BaseTemplate& b = bases[(static_cast<size_t>(i) * 37 + 3) % bases.size()];
    SplitMix64 rng(seed + 7919 * i);
    latents.push_back(cpu::BuildMccTemplate(CropLatent(b.points, LatentCropParams(), rng)));
  }
  const int64_t n = absl::GetFlag(FLAGS_cpu_gallery);
  SyntheticGalleryOptions so;
  so.seed = seed;
  so.size = n;
  so.mated_templates = std::min<int64_t>(n, 4 * static_cast<int64_t>(bases.size()));
  auto synthetic = SyntheticGallery::Create(bases, so);
  if (!synthetic.ok()) {
    std::fprintf(stderr, "%s\n", std::string(synthetic.status().message()).c_str());
    return 1;
  }
  auto gallery = std::make_shared<MccGallery>();
  std::vector<int64_t> identity;
  const double g0 = NowSeconds();
  if (!synthetic->AppendTo(Stream::Cpu(), 0, n, gallery.get(), &identity).ok()) return 1;
  std::printf("top-%d lists of %d latent crops; gallery built in %.1f s\n\n", absl::GetFlag(FLAGS_top), L, NowSeconds() - g0);
  std::printf("| path | templates | latents | old (K/s) | new | new / old | top-k identical |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---|\n");
  PipelineOptions cpu_options;
  cpu_options.threads = 1;
  cpu_options.top_k = absl::GetFlag(FLAGS_top);
  cpu_options.batch_templates = 4096;
  if (!Compare("CPU, 1 thread (K matches/s per core)", gallery, cpu_options, latents)) return 1;
  return 0;
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tessera::fingerprint::Run();
}
