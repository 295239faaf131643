// CUDA slab kernel of the fused in-place greedy composition (lean_compose.h):
// one thread per voxel of the slab, x fastest (coalesced reads of g, m, v and
// of u's neighbourhood, coalesced writes into the slab buffer).
#include <cuda_runtime.h>

#include "common/cuda_check.h"
#include "kernels/registration/lean_compose.h"
#include "kernels/registration/lean_compose_math.h"

namespace tessera {
namespace registration {
namespace lean_internal {
namespace {

constexpr int kThreads = 256;

template <typename GradT>
__global__ void ComposeSlabKernel(ComposeParams p, const float* __restrict__ u, const GradT* __restrict__ grad,
                                  int64_t z0, int64_t count, float* __restrict__ out) {
  const int64_t plane = p.dims.nx * p.dims.ny;
  for (int64_t t = blockIdx.x * int64_t{kThreads} + threadIdx.x; t < count; t += int64_t{gridDim.x} * kThreads) {
    const int64_t idx = z0 * plane + t;
    const int64_t i = idx % p.dims.nx;
    const int64_t j = (idx / p.dims.nx) % p.dims.ny;
    const int64_t k = idx / plane;
    ComposeVoxel(p, u, grad, i, j, k, idx, out + t, count);
  }
}

// The same per voxel on an (x, y, slice) grid: blocks of 32 x 8 voxels of one
// slice, indices from the block coordinates (no divisions).
constexpr int kBlockX = 32;
constexpr int kBlockY = kThreads / kBlockX;

// Index: int64_t, or int32_t (GreedyStep::cuda_index32, where 3 * dims.size()
// < 2^31: the same floats with a third of the index instructions).
template <typename GradT, typename Index = int64_t>
__global__ void __launch_bounds__(kThreads)
    ComposeSlabKernel3d(ComposeParams p, const float* __restrict__ u, const GradT* __restrict__ grad, int64_t z0,
                        int64_t count, float* __restrict__ out) {
  const Index i = Index(blockIdx.x) * kBlockX + Index(threadIdx.x);
  const Index j = Index(blockIdx.y) * kBlockY + Index(threadIdx.y);
  if (i >= p.dims.nx || j >= p.dims.ny) return;
  const Index k = Index(z0) + Index(blockIdx.z);
  const Index nx = Index(p.dims.nx);
  const Index plane = nx * Index(p.dims.ny);
  const Index t = Index(blockIdx.z) * plane + j * nx + i;
  ComposeVoxel<GradT, Index>(p, u, grad, i, j, k, Index(z0) * plane + t, out + t, Index(count));
}

template <typename GradT>
absl::Status LaunchComposeSlab(const ComposeParams& p, const float* u, const GradT* grad, int64_t z0, int64_t z1,
                               float* slab_out, const Stream& stream) {
  const int64_t count = (z1 - z0) * p.dims.nx * p.dims.ny;
  if (count <= 0) return absl::OkStatus();
  if (p.cuda_grid_3d && (p.dims.ny + kBlockY - 1) / kBlockY <= 65535 && z1 - z0 <= 65535) {
    const dim3 grid(static_cast<unsigned>((p.dims.nx + kBlockX - 1) / kBlockX),
                    static_cast<unsigned>((p.dims.ny + kBlockY - 1) / kBlockY), static_cast<unsigned>(z1 - z0));
    if (p.cuda_index32 && 3 * p.dims.size() < (int64_t{1} << 31)) {
      ComposeSlabKernel3d<GradT, int32_t><<<grid, dim3(kBlockX, kBlockY), 0,
                                            static_cast<cudaStream_t>(stream.native())>>>(p, u, grad, z0, count,
                                                                                          slab_out);
    } else {
      ComposeSlabKernel3d<GradT><<<grid, dim3(kBlockX, kBlockY), 0, static_cast<cudaStream_t>(stream.native())>>>(
          p, u, grad, z0, count, slab_out);
    }
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("ComposeSlabKernel3d");
    return absl::OkStatus();
  }
  const int64_t blocks64 = (count + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(blocks64 < 65535 * 16 ? blocks64 : 65535 * 16);
  ComposeSlabKernel<<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream.native())>>>(p, u, grad, z0, count,
                                                                                          slab_out);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("ComposeSlabKernel");
  return absl::OkStatus();
}

}  // namespace

absl::Status ComposeSlabCuda(const ComposeParams& p, const float* u, const float* grad, int64_t z0, int64_t z1,
                             float* slab_out, const Stream& stream) {
  return LaunchComposeSlab(p, u, grad, z0, z1, slab_out, stream);
}

absl::Status ComposeSlabCuda(const ComposeParams& p, const float* u, const BFloat16* grad, int64_t z0, int64_t z1,
                             float* slab_out, const Stream& stream) {
  return LaunchComposeSlab(p, u, grad, z0, z1, slab_out, stream);
}

}  // namespace lean_internal
}  // namespace registration
}  // namespace tessera
