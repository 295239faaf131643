// CUDA slab kernel of the fused in-place greedy composition (lean_compose.h):
// one thread per voxel of the slab, x fastest (coalesced reads of g, m, v and
// of u's neighbourhood, coalesced writes into the slab buffer).
#include <cuda_runtime.h>

#include "common/cuda_check.h"
#include "kernels/registration/gaussian_smooth_internal.h"
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
static_assert(kSmoothX + 2 * kMaxR <= 2 * kSmoothX, "a tile row is at most two columns per lane");

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

// SmoothWritebackTileKernel: SmoothWritebackKernel's sums (the same fmaf
// order over the same clamped neighbours), one block per 32 x 8 x kTileZ
// output tile of a component, all at once: the tile with its clamped halo
// (each slice from the composed slab holding it) in shared memory, the x pass
// over all its rows, the y pass over all its slices, the z pass into u. No
// march along z: the marching kernel waits on one slice's loads at a time
// behind three barriers (13 ms for compose + smooth at 512^3 on an H100
// against 8.2 ms unfused); here a block's loads are all in flight together.
// An axis of radius 0 is copied (as SmoothCuda skips it) instead of summed.
// Shared memory: (kTileZ + 2 rz)(8 + 2 ry)(32 + 2 rx) + (kTileZ + 2 rz)(8 + 2 ry) 32 floats.
size_t TileSmem(const SmoothTaps& t, int tile_z) {
  const size_t td = tile_z + 2 * t.radius[2], th = kSmoothY + 2 * t.radius[1], tw = kSmoothX + 2 * t.radius[0];
  return (td * th * tw + td * th * kSmoothX) * sizeof(float);
}

// R > 0: every radius is R (the lean stage's sigma 0.5: 2), a compile-time
// constant, so the tap loops unroll with the taps as constant operands and
// the row arithmetic divides by constants (at runtime radii the kernel is
// bound by its ~350 instructions per output: 11 ms for compose + smooth at
// 512^3 on an H100). R = 0: the radii of `taps`.
template <int kTileZ, int R = 0>
__global__ void __launch_bounds__(kSmoothX * kSmoothY)
    SmoothWritebackTileKernel(ComposedSlab s0, ComposedSlab s1, ComposedSlab s2, Dims3 dims, int64_t z_begin,
                              int64_t z_end, SmoothTaps taps, float* __restrict__ u) {
  extern __shared__ float smem[];
  const int rx = R > 0 ? R : taps.radius[0], ry = R > 0 ? R : taps.radius[1], rz = R > 0 ? R : taps.radius[2];
  const int tw = kSmoothX + 2 * rx, th = kSmoothY + 2 * ry, td = kTileZ + 2 * rz;
  float* in = smem;                  // td x th x tw
  float* xp = smem + td * th * tw;   // td x th x kSmoothX
  float* yp = smem;                  // td x kSmoothY x kSmoothX, over `in` (dead after the x pass)
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t ztiles = (z_end - z_begin + kTileZ - 1) / kTileZ;
  const int comp = static_cast<int>(blockIdx.z / ztiles);
  const int64_t k0 = z_begin + int64_t(blockIdx.z % ztiles) * kTileZ;
  const int64_t i0 = int64_t(blockIdx.x) * kSmoothX, j0 = int64_t(blockIdx.y) * kSmoothY;
  const int64_t plane = dims.nx * dims.ny;
  // Rows of tw <= 48 floats (a lane's column and column + 32), kBatch rows per
  // thread loaded before any is stored: many loads in flight per thread (one
  // at a time, the loads' latency would bound the kernel).
  constexpr int kBatch = 8;
  const int rows = td * th;
  const bool second = tx + kSmoothX < tw;
  const int64_t x_a = Clamp64(i0 - rx + tx, dims.nx - 1), x_b = Clamp64(i0 - rx + tx + kSmoothX, dims.nx - 1);
  for (int row0 = ty; row0 < rows; row0 += kSmoothY * kBatch) {
    float va[kBatch], vb[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int row = row0 + b * kSmoothY;
      va[b] = vb[b] = 0.f;
      if (row < rows) {
        const int zz = row / th, yy = row - zz * th;
        // Slices past z_end + rz (the last tile of a slab not a multiple of
        // kTileZ deep) feed no stored output and may lie beyond the ring:
        // their rows repeat the last needed slice.
        const int64_t kc = Clamp64(min(k0 - rz + zz, z_end - 1 + rz), dims.nz - 1);
        // The slab holding slice kc (selected by value: no local copy of a parameter).
        const bool in0 = kc >= s0.z0 && kc < s0.z1, in1 = kc >= s1.z0 && kc < s1.z1;
        const float* data = in0 ? s0.data : (in1 ? s1.data : s2.data);
        const int64_t sz0 = in0 ? s0.z0 : (in1 ? s1.z0 : s2.z0), sz1 = in0 ? s0.z1 : (in1 ? s1.z1 : s2.z1);
        const float* p =
            data + comp * (sz1 - sz0) * plane + (kc - sz0) * plane + Clamp64(j0 - ry + yy, dims.ny - 1) * dims.nx;
        va[b] = p[x_a];
        if (second) vb[b] = p[x_b];
      }
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int row = row0 + b * kSmoothY;
      if (row < rows) {
        in[row * tw + tx] = va[b];
        if (second) in[row * tw + tx + kSmoothX] = vb[b];
      }
    }
  }
  __syncthreads();
#pragma unroll 4
  for (int row = ty; row < td * th; row += kSmoothY) {
    const float* line = in + row * tw + tx;
    float acc = line[0];
    if (rx > 0) {
      acc = 0.f;
#pragma unroll
      for (int d = 0; d <= 2 * rx; ++d) acc = fmaf(taps.w[0][d], line[d], acc);
    }
    xp[row * kSmoothX + tx] = acc;
  }
  __syncthreads();
#pragma unroll 4
  for (int zz = 0; zz < td; ++zz) {
    const float* column = xp + (zz * th + ty) * kSmoothX + tx;
    float acc = column[0];
    if (ry > 0) {
      acc = 0.f;
#pragma unroll
      for (int d = 0; d <= 2 * ry; ++d) acc = fmaf(taps.w[1][d], column[d * kSmoothX], acc);
    }
    yp[(zz * kSmoothY + ty) * kSmoothX + tx] = acc;
  }
  __syncthreads();
  const int64_t i = i0 + tx, j = j0 + ty;
  if (i >= dims.nx || j >= dims.ny) return;
  float* out = u + comp * dims.size() + j * dims.nx + i;
#pragma unroll
  for (int zo = 0; zo < kTileZ; ++zo) {
    if (k0 + zo >= z_end) break;
    const float* column = yp + (zo * kSmoothY + ty) * kSmoothX + tx;
    float acc = column[0];
    if (rz > 0) {
      acc = 0.f;
#pragma unroll
      for (int d = 0; d <= 2 * rz; ++d) acc = fmaf(taps.w[2][d], column[d * kSmoothY * kSmoothX], acc);
    }
    out[(k0 + zo) * plane] = acc;
  }
}

template <int kTileZ, int R>
absl::Status LaunchSmoothWritebackTilesR(const ComposedSlab slabs[3], Dims3 dims, int64_t z0, int64_t z1,
                                         const SmoothTaps& taps, float* u, const Stream& stream) {
  const size_t smem = TileSmem(taps, kTileZ);
  if (smem > 48 * 1024) {
    TESSERA_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(SmoothWritebackTileKernel<kTileZ, R>,
                                                      cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  }
  const int64_t ztiles = (z1 - z0 + kTileZ - 1) / kTileZ;
  const dim3 grid(static_cast<unsigned>((dims.nx + kSmoothX - 1) / kSmoothX),
                  static_cast<unsigned>((dims.ny + kSmoothY - 1) / kSmoothY), static_cast<unsigned>(3 * ztiles));
  SmoothWritebackTileKernel<kTileZ, R><<<grid, dim3(kSmoothX, kSmoothY), smem,
                                         static_cast<cudaStream_t>(stream.native())>>>(slabs[0], slabs[1], slabs[2],
                                                                                       dims, z0, z1, taps, u);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("SmoothWritebackTileKernel");
  return absl::OkStatus();
}

template <int kTileZ>
absl::Status LaunchSmoothWritebackTiles(const ComposedSlab slabs[3], Dims3 dims, int64_t z0, int64_t z1,
                                        const SmoothTaps& taps, float* u, const Stream& stream) {
  if (taps.radius[0] == 2 && taps.radius[1] == 2 && taps.radius[2] == 2) {
    return LaunchSmoothWritebackTilesR<kTileZ, 2>(slabs, dims, z0, z1, taps, u, stream);
  }
  return LaunchSmoothWritebackTilesR<kTileZ, 0>(slabs, dims, z0, z1, taps, u, stream);
}

// GreedyStep::cuda_smooth_slab_passes' z pass: u's slices [z_begin, z_end)
// of one component from the (x and y filtered) composed slabs, a thread per
// (x, y) column and kZRun outputs at a time from kZRun + 2R slices loaded
// together (no shared memory, no barriers). Each output is AxisFixedKernel's
// sum (fmaf in tap order from 0 over the clamped neighbours).
constexpr int kZThreads = 256;
constexpr int kZRun = 8;

template <int R>
__global__ void __launch_bounds__(kZThreads)
    SmoothZWritebackKernel(ComposedSlab s0, ComposedSlab s1, ComposedSlab s2, Dims3 dims, int64_t z_begin,
                           int64_t z_end, SmoothTaps taps, float* __restrict__ u) {
  const int64_t plane = dims.nx * dims.ny;
  const int64_t p = int64_t(blockIdx.x) * kZThreads + threadIdx.x;
  if (p >= plane) return;
  const int comp = blockIdx.y;
  float* out = u + comp * dims.size() + p;
  for (int64_t zc = z_begin; zc < z_end; zc += kZRun) {
    float x[kZRun + 2 * R];
#pragma unroll
    for (int m = 0; m < kZRun + 2 * R; ++m) {
      // Slices past z_end - 1 + R feed no stored output and may lie beyond the ring: repeat the last needed one.
      const int64_t kc = Clamp64(min(zc - R + m, z_end - 1 + R), dims.nz - 1);
      const bool in0 = kc >= s0.z0 && kc < s0.z1, in1 = kc >= s1.z0 && kc < s1.z1;
      const float* data = in0 ? s0.data : (in1 ? s1.data : s2.data);
      const int64_t sz0 = in0 ? s0.z0 : (in1 ? s1.z0 : s2.z0), sz1 = in0 ? s0.z1 : (in1 ? s1.z1 : s2.z1);
      x[m] = data[(comp * (sz1 - sz0) + (kc - sz0)) * plane + p];
    }
#pragma unroll
    for (int q = 0; q < kZRun; ++q) {
      float acc = 0.f;
#pragma unroll
      for (int d = 0; d <= 2 * R; ++d) acc = fmaf(taps.w[2][d], x[q + d], acc);
      if (zc + q < z_end) out[(zc + q) * plane] = acc;
    }
  }
}

}  // namespace

bool SlabPassesApply(const SmoothTaps& taps, Dims3 dims) {
  return taps.radius[0] == 2 && taps.radius[1] == 2 && taps.radius[2] == 2 &&
         gs_internal::CanSmoothSlicesXyInPlace(dims.nx, taps.radius[0], taps.radius[1]) &&
         (dims.nx * dims.ny + kZThreads - 1) / kZThreads <= int64_t{0x7fffffff};
}

absl::Status SmoothSlabXyInPlaceCuda(float* slab, Dims3 dims, int64_t slices, const SmoothTaps& taps,
                                     const Stream& stream) {
  return gs_internal::SmoothSlicesXyInPlaceCuda(slab, dims.nx, dims.ny, slices, taps.w[0], taps.radius[0], taps.w[1],
                                                taps.radius[1], stream);
}

absl::Status SmoothZWritebackCuda(const ComposedSlab slabs[3], Dims3 dims, int64_t z0, int64_t z1,
                                  const SmoothTaps& taps, float* u, const Stream& stream) {
  if (z1 <= z0) return absl::OkStatus();
  if (taps.radius[2] != 2) return absl::InvalidArgumentError("SmoothZWritebackCuda: z radius 2 only");
  const dim3 grid(static_cast<unsigned>((dims.nx * dims.ny + kZThreads - 1) / kZThreads), 3);
  SmoothZWritebackKernel<2><<<grid, kZThreads, 0, static_cast<cudaStream_t>(stream.native())>>>(
      slabs[0], slabs[1], slabs[2], dims, z0, z1, taps, u);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("SmoothZWritebackKernel");
  return absl::OkStatus();
}

absl::Status SmoothWritebackCuda(const ComposedSlab slabs[3], Dims3 dims, int64_t z0, int64_t z1,
                                 const SmoothTaps& taps, float* u, const Stream& stream, int tile_z) {
  if (z1 <= z0) return absl::OkStatus();
  int smem_optin = 0;
  if (tile_z != 0) {
    int device = 0;
    TESSERA_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
    TESSERA_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  }
  // The tiles where their shared memory fits (else the march, same values).
  if ((dims.ny + kSmoothY - 1) / kSmoothY <= 65535 && TileSmem(taps, tile_z) <= size_t(smem_optin)) {
    if (tile_z == 8 && 3 * ((z1 - z0 + 7) / 8) <= 65535) {
      return LaunchSmoothWritebackTiles<8>(slabs, dims, z0, z1, taps, u, stream);
    }
    if (tile_z == 16 && 3 * ((z1 - z0 + 15) / 16) <= 65535) {
      return LaunchSmoothWritebackTiles<16>(slabs, dims, z0, z1, taps, u, stream);
    }
  }
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
