// Prints the model of the multi-GPU greedy deformable run (issue 13) as
// markdown: per-iteration traffic of one rank (from the message sizes of
// kernels/parallel/sharded_greedy_step, see multi_gpu_model.h), the time per
// iteration and per multi-scale run, against the seed's ~58 s on 8 A6000s
// and the goal of < 10 s on 8 H200s. Re-run with measured single-GPU times:
//
//   multi_gpu_model --iteration_ms_512=29.0 --sampler_ms_512=2.834 --gpus=8 \
//                   --fixed=1550x1550x1550 --moving=1550x1550x1550
//
// No GPU needed: it is arithmetic on the parameters.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "kernels/registration/sharded/multi_gpu_model.h"

ABSL_FLAG(std::string, fixed, "1550x1550x1550", "fixed grid (the seed's 100 um ex-vivo brain: ~3.7 G voxels)");
ABSL_FLAG(std::string, moving, "1550x1550x1550",
          "moving image (worst case: as large as the fixed one; the seed's 250 um in-vivo scan is ~620^3)");
ABSL_FLAG(std::string, gpus, "1,2,4,8", "GPU counts to tabulate");
ABSL_FLAG(double, link_gbps, 360, "effective NVLink GB/s per GPU per direction (H200: 900 GB/s both ways)");
ABSL_FLAG(double, latency_us, 15, "latency per message");
ABSL_FLAG(double, iteration_ms_512, 29.0, "measured single-GPU greedy LNCC iteration at 512^3 (H200, 2026-12-01)");
ABSL_FLAG(double, sampler_ms_512, 2.834, "measured sampler fwd+bwd at 512^3 (H200, 2026-11-30)");
ABSL_FLAG(double, bytes_per_voxel, 92, "device bytes per fixed voxel of the single-GPU pipeline (measured 2026-12-01)");
ABSL_FLAG(double, gpu_memory_gb, 141, "device memory per GPU (H200: 141 GB)");
ABSL_FLAG(int64_t, reach, 32, "moving slices per side a bounded sampler would fetch");
ABSL_FLAG(std::string, scales, "4,2,1", "pyramid factors");
ABSL_FLAG(std::string, iterations, "200,100,100", "iterations per scale (registrar defaults)");
ABSL_FLAG(int, window, 7, "LNCC window");

namespace {

using tessera::parallel::ClusterModel;
using tessera::parallel::GreedyIterationTraffic;
using tessera::parallel::GreedyStepOptions;
using tessera::parallel::IterationTime;
using tessera::parallel::IterationTraffic;
using tessera::parallel::ModelIteration;
using tessera::registration::Dims3;

bool ParseDims(const std::string& s, Dims3* d) {
  std::vector<std::string> p = absl::StrSplit(s, 'x');
  return p.size() == 3 && absl::SimpleAtoi(p[0], &d->nx) && absl::SimpleAtoi(p[1], &d->ny) &&
         absl::SimpleAtoi(p[2], &d->nz);
}

std::vector<int> ParseInts(const std::string& s) {
  std::vector<int> out;
  for (absl::string_view t : absl::StrSplit(s, ',')) {
    int v;
    if (absl::SimpleAtoi(t, &v)) out.push_back(v);
  }
  return out;
}

Dims3 Downsampled(const Dims3& d, int f) {
  auto r = [f](int64_t n) { return std::max<int64_t>(1, (n + f / 2) / f); };
  return {r(d.nx), r(d.ny), r(d.nz)};
}

double Gb(int64_t bytes) { return static_cast<double>(bytes) / 1e9; }

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  Dims3 fixed, moving;
  if (!ParseDims(absl::GetFlag(FLAGS_fixed), &fixed) || !ParseDims(absl::GetFlag(FLAGS_moving), &moving)) {
    std::fprintf(stderr, "--fixed/--moving must look like 1550x1550x1550\n");
    return 2;
  }
  ClusterModel m;
  m.link_gb_per_s = absl::GetFlag(FLAGS_link_gbps);
  m.message_latency_us = absl::GetFlag(FLAGS_latency_us);
  m.iteration_ms_per_512cube = absl::GetFlag(FLAGS_iteration_ms_512);
  m.sampler_ms_per_512cube = absl::GetFlag(FLAGS_sampler_ms_512);
  m.bounded_reach_slices = absl::GetFlag(FLAGS_reach);
  GreedyStepOptions o;
  o.lncc.window = absl::GetFlag(FLAGS_window);
  const std::vector<int> gpus = ParseInts(absl::GetFlag(FLAGS_gpus));
  const std::vector<int> scales = ParseInts(absl::GetFlag(FLAGS_scales));
  const std::vector<int> iters = ParseInts(absl::GetFlag(FLAGS_iterations));

  std::printf("# Multi-GPU greedy LNCC registration model\n\n");
  std::printf("fixed %lldx%lldx%lld (%.2f G voxels), moving %lldx%lldx%lld; link %.0f GB/s/direction, latency %.0f us, "
              "iteration %.2f ms and sampler %.3f ms per 512^3 on one GPU, LNCC window %d, halo W = %lld slices\n\n",
              (long long)fixed.nx, (long long)fixed.ny, (long long)fixed.nz, fixed.size() / 1e9, (long long)moving.nx,
              (long long)moving.ny, (long long)moving.nz, m.link_gb_per_s, m.message_latency_us,
              m.iteration_ms_per_512cube, m.sampler_ms_per_512cube, o.lncc.window,
              (long long)tessera::parallel::GreedyStepHalo(o));

  std::printf("## Full-resolution iteration, busiest rank\n\n");
  std::printf("| GPUs | voxels/GPU (M) | memory/GPU GB (fits) | ring GB | halo GB (minimal) | compute ms | ring ms (exposed) | "
              "halo ms | latency ms | iteration ms | prefetched ring ms | bounded ms |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  const double gpu_gb = absl::GetFlag(FLAGS_gpu_memory_gb);
  for (int h : gpus) {
    if (h > fixed.nz || h > moving.nz) continue;
    const int rank = h > 2 ? 1 : 0;  // an interior rank has two neighbours
    auto t = GreedyIterationTraffic(fixed, moving, h, rank, o);
    if (!t.ok()) {
      std::printf("| %d | %s |\n", h, std::string(t.status().message()).c_str());
      continue;
    }
    const int64_t per_rank = fixed.size() / h;
    const IterationTime it = ModelIteration(per_rank, *t, m);
    // Fields and images of the slab, plus two moving shards in the ring.
    const double mem = absl::GetFlag(FLAGS_bytes_per_voxel) * per_rank / 1e9 +
                       (h > 1 ? 2.0 * 4 * moving.size() / h / 1e9 : 0.0);
    std::printf("| %d | %.0f | %.1f (%s) | %.2f | %.3f (%.3f) | %.1f | %.1f (%.1f) | %.2f | %.2f | %.1f | %.1f | %.1f |\n", h,
                per_rank / 1e6, mem, mem <= gpu_gb ? "yes" : "no", Gb(t->ring_bytes), Gb(t->halo_bytes), Gb(t->halo_bytes_minimal), it.compute_ms,
                it.ring_ms, it.ring_exposed_ms, it.halo_ms, it.latency_ms, it.total_ms, it.total_prefetched_ms,
                it.total_bounded_ms);
  }

  std::printf("\n## Whole multi-scale run (deformable stage), seconds\n\n");
  std::printf("| GPUs | as implemented | prefetched ring | bounded sampler + minimal halos | seed (8x A6000) | goal (8x H200) |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (int h : gpus) {
    double total = 0, prefetched = 0, bounded = 0;
    bool ok = true;
    for (size_t s = 0; s < scales.size(); ++s) {
      const Dims3 fs = Downsampled(fixed, scales[s]), ms = Downsampled(moving, scales[s]);
      const int its = iters.empty() ? 0 : iters[std::min(s, iters.size() - 1)];
      // Coarse levels whose slabs would be thinner than the halo run on fewer GPUs.
      int hs = h;
      while (hs > 1 && !GreedyIterationTraffic(fs, ms, hs, hs > 2 ? 1 : 0, o).ok()) hs /= 2;
      auto t = GreedyIterationTraffic(fs, ms, hs, hs > 2 ? 1 : 0, o);
      if (!t.ok()) {
        ok = false;
        break;
      }
      const IterationTime it = ModelIteration(fs.size() / hs, *t, m);
      total += its * it.total_ms / 1e3;
      prefetched += its * it.total_prefetched_ms / 1e3;
      bounded += its * it.total_bounded_ms / 1e3;
    }
    if (!ok) continue;
    std::printf("| %d | %.1f | %.1f | %.1f | ~58 | < 10 |\n", h, total, prefetched, bounded);
  }
  std::printf("\nExcluded: reading and writing the volumes, the pyramid and the rigid/affine stages "
              "(single-GPU work on <= 1/8 of the voxels), and convergence stopping early.\n");
  return 0;
}
