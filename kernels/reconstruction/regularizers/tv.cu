// CUDA backend of the TV passes: one thread per voxel (grid-stride), the
// stencils of tv_stencil.h. Element-wise: no atomics, deterministic.
#include <cuda_runtime.h>

#include "common/cuda_check.h"
#include "kernels/reconstruction/regularizers/tv_kernels.h"

namespace tessera {
namespace recon {
namespace regularizers {
namespace internal {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535;

template <typename F>
__global__ void ForEachVoxelKernel(int64_t n, F f) {
  for (int64_t v = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; v < n; v += int64_t{gridDim.x} * blockDim.x) f(v);
}

template <typename F>
absl::Status ForEachVoxel(const Stream& stream, const TvGrid& grid, const char* what, F f) {
  if (grid.voxels == 0) return absl::OkStatus();
  const int64_t wanted = (grid.voxels + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(wanted < kMaxBlocks ? wanted : kMaxBlocks);
  ForEachVoxelKernel<<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream.native())>>>(grid.voxels, f);
  return CudaStatus(cudaGetLastError(), what);
}

}  // namespace

// Functors instead of device lambdas: no --extended-lambda needed.
struct PrimalOp {
  TvGrid grid;
  float weight;
  bool non_negative;
  const float* b;
  const float* q;
  float* x;
  __device__ void operator()(int64_t v) const { PrimalFromDualAt(grid, weight, non_negative, b, q, x, v); }
};
struct DualStepOp {
  TvGrid grid;
  float tau, beta;
  const float* x;
  float* p;
  float* r;
  __device__ void operator()(int64_t v) const { DualStepAt(grid, tau, beta, x, p, r, v); }
};
struct MagnitudeOp {
  TvGrid grid;
  float epsilon;
  const float* x;
  float* out;
  __device__ void operator()(int64_t v) const { out[v] = SmoothedMagnitudeAt(grid, epsilon, x, v); }
};
struct GradientOp {
  TvGrid grid;
  float epsilon;
  const float* x;
  float* g;
  __device__ void operator()(int64_t v) const { SmoothedGradientAt(grid, epsilon, x, g, v); }
};

absl::Status PrimalFromDual(const Stream& stream, const TvGrid& grid, float weight, bool non_negative, const float* b,
                            const float* q, float* x) {
  return ForEachVoxel(stream, grid, "tv primal", PrimalOp{grid, weight, non_negative, b, q, x});
}

absl::Status DualStep(const Stream& stream, const TvGrid& grid, float tau, float beta, const float* x, float* p,
                      float* r) {
  return ForEachVoxel(stream, grid, "tv dual step", DualStepOp{grid, tau, beta, x, p, r});
}

absl::Status SmoothedMagnitude(const Stream& stream, const TvGrid& grid, float epsilon, const float* x, float* out) {
  return ForEachVoxel(stream, grid, "tv magnitude", MagnitudeOp{grid, epsilon, x, out});
}

absl::Status SmoothedGradient(const Stream& stream, const TvGrid& grid, float epsilon, const float* x, float* g) {
  return ForEachVoxel(stream, grid, "tv gradient", GradientOp{grid, epsilon, x, g});
}

}  // namespace cuda
}  // namespace internal
}  // namespace regularizers
}  // namespace recon
}  // namespace tessera
