// CPU backend of the TV passes: the stencils of tv_stencil.h over voxel
// ranges on ParallelFor's threads (each voxel written by one thread, so the
// result does not depend on the thread count).
#include "common/parallel.h"
#include "kernels/reconstruction/regularizers/tv_kernels.h"

namespace tessera {
namespace recon {
namespace regularizers {
namespace internal {
namespace cpu {
namespace {

constexpr int64_t kMinVoxelsPerChunk = 4096;

template <typename F>
void ForEachVoxel(const TvGrid& grid, F f) {
  ParallelFor(
      grid.voxels,
      [&](int64_t begin, int64_t end, int) {
        for (int64_t v = begin; v < end; ++v) f(v);
      },
      kMinVoxelsPerChunk);
}

}  // namespace

absl::Status PrimalFromDual(const Stream&, const TvGrid& grid, float weight, bool non_negative, const float* b,
                            const float* q, float* x) {
  ForEachVoxel(grid, [&](int64_t v) { PrimalFromDualAt(grid, weight, non_negative, b, q, x, v); });
  return absl::OkStatus();
}

absl::Status DualStep(const Stream&, const TvGrid& grid, float tau, float beta, const float* x, float* p, float* r) {
  ForEachVoxel(grid, [&](int64_t v) { DualStepAt(grid, tau, beta, x, p, r, v); });
  return absl::OkStatus();
}

absl::Status SmoothedMagnitude(const Stream&, const TvGrid& grid, float epsilon, const float* x, float* out) {
  ForEachVoxel(grid, [&](int64_t v) { out[v] = SmoothedMagnitudeAt(grid, epsilon, x, v); });
  return absl::OkStatus();
}

absl::Status SmoothedGradient(const Stream&, const TvGrid& grid, float epsilon, const float* x, float* g) {
  ForEachVoxel(grid, [&](int64_t v) { SmoothedGradientAt(grid, epsilon, x, g, v); });
  return absl::OkStatus();
}

}  // namespace cpu
}  // namespace internal
}  // namespace regularizers
}  // namespace recon
}  // namespace tessera
