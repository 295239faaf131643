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

template <typename GradT>
__global__ void __launch_bounds__(kThreads)
    ComposeSlabKernel3d(ComposeParams p, const float* __restrict__ u, const GradT* __restrict__ grad, int64_t z0,
                        int64_t count, float* __restrict__ out) {
  const int64_t i = int64_t(blockIdx.x) * kBlockX + threadIdx.x;
  const int64_t j = int64_t(blockIdx.y) * kBlockY + threadIdx.y;
  if (i >= p.dims.nx || j >= p.dims.ny) return;
  const int64_t k = z0 + blockIdx.z;
  const int64_t plane = p.dims.nx * p.dims.ny;
  const int64_t t = int64_t(blockIdx.z) * plane + j * p.dims.nx + i;
  ComposeVoxel(p, u, grad, i, j, k, z0 * plane + t, out + t, count);
}

template <typename GradT>
absl::Status LaunchComposeSlab(const ComposeParams& p, const float* u, const GradT* grad, int64_t z0, int64_t z1,
                               float* slab_out, const Stream& stream) {
  const int64_t count = (z1 - z0) * p.dims.nx * p.dims.ny;
  if (count <= 0) return absl::OkStatus();
  if (p.cuda_grid_3d && (p.dims.ny + kBlockY - 1) / kBlockY <= 65535 && z1 - z0 <= 65535) {
    const dim3 grid(static_cast<unsigned>((p.dims.nx + kBlockX - 1) / kBlockX),
                    static_cast<unsigned>((p.dims.ny + kBlockY - 1) / kBlockY), static_cast<unsigned>(z1 - z0));
    ComposeSlabKernel3d<<<grid, dim3(kBlockX, kBlockY), 0, static_cast<cudaStream_t>(stream.native())>>>(
        p, u, grad, z0, count, slab_out);
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

// SmoothWritebackCuda: one block per 32 x 8 tile of a component, marching
// over the output slices. Per input slice (clamped to the grid, from the
// composed slab holding it): the tile with its clamped x/y halo, the x pass
// into X, the y pass into a ring of 2 rz + 1 filtered planes; each output
// slice is the z pass over the ring. Each pass is SmoothCuda's fmaf sum in tap
// order from 0 over the same clamped neighbours (RowWarpKernel, AxisKernel),
// so u gets the values of compose-then-smooth bit for bit.
constexpr int kSmoothX = 32;
constexpr int kSmoothY = 8;
constexpr int kMaxR = kFusedSmoothMaxRadius;

__device__ __forceinline__ int64_t Clamp64(int64_t v, int64_t hi) { return v < 0 ? 0 : (v > hi ? hi : v); }

__global__ void __launch_bounds__(kSmoothX * kSmoothY)
    SmoothWritebackKernel(ComposedSlab s0, ComposedSlab s1, ComposedSlab s2, Dims3 dims, int64_t z_begin,
                          int64_t z_end, SmoothTaps taps, float* __restrict__ u) {
  __shared__ float tile[(kSmoothY + 2 * kMaxR) * (kSmoothX + 2 * kMaxR)];
  __shared__ float xpass[(kSmoothY + 2 * kMaxR) * kSmoothX];
  __shared__ float ring[(2 * kMaxR + 1) * kSmoothY * kSmoothX];
  const int rx = taps.radius[0], ry = taps.radius[1], rz = taps.radius[2];
  const int tw = kSmoothX + 2 * rx, th = kSmoothY + 2 * ry, nring = 2 * rz + 1;
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kSmoothX + tx;
  const int comp = blockIdx.z;
  const int64_t i0 = int64_t(blockIdx.x) * kSmoothX, j0 = int64_t(blockIdx.y) * kSmoothY;
  const int64_t i = i0 + tx, j = j0 + ty;
  const int64_t plane = dims.nx * dims.ny;
  int slot = 0;
  for (int64_t kk = z_begin - rz; kk < z_end + rz; ++kk) {
    const int64_t kc = Clamp64(kk, dims.nz - 1);
    const ComposedSlab& src = (kc >= s0.z0 && kc < s0.z1) ? s0 : ((kc >= s1.z0 && kc < s1.z1) ? s1 : s2);
    const float* p = src.data + comp * (src.z1 - src.z0) * plane + (kc - src.z0) * plane;
    for (int q = tid; q < th * tw; q += kSmoothX * kSmoothY) {
      const int row = q / tw, col = q - row * tw;
      const int64_t jj = Clamp64(j0 - ry + row, dims.ny - 1), ii = Clamp64(i0 - rx + col, dims.nx - 1);
      tile[q] = p[jj * dims.nx + ii];
    }
    __syncthreads();
    for (int row = ty; row < th; row += kSmoothY) {
      float acc = 0.f;
      for (int d = 0; d <= 2 * rx; ++d) acc = fmaf(taps.w[0][d], tile[row * tw + tx + d], acc);
      xpass[row * kSmoothX + tx] = acc;
    }
    __syncthreads();
    {
      float acc = 0.f;
      for (int d = 0; d <= 2 * ry; ++d) acc = fmaf(taps.w[1][d], xpass[(ty + d) * kSmoothX + tx], acc);
      ring[slot * (kSmoothX * kSmoothY) + tid] = acc;
    }
    __syncthreads();
    if (kk - rz >= z_begin && i < dims.nx && j < dims.ny) {  // the ring holds slices kk - 2 rz .. kk
      float acc = 0.f;
      for (int d = 0; d <= 2 * rz; ++d) {
        int q = slot - 2 * rz + d;
        if (q < 0) q += nring;
        acc = fmaf(taps.w[2][d], ring[q * (kSmoothX * kSmoothY) + tid], acc);
      }
      u[comp * dims.size() + (kk - rz) * plane + j * dims.nx + i] = acc;
    }
    slot = slot + 1 == nring ? 0 : slot + 1;
  }
}

}  // namespace

absl::Status SmoothWritebackCuda(const ComposedSlab slabs[3], Dims3 dims, int64_t z0, int64_t z1,
                                 const SmoothTaps& taps, float* u, const Stream& stream) {
  if (z1 <= z0) return absl::OkStatus();
  const dim3 grid(static_cast<unsigned>((dims.nx + kSmoothX - 1) / kSmoothX),
                  static_cast<unsigned>((dims.ny + kSmoothY - 1) / kSmoothY), 3);
  SmoothWritebackKernel<<<grid, dim3(kSmoothX, kSmoothY), 0, static_cast<cudaStream_t>(stream.native())>>>(
      slabs[0], slabs[1], slabs[2], dims, z0, z1, taps, u);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("SmoothWritebackKernel");
  return absl::OkStatus();
}

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
