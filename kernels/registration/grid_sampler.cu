// CUDA composite grid sampler: each thread owns an output column (i, j) and
// walks a few z-slices of it, computing A x + t + u(x) in registers (no grid
// tensor anywhere; the x/y part of A x is computed once per column) and
// interpolating.
//
// Forward reads u (3 floats) and 8 image corners (mostly L1/L2 hits for smooth
// transforms) and writes 1 float per voxel. Backward recomputes the position,
// writes dL/du (3 floats), and reduces the 12 affine-gradient sums per block
// (float per thread over kBackwardZ voxels, then double across the block)
// into per-block partials, summed in a fixed order by a second kernel.
// Index arithmetic is 32-bit whenever every linear index fits (Idx), 64-bit
// otherwise.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/registration/grid_sampler.h"
#include "kernels/registration/reduce.cuh"
#include "kernels/registration/sampler_math.h"
#include "kernels/registration/storage16.h"
#include "kernels/registration/voxel_jitter.h"

namespace tessera {
namespace registration {
namespace cuda {
namespace {

constexpr int kThreads = 256;  // per block; blockDim.x = GridSamplerTuning::block_x
constexpr int kMinBlockX = 32;
constexpr int kNearestZ = 4;           // output slices per nearest-neighbour thread
constexpr int kMinSlicesPerThread = 1;
constexpr int kBackwardZ = 8;          // output slices per backward thread
constexpr int kBackwardMinBlocks = 4;  // caps registers at 64 (no spills; ptxas -v)

using Geometry = SamplerGeometry<float>;

__device__ __forceinline__ void LoadAffine(const float* __restrict__ affine, float a[kAffineParams]) {
#pragma unroll
  for (int p = 0; p < kAffineParams; ++p) {
    a[p] = affine != nullptr ? __ldg(affine + p) : ((p == 0 || p == 5 || p == 10) ? 1.0f : 0.0f);
  }
}

// Per-thread constants of one output column.
template <typename Idx>
struct Column {
  Idx i, j;
  Idx nx, ny, nz, plane, n;  // output extents
  Idx mx, my, mz, mplane;    // input extents
  float mf[3];               // input extents as float (zeros-padding test)
  float hi[3];               // m - 1 as float (border clamp)
  float pre[3];              // A[c][0] x0 + A[c][1] x1
};

template <typename Idx>
__device__ __forceinline__ Column<Idx> MakeColumn(const Geometry& g, const float* a, Idx i, Idx j) {
  Column<Idx> col;
  col.i = i;
  col.j = j;
  col.nx = static_cast<Idx>(g.out_dims.nx);
  col.ny = static_cast<Idx>(g.out_dims.ny);
  col.nz = static_cast<Idx>(g.out_dims.nz);
  col.plane = col.nx * col.ny;
  col.n = col.plane * col.nz;
  col.mx = static_cast<Idx>(g.in_dims.nx);
  col.my = static_cast<Idx>(g.in_dims.ny);
  col.mz = static_cast<Idx>(g.in_dims.nz);
  col.mplane = col.mx * col.my;
  const Idx m[3] = {col.mx, col.my, col.mz};
#pragma unroll
  for (int c = 0; c < 3; ++c) {
    col.mf[c] = static_cast<float>(m[c]);
    col.hi[c] = static_cast<float>(m[c] - 1);  // == ClampCoord's static_cast<float>(m - 1)
  }
  float x[3];
  OutputCoord(g, i, j, Idx(0), x);
  AffinePrefix(a, x[0], x[1], col.pre);
  return col;
}

// Normalized z coordinate of slice k and the continuous input index of voxel
// (col.i, col.j, k) at linear index v: bit-identical to the CPU reference.
template <typename Idx>
__device__ __forceinline__ float ColumnPosition(const Geometry& g, const float* a, const Column<Idx>& col,
                                                const float* __restrict__ disp, Idx k, Idx v, float ix[3]) {
  if (g.voxel_jitter_key != 0) {  // each voxel its own offset: no per-column prefix (voxel_jitter.h)
    float x[3];
    OutputCoord(g, col.i, col.j, k, x);
#pragma unroll
    for (int c = 0; c < 3; ++c) {
      x[c] = RnAdd(x[c],
                   RnMul(g.out_step[c], VoxelJitter<float>(g.voxel_jitter_key, static_cast<int64_t>(v) + g.v_offset, c)));
    }
    float pre[3];
    AffinePrefix(a, x[0], x[1], pre);
    if (disp != nullptr) {
      const float u[3] = {__ldg(disp + v), __ldg(disp + v + col.n), __ldg(disp + v + 2 * col.n)};
      PositionFromPrefix(g, a, pre, x[2], u, ix);
    } else {
      PositionFromPrefix<float>(g, a, pre, x[2], nullptr, ix);
    }
    return x[2];
  }
  const float x2 = RnAdd(g.out_lo[2], RnMul(g.out_step[2], static_cast<float>(static_cast<int64_t>(k) + g.k_offset)));
  if (disp != nullptr) {
    const float u[3] = {__ldg(disp + v), __ldg(disp + v + col.n), __ldg(disp + v + 2 * col.n)};
    PositionFromPrefix(g, a, col.pre, x2, u, ix);
  } else {
    PositionFromPrefix<float>(g, a, col.pre, x2, nullptr, ix);
  }
  return x2;
}

// The interpolation cell of one sample: lower corner and fractions.
template <typename Idx>
struct Cell {
  Idx i0, j0, k0;
  float fx, fy, fz;
};

// Prepares the cell for continuous index ix after padding. Returns false when
// (zeros padding) no corner is inside; dclamp receives the border clamp
// derivative per axis (ClampCoord's semantics, with the column's limits).
template <typename Idx>
__device__ __forceinline__ bool MakeCell(const Geometry& g, const Column<Idx>& col, float ix[3], float dclamp[3],
                                         Cell<Idx>& cell) {
  if (g.padding == Padding::kBorder) {
#pragma unroll
    for (int c = 0; c < 3; ++c) {
      const bool below = !(ix[c] >= 0.0f), above = ix[c] > col.hi[c];
      dclamp[c] = (below || above) ? 0.0f : 1.0f;
      ix[c] = below ? 0.0f : (above ? col.hi[c] : ix[c]);
    }
  } else {
#pragma unroll
    for (int c = 0; c < 3; ++c) {
      dclamp[c] = 1.0f;
      if (!(ix[c] > -1.0f && ix[c] < col.mf[c])) return false;
    }
  }
  // Here -1 < ix < m (zeros) or 0 <= ix <= m - 1 (border): floor fits Idx.
  const float f0 = floorf(ix[0]), f1 = floorf(ix[1]), f2 = floorf(ix[2]);
  cell.i0 = static_cast<Idx>(f0);
  cell.j0 = static_cast<Idx>(f1);
  cell.k0 = static_cast<Idx>(f2);
  cell.fx = ix[0] - f0;
  cell.fy = ix[1] - f1;
  cell.fz = ix[2] - f2;
  return true;
}

// One image value through the read-only cache, as float (images are float
// or, in the mixed-precision lean stage, fp16).
__device__ __forceinline__ float Ld(const float* p) { return __ldg(p); }
__device__ __forceinline__ float Ld(const Half* p) {
  return ToFloat(Half{__ldg(reinterpret_cast<const unsigned short*>(p))});
}

// image[idx] and image[idx + 1] (GridSamplerTuning::vector_loads): one
// aligned 4-element load holds both unless idx is its last element, when
// the second comes from a scalar load. The image pointer is aligned to the
// 4 elements (checked at launch) and idx | 3 is inside the image.
template <typename Idx>
__device__ __forceinline__ void LdPair(const float* __restrict__ image, Idx idx, float& lo, float& hi) {
  const Idx a = idx & ~Idx(3);
  const int o = static_cast<int>(idx - a);
  const float4 f = __ldg(reinterpret_cast<const float4*>(image + a));
  lo = o == 0 ? f.x : (o == 1 ? f.y : (o == 2 ? f.z : f.w));
  hi = o == 0 ? f.y : (o == 1 ? f.z : (o == 2 ? f.w : __ldg(image + idx + 1)));
}
template <typename Idx>
__device__ __forceinline__ void LdPair(const Half* __restrict__ image, Idx idx, float& lo, float& hi) {
  const Idx a = idx & ~Idx(3);
  const int o = static_cast<int>(idx - a);
  const uint2 q = __ldg(reinterpret_cast<const uint2*>(image + a));
  const unsigned long long w = (static_cast<unsigned long long>(q.y) << 32) | q.x;  // element e in bits 16e..16e+15
  lo = ToFloat(Half{static_cast<unsigned short>(w >> (16 * o))});
  hi = o < 3 ? ToFloat(Half{static_cast<unsigned short>(w >> (16 * o + 16))}) : Ld(image + idx + 1);
}

// The 8 corners v[4z + 2y + x]; padding corners are 0. Cells wholly inside
// the image (nearly all) load unconditionally from one base pointer (kVec:
// by pairs, LdPair).
template <typename Idx, typename Img, bool kVec = false>
__device__ __forceinline__ void LoadCorners(const Img* __restrict__ image, const Column<Idx>& col,
                                            const Cell<Idx>& cell, float v[8]) {
  using U = typename std::make_unsigned<Idx>::type;
  const Idx base = cell.i0 + col.mx * cell.j0 + col.mplane * cell.k0;
  const Img* p = image + base;
  const Img* py = p + col.mx;
  const Img* pz = p + col.mplane;
  const Img* pyz = pz + col.mx;
  const bool interior = static_cast<U>(cell.i0) < static_cast<U>(col.mx - 1) &&
                        static_cast<U>(cell.j0) < static_cast<U>(col.my - 1) &&
                        static_cast<U>(cell.k0) < static_cast<U>(col.mz - 1);
  if (kVec && interior && ((base + col.mplane + col.mx) | Idx(3)) < col.mplane * col.mz) {
    LdPair(image, base, v[0], v[1]);
    LdPair(image, base + col.mx, v[2], v[3]);
    LdPair(image, base + col.mplane, v[4], v[5]);
    LdPair(image, base + col.mplane + col.mx, v[6], v[7]);
  } else if (interior) {
    v[0] = Ld(p);
    v[1] = Ld(p + 1);
    v[2] = Ld(py);
    v[3] = Ld(py + 1);
    v[4] = Ld(pz);
    v[5] = Ld(pz + 1);
    v[6] = Ld(pyz);
    v[7] = Ld(pyz + 1);
  } else {
    const bool x0 = cell.i0 >= 0, x1 = cell.i0 + 1 < col.mx;
    const bool y0 = cell.j0 >= 0, y1 = cell.j0 + 1 < col.my;
    const bool z0 = cell.k0 >= 0, z1 = cell.k0 + 1 < col.mz;
    v[0] = (z0 && y0 && x0) ? Ld(p) : 0.0f;
    v[1] = (z0 && y0 && x1) ? Ld(p + 1) : 0.0f;
    v[2] = (z0 && y1 && x0) ? Ld(py) : 0.0f;
    v[3] = (z0 && y1 && x1) ? Ld(py + 1) : 0.0f;
    v[4] = (z1 && y0 && x0) ? Ld(pz) : 0.0f;
    v[5] = (z1 && y0 && x1) ? Ld(pz + 1) : 0.0f;
    v[6] = (z1 && y1 && x0) ? Ld(pyz) : 0.0f;
    v[7] = (z1 && y1 && x1) ? Ld(pyz + 1) : 0.0f;
  }
}

__device__ __forceinline__ float Lerp(float a, float b, float t) { return fmaf(t, b - a, a); }

// Trilinear value as nested lerps, plus (optionally) d(value)/d(ix).
struct Trilinear {
  float c00, c01, c10, c11;  // lerps along x at (z, y) = (0,0), (0,1), (1,0), (1,1)
  float e0, e1;              // lerps along y at z = 0, 1
  float value;
};

__device__ __forceinline__ Trilinear Interpolate(const float v[8], float fx, float fy, float fz) {
  Trilinear t;
  t.c00 = Lerp(v[0], v[1], fx);
  t.c01 = Lerp(v[2], v[3], fx);
  t.c10 = Lerp(v[4], v[5], fx);
  t.c11 = Lerp(v[6], v[7], fx);
  t.e0 = Lerp(t.c00, t.c01, fy);
  t.e1 = Lerp(t.c10, t.c11, fy);
  t.value = Lerp(t.e0, t.e1, fz);
  return t;
}

__device__ __forceinline__ void InterpolateGrad(const float v[8], const Trilinear& t, float fy, float fz,
                                                float dv[3]) {
  dv[0] = Lerp(Lerp(v[1] - v[0], v[3] - v[2], fy), Lerp(v[5] - v[4], v[7] - v[6], fy), fz);
  dv[1] = Lerp(t.c01 - t.c00, t.c11 - t.c10, fz);
  dv[2] = t.e1 - t.e0;
}

template <typename Idx, typename Img, bool kVec>
__device__ __forceinline__ void ForwardVoxel(const Img* __restrict__ image, const float* a,
                                             const float* __restrict__ disp, const Geometry& g,
                                             const Column<Idx>& col, Idx k, float* __restrict__ out) {
  const Idx v = col.i + col.nx * col.j + col.plane * k;
  float ix[3], dclamp[3];
  ColumnPosition(g, a, col, disp, k, v, ix);
  Cell<Idx> cell;
  float value = 0.0f;
  if (MakeCell(g, col, ix, dclamp, cell)) {
    float corners[8];
    LoadCorners<Idx, Img, kVec>(image, col, cell, corners);
    value = Interpolate(corners, cell.fx, cell.fy, cell.fz).value;
  }
  out[v] = value;
}

template <typename Idx, int kZ, typename Img, bool kVec = false>
__global__ void __launch_bounds__(kThreads)
    ForwardKernel(const Img* __restrict__ image, const float* __restrict__ affine, const float* __restrict__ disp,
                  Geometry g, float* __restrict__ out) {
  const Idx i = static_cast<Idx>(blockIdx.x) * blockDim.x + threadIdx.x;
  const Idx j = static_cast<Idx>(blockIdx.y) * blockDim.y + threadIdx.y;
  if (i >= static_cast<Idx>(g.out_dims.nx) || j >= static_cast<Idx>(g.out_dims.ny)) return;
  float a[kAffineParams];
  LoadAffine(affine, a);
  const Column<Idx> col = MakeColumn<Idx>(g, a, i, j);
  const Idx k0 = static_cast<Idx>(blockIdx.z) * kZ;
  if (k0 + kZ <= col.nz) {
#pragma unroll
    for (int kk = 0; kk < kZ; ++kk) ForwardVoxel<Idx, Img, kVec>(image, a, disp, g, col, k0 + kk, out);
  } else {
    for (Idx k = k0; k < col.nz; ++k) ForwardVoxel<Idx, Img, kVec>(image, a, disp, g, col, k, out);
  }
}

// One backward voxel: dL/du written, affine sums accumulated, image scatter.
template <typename Idx, bool kDisp, bool kAffine, bool kImage, typename Img, typename GradT, bool kVec>
__device__ __forceinline__ void BackwardVoxel(const Img* __restrict__ image, const float* a,
                                              const float* __restrict__ disp, const Geometry& g,
                                              const Column<Idx>& col, float x0, float x1, Idx k,
                                              const float* __restrict__ grad_out, GradT* __restrict__ grad_disp,
                                              float* __restrict__ grad_image, float acc[kAffineParams]) {
  const Idx v = col.i + col.nx * col.j + col.plane * k;
  float ix[3], dclamp[3];
  const float x[3] = {x0, x1, ColumnPosition(g, a, col, disp, k, v, ix)};
  float gp[3] = {0.0f, 0.0f, 0.0f};
  Cell<Idx> cell;
  if (MakeCell(g, col, ix, dclamp, cell)) {
    const float go = __ldg(grad_out + v);
    float c8[8];
    LoadCorners<Idx, Img, kVec>(image, col, cell, c8);
    const Trilinear t = Interpolate(c8, cell.fx, cell.fy, cell.fz);
    float dv[3];
    InterpolateGrad(c8, t, cell.fy, cell.fz, dv);
#pragma unroll
    for (int c = 0; c < 3; ++c) gp[c] = go * dv[c] * dclamp[c] * g.in_half[c];
    if (kImage) {
      const float wx[2] = {1.0f - cell.fx, cell.fx};
      const float wy[2] = {1.0f - cell.fy, cell.fy};
      const float wz[2] = {1.0f - cell.fz, cell.fz};
      const Idx base = cell.i0 + col.mx * cell.j0 + col.mplane * cell.k0;
#pragma unroll
      for (int c = 0; c < 2; ++c) {
#pragma unroll
        for (int b = 0; b < 2; ++b) {
#pragma unroll
          for (int a2 = 0; a2 < 2; ++a2) {
            const bool ok = cell.i0 + a2 >= 0 && cell.i0 + a2 < col.mx && cell.j0 + b >= 0 && cell.j0 + b < col.my &&
                            cell.k0 + c >= 0 && cell.k0 + c < col.mz;
            if (ok) atomicAdd(grad_image + (base + a2 + b * col.mx + c * col.mplane), go * wx[a2] * wy[b] * wz[c]);
          }
        }
      }
    }
  }
  if (kDisp) {
    grad_disp[v] = FromFloat<GradT>(gp[0]);
    grad_disp[v + col.n] = FromFloat<GradT>(gp[1]);
    grad_disp[v + 2 * col.n] = FromFloat<GradT>(gp[2]);
  }
  if (kAffine) {
#pragma unroll
    for (int c = 0; c < 3; ++c) {
#pragma unroll
      for (int d = 0; d < 3; ++d) acc[4 * c + d] += gp[c] * x[d];
      acc[4 * c + 3] += gp[c];
    }
  }
}

template <typename Idx, bool kDisp, bool kAffine, bool kImage, int kUnroll, typename Img = float,
          typename GradT = float, bool kVec = false>
__global__ void __launch_bounds__(kThreads, kBackwardMinBlocks)
    BackwardKernel(const Img* __restrict__ image, const float* __restrict__ affine, const float* __restrict__ disp,
                   Geometry g, const float* __restrict__ grad_out, GradT* __restrict__ grad_disp,
                   double* __restrict__ partials, float* __restrict__ grad_image) {
  const Idx i = static_cast<Idx>(blockIdx.x) * blockDim.x + threadIdx.x;
  const Idx j = static_cast<Idx>(blockIdx.y) * blockDim.y + threadIdx.y;
  // The affine lives in shared memory here: registers are the limit.
  __shared__ float a[kAffineParams];
  if (threadIdx.y == 0 && threadIdx.x < kAffineParams) {
    a[threadIdx.x] = affine != nullptr ? __ldg(affine + threadIdx.x)
                                       : ((threadIdx.x == 0 || threadIdx.x == 5 || threadIdx.x == 10) ? 1.0f : 0.0f);
  }
  __syncthreads();
  float acc[kAffineParams];
#pragma unroll
  for (int p = 0; p < kAffineParams; ++p) acc[p] = 0.0f;
  if (i < static_cast<Idx>(g.out_dims.nx) && j < static_cast<Idx>(g.out_dims.ny)) {
    const Column<Idx> col = MakeColumn<Idx>(g, a, i, j);
    float x[3];
    OutputCoord(g, i, j, Idx(0), x);  // x[0], x[1] of this column
    const Idx k_begin = static_cast<Idx>(blockIdx.z) * kBackwardZ;
    if (k_begin + kBackwardZ <= col.nz) {
#pragma unroll kUnroll
      for (int kk = 0; kk < kBackwardZ; ++kk) {
        BackwardVoxel<Idx, kDisp, kAffine, kImage, Img, GradT, kVec>(image, a, disp, g, col, x[0], x[1], k_begin + kk, grad_out,
                                                   grad_disp, grad_image, acc);
      }
    } else {
      for (Idx k = k_begin; k < col.nz; ++k) {
        BackwardVoxel<Idx, kDisp, kAffine, kImage, Img, GradT, kVec>(image, a, disp, g, col, x[0], x[1], k, grad_out, grad_disp,
                                                   grad_image, acc);
      }
    }
  }
  if (kAffine) {
    __shared__ double scratch[32 * kAffineParams];
    double sums[kAffineParams];
#pragma unroll
    for (int p = 0; p < kAffineParams; ++p) sums[p] = acc[p];
    cuda_detail::BlockSum<kAffineParams>(sums, scratch);
    if (threadIdx.x == 0 && threadIdx.y == 0) {
      const int64_t num_blocks = static_cast<int64_t>(gridDim.x) * gridDim.y * gridDim.z;
      const int64_t block =
          blockIdx.x + static_cast<int64_t>(gridDim.x) * (blockIdx.y + static_cast<int64_t>(gridDim.y) * blockIdx.z);
#pragma unroll
      for (int p = 0; p < kAffineParams; ++p) partials[p * num_blocks + block] = sums[p];
    }
  }
}

template <typename Idx>
__global__ void __launch_bounds__(kThreads)
    NearestKernel(const int32_t* __restrict__ labels, const float* __restrict__ affine,
                  const float* __restrict__ disp, Geometry g, int32_t* __restrict__ out) {
  const Idx i = static_cast<Idx>(blockIdx.x) * blockDim.x + threadIdx.x;
  const Idx j = static_cast<Idx>(blockIdx.y) * blockDim.y + threadIdx.y;
  if (i >= static_cast<Idx>(g.out_dims.nx) || j >= static_cast<Idx>(g.out_dims.ny)) return;
  float a[kAffineParams];
  LoadAffine(affine, a);
  const Column<Idx> col = MakeColumn<Idx>(g, a, i, j);
  const Idx k0 = static_cast<Idx>(blockIdx.z) * kNearestZ;
  const Idx k1 = k0 + kNearestZ < col.nz ? k0 + kNearestZ : col.nz;
  const Idx m[3] = {col.mx, col.my, col.mz};
  for (Idx k = k0; k < k1; ++k) {
    const Idx v = col.i + col.nx * col.j + col.plane * k;
    float ix[3];
    ColumnPosition(g, a, col, disp, k, v, ix);
    Idx idx[3];
    bool inside = true;
#pragma unroll
    for (int c = 0; c < 3; ++c) {
      float dclamp;
      const float p = g.padding == Padding::kBorder ? ClampCoord(ix[c], static_cast<int64_t>(m[c]), &dclamp) : ix[c];
      const float r = rintf(p);
      inside = inside && (r >= 0.0f && r <= static_cast<float>(m[c] - 1));
      idx[c] = inside ? static_cast<Idx>(r) : Idx(0);
    }
    out[v] = inside ? __ldg(labels + (idx[0] + m[0] * idx[1] + m[0] * m[1] * idx[2])) : 0;
  }
}

Geometry MakeGeometry(const GridSampleArgs& args) {
  Geometry g = MakeSamplerGeometry<float>(args.out_dims, args.image_dims, args.grid_lo, args.grid_hi, args.padding,
                                          args.grid_nz, args.out_z0);
  g.voxel_jitter_key = args.voxel_jitter_key;
  return g;
}

absl::Status CheckGridLimits(const Dims3& od) {
  if ((od.nx + kMinBlockX - 1) / kMinBlockX > 2147483647 || od.ny > 65535 ||
      (od.nz + kMinSlicesPerThread - 1) / kMinSlicesPerThread > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("grid sampler (CUDA): output ", DimsToString(od), " exceeds the launch grid"));
  }
  return absl::OkStatus();
}

// 32-bit indices when every linear index, including corner offsets just past
// the input and component 2 of the displacement, stays below 2^31.
bool Fits32(const GridSampleArgs& args, const GridSamplerTuning& tuning) {
  if (tuning.force_64bit_index) return false;
  const int64_t limit = int64_t{1} << 31;
  const Dims3& id = args.image_dims;
  return 3 * args.out_dims.size() < limit && id.size() + id.nx * id.ny + id.nx + 2 < limit;
}

dim3 Block(const GridSamplerTuning& tuning) { return dim3(tuning.block_x, kThreads / tuning.block_x, 1); }

dim3 Grid(const Dims3& od, int z_per_thread, const GridSamplerTuning& tuning) {
  const dim3 b = Block(tuning);
  return dim3(static_cast<unsigned>((od.nx + b.x - 1) / b.x), static_cast<unsigned>((od.ny + b.y - 1) / b.y),
              static_cast<unsigned>((od.nz + z_per_thread - 1) / z_per_thread));
}

}  // namespace

// GridSamplerTuning::vector_loads applies: 32-bit indices and an image
// pointer aligned to LdPair's 4 elements.
template <typename Img>
bool UseVectorLoads(bool fits32, const Img* image, const GridSamplerTuning& tuning) {
  return tuning.vector_loads && fits32 && reinterpret_cast<uintptr_t>(image) % (4 * sizeof(Img)) == 0;
}

template <int kZ, typename Img>
void LaunchForward(bool fits32, const GridSampleArgs& args, const Img* image, const Geometry& g,
                   const GridSamplerTuning& tuning, float* out, cudaStream_t s) {
  const dim3 grid = Grid(args.out_dims, kZ, tuning);
  const dim3 block = Block(tuning);
  if (UseVectorLoads(fits32, image, tuning)) {
    ForwardKernel<int32_t, kZ, Img, true><<<grid, block, 0, s>>>(image, args.affine, args.disp, g, out);
  } else if (fits32) {
    ForwardKernel<int32_t, kZ, Img><<<grid, block, 0, s>>>(image, args.affine, args.disp, g, out);
  } else {
    ForwardKernel<int64_t, kZ, Img><<<grid, block, 0, s>>>(image, args.affine, args.disp, g, out);
  }
}

template <typename Img>
absl::Status ForwardWithImage(const Stream& stream, const GridSampleArgs& args, const Img* image, float* out,
                              const GridSamplerTuning& tuning) {
  TESSERA_RETURN_IF_ERROR(CheckGridLimits(args.out_dims));
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  const Geometry g = MakeGeometry(args);
  const bool fits32 = Fits32(args, tuning);
  switch (tuning.forward_z) {
    case 1:
      LaunchForward<1>(fits32, args, image, g, tuning, out, s);
      break;
    case 2:
      LaunchForward<2>(fits32, args, image, g, tuning, out, s);
      break;
    case 8:
      LaunchForward<8>(fits32, args, image, g, tuning, out, s);
      break;
    default:
      LaunchForward<4>(fits32, args, image, g, tuning, out, s);
      break;
  }
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("grid sampler forward");
  return absl::OkStatus();
}

absl::Status GridSampleForward(const Stream& stream, const GridSampleArgs& args, float* out,
                               const GridSamplerTuning& tuning) {
  return ForwardWithImage(stream, args, args.image, out, tuning);
}

absl::Status GridSampleForwardHalfImage(const Stream& stream, const GridSampleArgs& args, const Half* image,
                                        float* out, const GridSamplerTuning& tuning) {
  return ForwardWithImage(stream, args, image, out, tuning);
}

// dL/du only, fp16 image, bf16 output: one instantiation per index width and unroll.
absl::Status GridSampleBackwardHalfImage(const Stream& stream, const GridSampleArgs& args, const Half* image,
                                         const float* grad_out, BFloat16* grad_disp, const GridSamplerTuning& tuning) {
  TESSERA_RETURN_IF_ERROR(CheckGridLimits(args.out_dims));
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  const dim3 grid = Grid(args.out_dims, kBackwardZ, tuning);
  const dim3 block = Block(tuning);
  const Geometry g = MakeGeometry(args);
#define TESSERA_GS_HALF(IDX, U, V)                                                                            \
  BackwardKernel<IDX, true, false, false, U, Half, BFloat16, V><<<grid, block, 0, s>>>(                         \
      image, args.affine, args.disp, g, grad_out, grad_disp, nullptr, nullptr)
  const bool fits32 = Fits32(args, tuning);
  if (!fits32) {
    TESSERA_GS_HALF(int64_t, 1, false);
  } else if (UseVectorLoads(fits32, image, tuning)) {
    if (tuning.backward_unroll == 2) {
      TESSERA_GS_HALF(int32_t, 2, true);
    } else if (tuning.backward_unroll == 4) {
      TESSERA_GS_HALF(int32_t, 4, true);
    } else {
      TESSERA_GS_HALF(int32_t, 1, true);
    }
  } else if (tuning.backward_unroll == 2) {
    TESSERA_GS_HALF(int32_t, 2, false);
  } else if (tuning.backward_unroll == 4) {
    TESSERA_GS_HALF(int32_t, 4, false);
  } else {
    TESSERA_GS_HALF(int32_t, 1, false);
  }
#undef TESSERA_GS_HALF
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("grid sampler backward (fp16 image)");
  return absl::OkStatus();
}

// vec (32-bit Idx only): vector loads for the combinations registration
// uses (dL/du with or without dL/d[A|t], no dL/dI); the others ignore it.
template <typename Idx, int kUnroll>
void LaunchBackward(const dim3& grid, const dim3& block, cudaStream_t s, const GridSampleArgs& args,
                    const Geometry& g, const float* grad_out, const GridSampleGrads& grads, double* partials,
                    bool vec = false) {
  const bool want_disp = grads.grad_disp != nullptr;
  const bool want_affine = grads.grad_affine != nullptr;
  const bool want_image = grads.grad_image != nullptr;
#define TESSERA_GS_LAUNCH(D, A, I)                                                                        \
  BackwardKernel<Idx, D, A, I, kUnroll><<<grid, block, 0, s>>>(args.image, args.affine, args.disp, g, grad_out, \
                                                      grads.grad_disp, partials, grads.grad_image)
#define TESSERA_GS_LAUNCH_VEC(D, A)                                                                        \
  BackwardKernel<int32_t, D, A, false, kUnroll, float, float, true><<<grid, block, 0, s>>>(                 \
      args.image, args.affine, args.disp, g, grad_out, grads.grad_disp, partials, nullptr)
  if (std::is_same<Idx, int32_t>::value && vec && want_disp && !want_image) {
    if (want_affine) {
      TESSERA_GS_LAUNCH_VEC(true, true);
    } else {
      TESSERA_GS_LAUNCH_VEC(true, false);
    }
    return;
  }
#undef TESSERA_GS_LAUNCH_VEC
  if (want_disp && want_affine && want_image) TESSERA_GS_LAUNCH(true, true, true);
  else if (want_disp && want_affine) TESSERA_GS_LAUNCH(true, true, false);
  else if (want_disp && want_image) TESSERA_GS_LAUNCH(true, false, true);
  else if (want_disp) TESSERA_GS_LAUNCH(true, false, false);
  else if (want_affine && want_image) TESSERA_GS_LAUNCH(false, true, true);
  else if (want_affine) TESSERA_GS_LAUNCH(false, true, false);
  else if (want_image) TESSERA_GS_LAUNCH(false, false, true);
#undef TESSERA_GS_LAUNCH
}

absl::Status GridSampleBackward(const Stream& stream, const GridSampleArgs& args, const float* grad_out,
                                const GridSampleGrads& grads, Workspace* workspace, const GridSamplerTuning& tuning) {
  TESSERA_RETURN_IF_ERROR(CheckGridLimits(args.out_dims));
  const bool want_affine = grads.grad_affine != nullptr;
  if (grads.grad_disp == nullptr && !want_affine && grads.grad_image == nullptr) return absl::OkStatus();
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  const dim3 grid = Grid(args.out_dims, kBackwardZ, tuning);
  const dim3 block = Block(tuning);
  const int64_t num_blocks = static_cast<int64_t>(grid.x) * grid.y * grid.z;

  Workspace local;
  double* partials = nullptr;
  if (want_affine) {
    TESSERA_ASSIGN_OR_RETURN(void* scratch,
                             ReserveScratch(stream, sizeof(double) * kAffineParams * num_blocks, workspace, local));
    partials = static_cast<double*>(scratch);
  }
  if (grads.grad_image != nullptr) {
    TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(grads.grad_image, 0, sizeof(float) * args.image_dims.size(), s));
  }
  const Geometry g = MakeGeometry(args);
  const bool fits32 = Fits32(args, tuning);
  const bool vec = UseVectorLoads(fits32, args.image, tuning);
  if (!fits32) {
    LaunchBackward<int64_t, 1>(grid, block, s, args, g, grad_out, grads, partials);
  } else if (tuning.backward_unroll == 2) {
    LaunchBackward<int32_t, 2>(grid, block, s, args, g, grad_out, grads, partials, vec);
  } else if (tuning.backward_unroll == 4) {
    LaunchBackward<int32_t, 4>(grid, block, s, args, g, grad_out, grads, partials, vec);
  } else {
    LaunchBackward<int32_t, 1>(grid, block, s, args, g, grad_out, grads, partials, vec);
  }
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("grid sampler backward");
  if (want_affine) {
    TESSERA_CUDA_RETURN_IF_ERROR(
        cuda_detail::FinishPartials(partials, num_blocks, kAffineParams, 1.0, grads.grad_affine, s));
  }
  // A workspace allocated here is freed on return: wait for the kernels first.
  if (workspace == nullptr && want_affine) TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return absl::OkStatus();
}

absl::Status GridSampleNearest(const Stream& stream, const int32_t* labels, const GridSampleArgs& args,
                               int32_t* out, const GridSamplerTuning& tuning) {
  TESSERA_RETURN_IF_ERROR(CheckGridLimits(args.out_dims));
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  const dim3 grid = Grid(args.out_dims, kNearestZ, tuning);
  const dim3 block = Block(tuning);
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  if (Fits32(args, tuning)) {
    NearestKernel<int32_t><<<grid, block, 0, s>>>(labels, args.affine, args.disp, MakeGeometry(args), out);
  } else {
    NearestKernel<int64_t><<<grid, block, 0, s>>>(labels, args.affine, args.disp, MakeGeometry(args), out);
  }
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("grid sampler nearest");
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace registration
}  // namespace tessera
