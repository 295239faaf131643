// CUDA fused LNCC (see lncc.h for the math and the memory budget).
//
// Both passes are one "box march" kernel: a block owns a 32x8 tile of (x, y)
// columns and a range of z, and walks z one slice at a time. For each input
// slice it loads the tile plus an r-voxel halo into shared memory (prefetched
// one slice ahead in registers), forms the per-voxel quantities, takes running
// sums along x (per halo row) and y (per column) in shared memory, pushes the
// resulting xy box sums into a w-slice ring and adds the ring's w slices
// directly in ascending z (float, as the x and y sums; issue 39: a voxel's
// sums do not depend on where its z chunk or a z-slab starts, which a running
// sum's would). The full w^3 box sums of slice z - r are then complete and
// the epilogue consumes them (in double).
//
// Forward: quantities F, W, F^2, W^2, FW; epilogue computes cc (summed per
//   slice, xy tile and warp by a fixed shuffle tree, then per slice, then
//   over slices: slice_sums.h) and a, b, c (stored, 3 volumes) when the
//   gradient is wanted.
// Backward: quantities a, b, c; epilogue writes
//   dL/dW = -(1/N)(F Box(a) + 2 W Box(b) + Box(c)).
// Global traffic per voxel: forward reads F, W (plus halo re-reads, mostly
// L2) and writes a, b, c; backward reads a, b, c, F, W and writes the
// gradient: about 11 floats per voxel in all.
//
// Issue 37: the same two passes as a "column march" (ColumnMarchKernel
// below, LnccOptions::cuda_kernel): the box march spends its time in serial
// running sums (a few threads per halo row), four barriers per slice and a
// shared-memory z ring; the column march gives every thread its own columns'
// z ring in registers and direct x and y window sums, with one barrier per
// slice. Same passes, same traffic, same partials layout (one per slice,
// xy tile and warp).
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/registration/lncc.h"
#include "kernels/registration/lncc_math.h"
#include "kernels/registration/reduce.cuh"
#include "kernels/registration/storage16.h"

namespace tessera {
namespace registration {
namespace cuda {
namespace {

// ComputeLnccTerms in float (the kColumnMarch float epilogue): the box sums
// themselves are float, so the variances' cancellation error is of the same
// order as in double; what float adds is the rounding of the products and of
// 1 / D (relative ~1e-6 on cc). 1 / D by the hardware's approximate
// reciprocal (rcp.approx.ftz: within 1 ulp) instead of the correctly rounded
// division, whose slow-path branch kept the two rows' epilogues from being
// scheduled together: issue 37, H100 2026-12-07, w7 fwd+bwd at 512^3 float
// 3.10 -> 2.85 ms, mixed 3.47 -> 3.18 ms, the same accuracy against the CPU
// reference (loss rel 3.9e-6, gradient rel L2 2.5e-6). D = var_F var_W + eps
// must be normal (>= eps >= FLT_MIN: the host takes the double epilogue for
// a smaller eps, where ftz would flush D to 0).
struct LnccTermsF {
  float cc, a, b, c;
};
__device__ __forceinline__ float RcpApprox(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ LnccTermsF ComputeLnccTermsF(float s_f, float s_w, float s_ff, float s_ww, float s_fw,
                                                        float inv_n, float eps) {
  const float cross = s_fw - s_f * s_w * inv_n;
  float var_f = s_ff - s_f * s_f * inv_n;
  float var_w = s_ww - s_w * s_w * inv_n;
  var_f = var_f > 0.f ? var_f : 0.f;
  var_w = var_w > 0.f ? var_w : 0.f;
  const float inv_d = RcpApprox(var_f * var_w + eps);
  LnccTermsF t;
  t.cc = cross * cross * inv_d;
  t.a = 2.f * cross * inv_d;
  t.b = -t.cc * var_f * inv_d;
  t.c = -(t.a * s_f + 2.f * t.b * s_w) * inv_n;
  return t;
}

constexpr int kTX = 32;  // tile width (x): one warp
constexpr int kTY = 8;   // tile height (y)
constexpr int kThreads = kTX * kTY;
constexpr int kWarps = kThreads / 32;  // = kTY: warp w holds row w of the tile
constexpr int kXsStride = kTX + 1;  // padded row stride of the x-sum buffer
constexpr int kXSegments = 2;       // threads per halo row in the x pass
constexpr int kXSegLen = kTX / kXSegments;

struct MarchShape {
  int64_t nx, ny, nz;
  int r, w;
  int hx, hy;  // halo tile extent: kTX + 2r by kTY + 2r
  int hxs;     // padded (odd) row stride of the halo tile in shared memory
  int64_t z_chunk;
};

// Forward quantities from (F, W). FixedT / CoefT: float, or the mixed
// precision storage of the lean stage (fp16 F, bf16 a, b, c; storage16.h).
template <typename FixedT = float, typename CoefT = float>
struct ForwardOp {
  static constexpr int kRaw = 2;
  static constexpr int kQ = 5;
  static constexpr int kCenter = 1;  // values the epilogue reads at its own voxel (none; 1 keeps arrays legal)
  const FixedT* __restrict__ fixed;
  const float* __restrict__ warped;
  CoefT* __restrict__ a_out;  // null: loss only
  CoefT* __restrict__ b_out;
  CoefT* __restrict__ c_out;
  double inv_n;
  double eps;
  VoxelMask mask;  // issue 34: centres outside it have no term

  __device__ __forceinline__ void Load(int64_t idx, float raw[kRaw]) const {
    raw[0] = LdgFloat(fixed + idx);
    raw[1] = __ldg(warped + idx);
  }
  __device__ __forceinline__ void LoadCenter(int64_t, float center[kCenter]) const { center[0] = 0.f; }
  // cp.async staging (float storage only): the raw channels' base pointers.
  static constexpr bool kAsyncCapable = std::is_same<FixedT, float>::value;
  __device__ __forceinline__ const float* RawBase(int c) const {
    if constexpr (kAsyncCapable) {
      return c == 0 ? fixed : warped;
    } else {
      return warped;
    }
  }
  // 16-byte cp.async (LnccOptions::cuda_aligned_rows): the cp.async channels' alignment.
  __host__ __device__ bool RawAligned16() const {
    const uintptr_t f = kAsyncCapable ? reinterpret_cast<uintptr_t>(fixed) : 0;
    return (f | reinterpret_cast<uintptr_t>(warped)) % 16 == 0;
  }
  // 16-bit channels staged by 16-byte cp.async (LnccOptions::cuda_stage16).
  __device__ __forceinline__ const void* Raw16Base(int) const { return fixed; }
  __host__ __device__ bool Raw16Aligned16() const { return reinterpret_cast<uintptr_t>(fixed) % 16 == 0; }
  template <typename A>
  __device__ __forceinline__ double EmitAt(int64_t idx, const A s[kQ], const float*) const {
    return Emit(idx, s);
  }
  // Paired stores (16-bit a, b, c, even nx, 4-byte aligned volumes): the
  // kernel computes a voxel's terms with EmitTerms (nothing stored; zeros at
  // masked centres) and stores two x-neighbours' coefficients per 32-bit word.
  static constexpr bool kWideStores = sizeof(CoefT) == 2;
  __host__ __device__ bool StoresAligned() const {
    return a_out != nullptr && (reinterpret_cast<uintptr_t>(a_out) | reinterpret_cast<uintptr_t>(b_out) |
                                reinterpret_cast<uintptr_t>(c_out)) % 4 == 0;
  }
  static constexpr bool kForward = true;
  // Paired loads (even nx, 4-byte aligned F): raw channels [0, kRaw16) are
  // 16-bit (fp16 F), loaded two per 32-bit word; the others one by one.
  static constexpr int kRaw16 = sizeof(FixedT) == 2 ? 1 : 0;
  __host__ __device__ bool LoadsAligned() const { return reinterpret_cast<uintptr_t>(fixed) % 4 == 0; }
  __device__ __forceinline__ uint32_t LoadWord(int, int64_t idx) const {
    return __ldg(reinterpret_cast<const unsigned int*>(fixed + idx));
  }
  __device__ __forceinline__ float LoadOne(int c, int64_t idx) const {
    return c == 0 ? LdgFloat(fixed + idx) : __ldg(warped + idx);
  }
  __device__ __forceinline__ static float Widen(int, uint32_t bits16) {
    FixedT v;
    if constexpr (sizeof(FixedT) == 2) {
      v.bits = static_cast<uint16_t>(bits16);
    } else {
      v = 0.f;
    }
    return ToFloat(v);
  }
  // The terms of the voxel idx (cc returned, a, b, c in abc), zero where it
  // is outside the volume (inside false) or its centre outside the mask.
  // The terms are computed either way, then kept or zeroed: the column
  // march's branch-free epilogue (kFastBranchFree) calls this for voxels
  // outside the volume too (their zero-padded sums give finite terms) so
  // that both rows' terms are scheduled together; the mask is read inside only.
  template <typename A>
  __device__ __forceinline__ double EmitTerms(int64_t idx, bool inside, const A s[kQ], float abc[3]) const {
    const auto t = Terms(s);
    const bool keep = inside && mask.has(idx);
    abc[0] = keep ? static_cast<float>(t.a) : 0.f;
    abc[1] = keep ? static_cast<float>(t.b) : 0.f;
    abc[2] = keep ? static_cast<float>(t.c) : 0.f;
    return keep ? static_cast<double>(t.cc) : 0.0;
  }
  // EmitTerms, then a, b, c stored (when wanted) at idx if it is inside.
  // Off the branch-free epilogue a masked centre skips the terms (a division):
  // the same zeros, stored without computing what they replace.
  template <typename A>
  __device__ __forceinline__ double Emit(int64_t idx, const A s[kQ], bool inside = true) const {
    float abc[3] = {0.f, 0.f, 0.f};
    const double cc = inside && mask.has(idx) ? EmitTerms(idx, inside, s, abc) : 0.0;
    if (inside && a_out != nullptr) {
      a_out[idx] = FromFloat<CoefT>(abc[0]);
      b_out[idx] = FromFloat<CoefT>(abc[1]);
      c_out[idx] = FromFloat<CoefT>(abc[2]);
    }
    return cc;
  }
  // Coefficients of voxels idx (even) and idx + 1, rounded as Emit rounds them.
  __device__ __forceinline__ void StorePair(int64_t idx, const float lo[3], const float hi[3]) const {
    if constexpr (kWideStores) {
      CoefT* out[3] = {a_out, b_out, c_out};
#pragma unroll
      for (int c = 0; c < 3; ++c) {
        const uint32_t word = static_cast<uint32_t>(FromFloat<CoefT>(lo[c]).bits) |
                              (static_cast<uint32_t>(FromFloat<CoefT>(hi[c]).bits) << 16);
        *reinterpret_cast<uint32_t*>(out[c] + idx) = word;
      }
    }
  }
  __device__ __forceinline__ static void Expand(const float raw[kRaw], float q[kQ]) {
    q[0] = raw[0];
    q[1] = raw[1];
    q[2] = raw[0] * raw[0];
    q[3] = raw[1] * raw[1];
    q[4] = raw[0] * raw[1];
  }
  __device__ __forceinline__ LnccTerms Terms(const double s[kQ]) const {
    return ComputeLnccTerms(s[0], s[1], s[2], s[3], s[4], inv_n, eps);
  }
  __device__ __forceinline__ LnccTermsF Terms(const float s[kQ]) const {
    return ComputeLnccTermsF(s[0], s[1], s[2], s[3], s[4], static_cast<float>(inv_n), static_cast<float>(eps));
  }
};

// Backward: box-filter (a, b, c) and combine into dL/dW.
template <typename FixedT = float, typename CoefT = float>
struct BackwardOp {
  static constexpr int kRaw = 3;
  static constexpr int kQ = 3;
  static constexpr int kCenter = 2;  // F and W at the epilogue's voxel (the column march prefetches them)
  const CoefT* __restrict__ a_in;
  const CoefT* __restrict__ b_in;
  const CoefT* __restrict__ c_in;
  const FixedT* __restrict__ fixed;
  const float* warped;  // may be grad itself (in place): no __restrict__, no __ldg
  float* grad;
  double scale;  // -1/N

  __device__ __forceinline__ void Load(int64_t idx, float raw[kRaw]) const {
    raw[0] = LdgFloat(a_in + idx);
    raw[1] = LdgFloat(b_in + idx);
    raw[2] = LdgFloat(c_in + idx);
  }
  __device__ __forceinline__ void LoadCenter(int64_t idx, float center[kCenter]) const {
    center[0] = LdgFloat(fixed + idx);
    center[1] = warped[idx];
  }
  static constexpr bool kAsyncCapable = std::is_same<CoefT, float>::value;
  __device__ __forceinline__ const float* RawBase(int c) const {
    if constexpr (kAsyncCapable) {
      return c == 0 ? a_in : (c == 1 ? b_in : c_in);
    } else {
      return warped;
    }
  }
  __host__ __device__ bool RawAligned16() const {
    return !kAsyncCapable || Raw16Aligned16();
  }
  __device__ __forceinline__ const void* Raw16Base(int c) const {
    return c == 0 ? static_cast<const void*>(a_in) : (c == 1 ? static_cast<const void*>(b_in) : c_in);
  }
  __host__ __device__ bool Raw16Aligned16() const {
    return (reinterpret_cast<uintptr_t>(a_in) | reinterpret_cast<uintptr_t>(b_in) |
            reinterpret_cast<uintptr_t>(c_in)) % 16 == 0;
  }
  static constexpr bool kForward = false;
  // Paired loads (even nx, 4-byte aligned volumes): a, b, c two 16-bit
  // values per 32-bit word.
  static constexpr int kRaw16 = sizeof(CoefT) == 2 ? 3 : 0;
  static constexpr bool kWideStores = false;
  __host__ __device__ bool LoadsAligned() const {
    return (reinterpret_cast<uintptr_t>(a_in) | reinterpret_cast<uintptr_t>(b_in) |
            reinterpret_cast<uintptr_t>(c_in)) % 4 == 0;
  }
  __host__ __device__ bool StoresAligned() const { return false; }
  // The word holding voxels idx (even) and idx + 1 of raw channel c.
  __device__ __forceinline__ uint32_t LoadWord(int c, int64_t idx) const {
    const CoefT* base = c == 0 ? a_in : (c == 1 ? b_in : c_in);
    return __ldg(reinterpret_cast<const unsigned int*>(base + idx));
  }
  __device__ __forceinline__ float LoadOne(int c, int64_t idx) const {
    return LdgFloat((c == 0 ? a_in : (c == 1 ? b_in : c_in)) + idx);
  }
  __device__ __forceinline__ static float Widen(int, uint32_t bits16) {
    CoefT v;
    if constexpr (sizeof(CoefT) == 2) {
      v.bits = static_cast<uint16_t>(bits16);
    } else {
      v = 0.f;
    }
    return ToFloat(v);
  }
  // Emit with F and W already loaded (center): the same arithmetic.
  template <typename A>
  __device__ __forceinline__ double EmitAt(int64_t idx, const A s[kQ], const float center[kCenter]) const {
    const A f = center[0];
    const A w = center[1];
    grad[idx] = static_cast<float>(static_cast<A>(scale) * (f * s[0] + A(2) * w * s[1] + s[2]));
    return 0.0;
  }
  __device__ __forceinline__ static void Expand(const float raw[kRaw], float q[kQ]) {
    q[0] = raw[0];
    q[1] = raw[1];
    q[2] = raw[2];
  }
  template <typename A>
  __device__ __forceinline__ double Emit(int64_t idx, const A s[kQ]) const {
    const A f = LdgFloat(fixed + idx);
    const A w = warped[idx];
    grad[idx] = static_cast<float>(static_cast<A>(scale) * (f * s[0] + A(2) * w * s[1] + s[2]));
    return 0.0;
  }
};

template <int kQ>
size_t SharedBytes(const MarchShape& sh) {
  const size_t floats = static_cast<size_t>(kQ) * sh.hy * sh.hxs     // halo tile
                        + static_cast<size_t>(kQ) * sh.hy * kXsStride  // x sums
                        + static_cast<size_t>(kQ) * kThreads           // xy sums
                        + static_cast<size_t>(sh.w) * kQ * kThreads;   // z ring
  return floats * sizeof(float);
}

template <class Op, int kMaxLoads, bool kReduce>
__global__ void __launch_bounds__(kThreads) BoxMarchKernel(Op op, MarchShape sh, double* __restrict__ partials) {
  constexpr int kQ = Op::kQ;
  constexpr int kRaw = Op::kRaw;
  extern __shared__ float smem[];
  float* s_in = smem;                              // [kQ][hy][hxs]
  float* s_xs = s_in + kQ * sh.hy * sh.hxs;        // [kQ][hy][kXsStride]
  float* s_xy = s_xs + kQ * sh.hy * kXsStride;     // [kQ][kThreads]
  float* s_ring = s_xy + kQ * kThreads;            // [w][kQ][kThreads]

  const int tid = threadIdx.x;
  const int r = sh.r;
  const int64_t x0 = static_cast<int64_t>(blockIdx.x) * kTX;
  const int64_t y0 = static_cast<int64_t>(blockIdx.y) * kTY;
  const int64_t z_begin = static_cast<int64_t>(blockIdx.z) * sh.z_chunk;
  const int64_t z_end = z_begin + sh.z_chunk < sh.nz ? z_begin + sh.z_chunk : sh.nz;
  const int64_t my_x = x0 + (tid % kTX);
  const int64_t my_y = y0 + (tid / kTX);
  const bool my_inside = my_x < sh.nx && my_y < sh.ny;
  const int npos = sh.hy * sh.hx;
  const int64_t plane = sh.nx * sh.ny;

  for (int e = 0; e < sh.w * kQ; ++e) s_ring[e * kThreads + tid] = 0.0f;
  double acc[kQ];

  // Raw values of this thread's halo positions for one slice.
  float raw[kMaxLoads][kRaw];
  auto load_slice = [&](int64_t zin) {
    const bool z_ok = zin >= 0 && zin < sh.nz;
#pragma unroll
    for (int s = 0; s < kMaxLoads; ++s) {
      const int p = tid + s * kThreads;
      bool ok = z_ok && p < npos;
      int64_t idx = 0;
      if (ok) {
        const int hr = p / sh.hx;
        const int hc = p - hr * sh.hx;
        const int64_t gx = x0 - r + hc;
        const int64_t gy = y0 - r + hr;
        ok = gx >= 0 && gx < sh.nx && gy >= 0 && gy < sh.ny;
        idx = gx + sh.nx * gy + plane * zin;
      }
      if (ok) {
        op.Load(idx, raw[s]);
      } else {
#pragma unroll
        for (int c = 0; c < kRaw; ++c) raw[s][c] = 0.0f;
      }
    }
  };

  const int64_t zin_begin = z_begin - r;
  const int64_t zin_end = z_end + r;  // exclusive
  load_slice(zin_begin);
  int slot = 0;
  for (int64_t zin = zin_begin; zin < zin_end; ++zin) {
    __syncthreads();  // the previous slice's readers of s_in / s_xs are done
#pragma unroll
    for (int s = 0; s < kMaxLoads; ++s) {
      const int p = tid + s * kThreads;
      if (p < npos) {
        const int hr = p / sh.hx;
        const int hc = p - hr * sh.hx;
        float q[kQ];
        Op::Expand(raw[s], q);
#pragma unroll
        for (int c = 0; c < kQ; ++c) s_in[(c * sh.hy + hr) * sh.hxs + hc] = q[c];
      }
    }
    if (zin + 1 < zin_end) load_slice(zin + 1);  // in flight during the passes below
    __syncthreads();

    // x pass: running sums along each halo row, kXSegments threads per row.
    for (int item = tid; item < kQ * sh.hy * kXSegments; item += kThreads) {
      const int row = item / kXSegments;  // c * hy + hr
      const int t0 = (item % kXSegments) * kXSegLen;
      const float* src = s_in + row * sh.hxs;
      float* dst = s_xs + row * kXsStride;
      double sum = 0.0;
      for (int h = t0; h <= t0 + 2 * r; ++h) sum += src[h];
      dst[t0] = static_cast<float>(sum);
      for (int t = t0 + 1; t < t0 + kXSegLen; ++t) {
        sum += static_cast<double>(src[t + 2 * r]) - static_cast<double>(src[t - 1]);
        dst[t] = static_cast<float>(sum);
      }
    }
    __syncthreads();

    // y pass: running sums down each tile column.
    for (int item = tid; item < kQ * kTX; item += kThreads) {
      const int c = item / kTX;
      const int tx = item % kTX;
      const float* col = s_xs + c * sh.hy * kXsStride + tx;
      float* dst = s_xy + c * kThreads + tx;
      double sum = 0.0;
      for (int h = 0; h <= 2 * r; ++h) sum += col[h * kXsStride];
      dst[0] = static_cast<float>(sum);
      for (int ty = 1; ty < kTY; ++ty) {
        sum += static_cast<double>(col[(ty + 2 * r) * kXsStride]) - static_cast<double>(col[(ty - 1) * kXsStride]);
        dst[ty * kTX] = static_cast<float>(sum);
      }
    }
    __syncthreads();

    // z: this thread's column; the ring slot holds slice zin - w.
#pragma unroll
    for (int c = 0; c < kQ; ++c) s_ring[(slot * kQ + c) * kThreads + tid] = s_xy[c * kThreads + tid];
    const int64_t z = zin - r;
    if (z >= z_begin) {
      double cc = 0.0;
      if (my_inside) {
        // The window's w slices added directly in ascending z (the oldest,
        // slice z - r, sits after the newest): the sum does not depend on
        // where this block's z chunk (or a z-slab of the volume) starts.
        // In float, as the x and y sums before them (w terms: no drift).
        float sum[kQ];
#pragma unroll
        for (int c = 0; c < kQ; ++c) sum[c] = 0.f;
        int at = slot + 1 == sh.w ? 0 : slot + 1;
        for (int d = 0; d < sh.w; ++d) {
#pragma unroll
          for (int c = 0; c < kQ; ++c) sum[c] += s_ring[(at * kQ + c) * kThreads + tid];
          at = at + 1 == sh.w ? 0 : at + 1;
        }
#pragma unroll
        for (int c = 0; c < kQ; ++c) acc[c] = static_cast<double>(sum[c]);
        cc = op.Emit(my_x + sh.nx * my_y + plane * z, acc);
      }
      if (kReduce) {
        // One sum per (slice, xy tile, warp): a fixed shuffle tree over the
        // warp's row of the tile, no block barrier (slice_sums.h).
        // FinishSlices adds a slice's tiles and warps in order.
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) cc += __shfl_xor_sync(0xffffffffu, cc, off);
        if ((tid & 31) == 0) {
          const int64_t tile = blockIdx.x + static_cast<int64_t>(gridDim.x) * blockIdx.y;
          partials[(z * (static_cast<int64_t>(gridDim.x) * gridDim.y) + tile) * kWarps + (tid >> 5)] = cc;
        }
      }
    }
    slot = slot + 1 == sh.w ? 0 : slot + 1;
  }
}

MarchShape MakeShape(Dims3 dims, int window) {
  MarchShape sh;
  sh.nx = dims.nx;
  sh.ny = dims.ny;
  sh.nz = dims.nz;
  sh.r = window / 2;
  sh.w = window;
  sh.hx = kTX + 2 * sh.r;
  sh.hy = kTY + 2 * sh.r;
  sh.hxs = sh.hx % 2 == 1 ? sh.hx : sh.hx + 1;
  // Enough blocks to fill the GPU several times over; each z chunk re-reads a
  // 2r-slice warm-up, so chunks stay at least 8r (and 16) slices deep.
  const int64_t blocks_xy = ((dims.nx + kTX - 1) / kTX) * ((dims.ny + kTY - 1) / kTY);
  const int64_t target_blocks = 2048;
  int64_t chunks = (target_blocks + blocks_xy - 1) / blocks_xy;
  int64_t chunk = (dims.nz + chunks - 1) / chunks;
  const int64_t min_chunk = 8 * sh.r > 16 ? 8 * sh.r : 16;
  if (chunk < min_chunk) chunk = min_chunk;
  sh.z_chunk = chunk;
  return sh;
}

dim3 MarchGrid(const MarchShape& sh) {
  return dim3(static_cast<unsigned>((sh.nx + kTX - 1) / kTX), static_cast<unsigned>((sh.ny + kTY - 1) / kTY),
              static_cast<unsigned>((sh.nz + sh.z_chunk - 1) / sh.z_chunk));
}

template <class Op, int kMaxLoads, bool kReduce>
absl::Status LaunchMarch(const Op& op, const MarchShape& sh, double* partials, cudaStream_t stream) {
  const size_t smem = SharedBytes<Op::kQ>(sh);
  auto kernel = BoxMarchKernel<Op, kMaxLoads, kReduce>;
  TESSERA_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  kernel<<<MarchGrid(sh), kThreads, smem, stream>>>(op, sh, partials);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("lncc box march");
  return absl::OkStatus();
}

template <class Op, bool kReduce>
absl::Status DispatchMarch(const Op& op, const MarchShape& sh, double* partials, cudaStream_t stream) {
  const int loads = (sh.hx * sh.hy + kThreads - 1) / kThreads;
  if (loads <= 3) return LaunchMarch<Op, 3, kReduce>(op, sh, partials, stream);
  if (loads <= 8) return LaunchMarch<Op, 8, kReduce>(op, sh, partials, stream);
  return absl::InvalidArgumentError("lncc (CUDA): window too large");
}


// f(std::integral_constant<int, 0>{}), ..., f(std::integral_constant<int, N - 1>{}) in order:
// compile-time indices for register arrays.
template <class F, int... I>
__device__ __forceinline__ void StaticForImpl(F&& f, std::integer_sequence<int, I...>) {
  (f(std::integral_constant<int, I>{}), ...);
}
template <int N, class F>
__device__ __forceinline__ void StaticFor(F&& f) {
  StaticForImpl(f, std::make_integer_sequence<int, N>{});
}

// ---- kColumnMarch (issue 37) -----------------------------------------------
// A block of 256 threads owns a 32 x 16 tile of (x, y) columns and a range of
// z. Thread (lane, warp) owns column x0 + lane of rows y0 + 2 warp + {0, 1}
// (two rows per thread: one measured 1.5x slower on an H100) and keeps their
// last w slices of xy box sums in registers (a ring indexed at compile time:
// the z loop is unrolled by w), so the z window sum is a direct sum in
// ascending z with no shared-memory traffic. Per input slice:
//   - the halo tile's raw values (F, W or a, b, c) go to a shared buffer (by
//     cp.async, or prefetched a slice ahead in registers);
//   - x pass: each thread sums four adjacent columns of one halo row (w + 3
//     taps for four sums sharing their middle terms; products formed in
//     registers), into one of two x-sum buffers;
//   - y pass of the previous slice: each thread sums its two rows' w x-sum
//     rows (their common w - 1 terms once), then the z ring and the epilogue.
// The x pass of slice k and the y pass of slice k - 1 share one barrier.
// Every sum is a fixed-order sum of its window's terms (float, as kBoxMarch's
// stored sums), so a voxel's value does not depend on its block's z chunk or
// on a z-slab's start (issue 39).
// One 4-byte global -> shared copy that bypasses registers (sm_80+);
// `ok` false: the shared word is zero-filled (src-size 0) and `src` must
// still be a valid address.
__device__ __forceinline__ void CpAsync4(float* dst, const float* src, bool ok) {
  const unsigned saddr = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(saddr), "l"(src), "r"(ok ? 4 : 0));
}
// The same for 16 bytes (both addresses 16-byte aligned; L2 only).
__device__ __forceinline__ void CpAsync16(void* dst, const void* src, bool ok) {
  const unsigned saddr = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(saddr), "l"(src), "r"(ok ? 16 : 0));
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N of this thread's newest commit groups are pending.
template <int N>
__device__ __forceinline__ void CpAsyncWaitGroup() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

constexpr int kColThreads = 256;
constexpr int kColWarps = kColThreads / 32;
constexpr int kColRows = 2;       // tile rows per thread
constexpr int kColStages = 4;     // cp.async halo buffers (float staging; 2 and 3 measured slower)

// Kernel variants (issue 37), a bit mask: kFastAligned, halo rows at
// 16-byte boundaries (LnccOptions::cuda_aligned_rows); kFastZPairs, z sums
// from shared pair and quad sums (with kFastStage16 only, below).
constexpr int kFastZPairs = 1;
constexpr int kFastAligned = 2;
// kFastStage16 (with kFastAligned and cp.async; cuda_stage16): the 16-bit
// channels (fp16 F, bf16 a, b, c) by 16-byte cp.async too, into 16-bit tiles
// whose rows start at x = x0 - 8 (kHalfRow values: x0 - 8 .. x0 + 39), widened
// to float as the x pass reads them. nx % 8 == 0, 16-byte aligned volumes.
// (Rows 96 values apart, so that a half warp's two rows share no bank, tied
// on an H100: 3.46 vs 3.47 ms, 2026-12-07; removed.)
constexpr int kFastStage16 = 4;
constexpr int kHalfRow = 48;
// kFastBranchFree (the forward's float epilogue, window 7): both rows' terms
// computed for every thread and kept where inside, so that they are
// scheduled together (ForwardOp::EmitTerms). It came with the approximate
// reciprocal (measured together, round 6); on the window-7 fallback paths it
// spills less than round 6's inside-only epilogue with the division (ptxas,
// sm_90, bytes of spill stores: the odd-nx mixed forward 76 -> 56, the float
// forward by registers 72 -> 56), except the mixed forward with cp.async W
// and paired F words on unaligned rows (nx % 4 == 2): 12 -> 80.
constexpr int kFastBranchFree = 16;
// z pairs where they were measured to win (issue 37, H100 2026-12-07, w7
// fwd+bwd at 512^3): 16-bit storage on the 16-bit cp.async path (kFastStage16)
// 3.18 -> 2.99 ms with the approximate reciprocal (gradient rel L2 against the
// CPU reference 1.82e-4 -> 1.95e-4). Everywhere else off: float storage 2.85
// -> 2.90 / 3.43 ms in two runs (its forward spills the pair and quad sums);
// 16-bit storage without kFastStage16 4.03 -> 4.22 ms (register words) and
// 3.644 -> 3.645 ms (aligned rows) in round 5, and its fallback forwards
// spill 150-400 bytes more with them (ptxas). So 16-bit storage's z sums, and
// its rounding, depend on the path: cuda_stage16 where it applies.
constexpr int kStage16Fast = kFastStage16 | kFastAligned | kFastZPairs;

template <int kW, bool kAligned = false>
struct ColShape {
  static constexpr int kR = kW / 2;
  static constexpr int kTY = kColWarps * kColRows;
  static constexpr int kHX = 32 + 2 * kR;
  static constexpr int kHY = kTY + 2 * kR;
  // Halo column hc (x = x0 - r + hc) sits at index hc + kShift of a row of
  // kHXS floats. Aligned: rows start at x = x0 - 4 (a 16-byte boundary in
  // global memory when nx % 4 == 0), 40 floats, so that rows move as 16-byte
  // chunks and the x pass reads float4s (a quarter warp, one row: no bank
  // conflicts). Otherwise an odd stride: the x pass's four rows per warp
  // read 32 distinct banks.
  static_assert(!kAligned || kR <= 4, "aligned rows hold x0 - 4 .. x0 + 35");
  static constexpr int kShift = kAligned ? 4 - kR : 0;
  static constexpr int kHXS = kAligned ? 40 : (kHX | 1);
  static constexpr int kPos = kHX * kHY;
  static constexpr int kPosS = kHXS * kHY;
  static constexpr int kLoads = (kPos + kColThreads - 1) / kColThreads;
  // Paired 16-bit loads: a halo row as 32-bit words from the even x at or
  // below x0 - r through the odd x at or above x0 + 31 + r.
  static constexpr int kWordX0 = kR + (kR & 1);  // x0 - kWordX0: the first word's x
  static constexpr int kWords = (kWordX0 + 32 + kR + 1) / 2;
  static constexpr int kWordPos = kWords * kHY;
  static constexpr int kWordLoads = (kWordPos + kColThreads - 1) / kColThreads;
};

// The x-sum buffers' offset in floats: after the raw halo buffers, rounded
// up to 16 bytes (the x pass stores float4).
template <int kRaw, int kPosS, int kStages>
constexpr int ColXsOffset() {
  return (kStages * kRaw * kPosS + 3) / 4 * 4;
}

// Channels staged as 16-bit tiles (kFastStage16): [0, kH).
template <class Op, int kFast>
constexpr int ColHalfChannels() {
  return (kFast & kFastStage16) != 0 ? Op::kRaw16 : 0;
}

// Float halo tiles, x sums, then (kFastStage16) the 16-bit tiles.
template <class Op, int kW, int kStages, int kFast>
constexpr size_t ColSharedBytes() {
  using S = ColShape<kW, (kFast & kFastAligned) != 0>;
  constexpr int kH = ColHalfChannels<Op, kFast>();
  return sizeof(float) * (ColXsOffset<Op::kRaw - kH, S::kPosS, kStages>() + 2 * Op::kQ * S::kHY * 32) +
         sizeof(uint16_t) * kStages * kH * S::kHY * kHalfRow;
}

// kAsync: the halo tile goes global -> shared by cp.async (float channels),
// kStages buffers deep (slice t + kStages - 1 is requested while slice t is
// summed). kWide (16-bit storage, even nx, 4-byte aligned volumes), a mask:
// kWideLoads, the 16-bit halo channels (fp16 F, bf16 a, b, c) loaded in
// 32-bit words of two values through registers; kWideStores, the forward
// stores a, b, c in 32-bit words of two x-neighbours. kFast: the kFast*
// bits above.
constexpr int kWideLoadBit = 1;
constexpr int kWideStoreBit = 2;
template <class Op, int kW, bool kAsync = false, int kWide = 0, int kStages = 2, int kFast = 0>
__global__ void __launch_bounds__(kColThreads, 2) ColumnMarchKernel(Op op, int64_t nx, int64_t ny, int64_t nz,
                                                                    int64_t z_chunk, bool float_epilogue,
                                                                    double* __restrict__ partials) {
  constexpr bool kAligned = (kFast & kFastAligned) != 0;
  constexpr bool kZPairs = (kFast & kFastZPairs) != 0;
  constexpr bool kStage16 = (kFast & kFastStage16) != 0;
  constexpr bool kBranchFree = (kFast & kFastBranchFree) != 0;
  using S = ColShape<kW, kAligned>;
  constexpr int kRows = kColRows;
  constexpr bool kWideLoads = (kWide & kWideLoadBit) != 0;
  constexpr bool kWideStores = (kWide & kWideStoreBit) != 0;
  static_assert(!kWideLoads || Op::kRaw16 > 0, "paired loads need 16-bit channels");
  static_assert(!kWideStores || Op::kWideStores, "paired stores: 16-bit a, b, c");
  // cp.async moves floats: with paired loads, only the float channels (the
  // mixed forward's W; its fp16 F comes in register words).
  static_assert(!kAsync || !kWideLoads || Op::kRaw16 < Op::kRaw, "cp.async needs a float channel");
  static_assert(!(kAsync && kWideLoads) || kStages == 2, "hybrid staging: two buffers");
  static_assert(kStages >= 2 && (kAsync || kStages == 2), "a deeper pipeline is cp.async's");
  static_assert(!kStage16 || (kAsync && kAligned && !kWideLoads && Op::kRaw16 > 0), "16-bit cp.async staging");
  static_assert(!kBranchFree || Op::kForward, "the branch-free epilogue is the forward's");
  constexpr int kR16 = kWideLoads ? Op::kRaw16 : 0;  // halo channels loaded in words
  constexpr int kQ = Op::kQ;
  constexpr int kRaw = Op::kRaw;
  constexpr int kH = ColHalfChannels<Op, kFast>();  // channels [0, kH) in 16-bit tiles
  constexpr int kRawF = kRaw - kH;                    // channels [kH, kRaw) in float tiles (index c - kH)
  constexpr int r = S::kR;
  extern __shared__ __align__(16) float smem[];
  float* s_raw = smem;                                            // [kStages][kRawF][kHY][kHXS]
  float* s_xs = smem + ColXsOffset<kRawF, S::kPosS, kStages>();  // [2][kQ][kHY][32]
  uint16_t* s_half = reinterpret_cast<uint16_t*>(s_xs + 2 * kQ * S::kHY * 32);  // [kStages][kH][kHY][kHalfRow]

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int64_t x0 = static_cast<int64_t>(blockIdx.x) * 32;
  const int64_t y0 = static_cast<int64_t>(blockIdx.y) * S::kTY;
  const int64_t z_begin = static_cast<int64_t>(blockIdx.z) * z_chunk;
  const int64_t z_end = z_begin + z_chunk < nz ? z_begin + z_chunk : nz;
  const int64_t plane = nx * ny;
  const int64_t my_x = x0 + lane;

  // Prefetched halo values (register staging): slice t + 1 is loaded while
  // slice t is summed.
  float raw[(kAsync || kR16 == kRaw) ? 1 : S::kLoads][kRaw];
  uint32_t words[kWideLoads ? S::kWordLoads : 1][kR16 > 0 ? kR16 : 1];
  // Every 16-byte chunk of a slice's kHY halo rows, kChunks per row, chunk m
  // of row hr from x = x0 - kPer + kPer * m (kPer values per chunk):
  // f(hr, m, idx, ok), with ok false (and idx 0, a valid address) where the
  // chunk lies outside the volume. The host checked that nx is a multiple of
  // kPer, so each chunk is wholly inside or outside.
  auto for_each_chunk = [&](auto chunks_tag, auto per_tag, int64_t zin, auto&& f) {
    constexpr int kChunks = decltype(chunks_tag)::value;
    constexpr int kPer = decltype(per_tag)::value;
    constexpr int kChunkPos = kChunks * S::kHY;
    const bool z_ok = zin >= 0 && zin < nz;
#pragma unroll
    for (int s = 0; s < (kChunkPos + kColThreads - 1) / kColThreads; ++s) {
      const int p = tid + s * kColThreads;
      if (p < kChunkPos) {
        const int hr = p / kChunks;
        const int m = p - hr * kChunks;
        const int64_t gx = x0 - kPer + kPer * m;
        const int64_t gy = y0 - r + hr;
        const bool ok = z_ok && gx >= 0 && gx < nx && gy >= 0 && gy < ny;
        f(hr, m, ok ? gx + nx * gy + plane * zin : int64_t{0}, ok);
      }
    }
  };
  auto copy_slice = [&](int64_t zin, int buf) {  // kAsync: straight into raw buffer `buf`
    float* dst = s_raw + buf * kRawF * S::kPosS;  // channel c >= kH at (c - kH) * kPosS
    if constexpr (kStage16) {
      // 16-bit rows from x0 - 8 (kHalfRow values), 8 values per chunk.
      for_each_chunk(std::integral_constant<int, kHalfRow / 8>{}, std::integral_constant<int, 8>{}, zin,
                     [&](int hr, int m, int64_t idx, bool ok) {
#pragma unroll
                       for (int c = 0; c < kH; ++c) {
                         const void* src = static_cast<const uint16_t*>(op.Raw16Base(c)) + idx;
                         CpAsync16(s_half + ((buf * kH + c) * S::kHY + hr) * kHalfRow + 8 * m, src, ok);
                       }
                     });
    }
    if constexpr (kAligned) {
      // Float rows from x0 - 4 (kHXS values), 4 values per chunk (the host
      // checked 16-byte aligned float channels).
      for_each_chunk(std::integral_constant<int, S::kHXS / 4>{}, std::integral_constant<int, 4>{}, zin,
                     [&](int hr, int m, int64_t idx, bool ok) {
#pragma unroll
                       for (int c = kR16 + kH; c < kRaw; ++c) {
                         CpAsync16(dst + (c - kH) * S::kPosS + hr * S::kHXS + 4 * m, op.RawBase(c) + idx, ok);
                       }
                     });
    } else {
      const bool z_ok = zin >= 0 && zin < nz;
#pragma unroll
      for (int s = 0; s < S::kLoads; ++s) {
        const int p = tid + s * kColThreads;
        if (p < S::kPos) {
          const int hr = p / S::kHX;
          const int hc = p - hr * S::kHX;
          const int64_t gx = x0 - r + hc;
          const int64_t gy = y0 - r + hr;
          const bool ok = z_ok && gx >= 0 && gx < nx && gy >= 0 && gy < ny;
          const int64_t idx = ok ? gx + nx * gy + plane * zin : 0;
#pragma unroll
          for (int c = kR16; c < kRaw; ++c) {
            CpAsync4(dst + c * S::kPosS + hr * S::kHXS + hc + S::kShift, op.RawBase(c) + idx, ok);
          }
        }
      }
    }
    CpAsyncCommit();
  };
  auto load_slice = [&](int64_t zin) {
    const bool z_ok = zin >= 0 && zin < nz;
    if constexpr (kWideLoads) {
      // Word k of halo row hr holds x = x0 - kWordX0 + 2k and the next x:
      // both inside the volume or both outside (even x, even nx).
#pragma unroll
      for (int s = 0; s < S::kWordLoads; ++s) {
        const int p = tid + s * kColThreads;
        const int hr = p / S::kWords;
        const int k = p - hr * S::kWords;
        const int64_t gx = x0 - S::kWordX0 + 2 * k;
        const int64_t gy = y0 - r + hr;
        if (z_ok && p < S::kWordPos && gx >= 0 && gx < nx && gy >= 0 && gy < ny) {
          const int64_t idx = gx + nx * gy + plane * zin;
#pragma unroll
          for (int c = 0; c < kR16; ++c) words[s][c] = op.LoadWord(c, idx);
        } else {
#pragma unroll
          for (int c = 0; c < kR16; ++c) words[s][c] = 0u;
        }
      }
    }
    if constexpr (!kAsync && kR16 < kRaw) {
#pragma unroll
      for (int s = 0; s < S::kLoads; ++s) {
        const int p = tid + s * kColThreads;
        const int hr = p / S::kHX;
        const int hc = p - hr * S::kHX;
        const int64_t gx = x0 - r + hc;
        const int64_t gy = y0 - r + hr;
        if (z_ok && p < S::kPos && gx >= 0 && gx < nx && gy >= 0 && gy < ny) {
          if constexpr (kR16 == 0) {
            op.Load(gx + nx * gy + plane * zin, raw[s]);
          } else {
#pragma unroll
            for (int c = kR16; c < kRaw; ++c) raw[s][c] = op.LoadOne(c, gx + nx * gy + plane * zin);
          }
        } else {
#pragma unroll
          for (int c = kR16; c < kRaw; ++c) raw[s][c] = 0.0f;
        }
      }
    }
  };
  auto store_slice = [&](int buf) {
    float* dst = s_raw + buf * kRaw * S::kPosS;
    if constexpr (kWideLoads) {
#pragma unroll
      for (int s = 0; s < S::kWordLoads; ++s) {
        const int p = tid + s * kColThreads;
        if (p < S::kWordPos) {
          const int hr = p / S::kWords;
          const int hc = 2 * (p - hr * S::kWords) - (r & 1);  // the low half's halo column
          const int at = hc + S::kShift;                      // its index in the row
          // Aligned rows also hold the word's value left of the halo (x0 - 4).
          const bool lo_ok = kAligned ? at >= 0 : hc >= 0;
          const bool hi_ok = kAligned ? at + 1 < S::kHXS : hc + 1 < S::kHX;
          float* row = dst + hr * S::kHXS;
#pragma unroll
          for (int c = 0; c < kR16; ++c) {
            if (lo_ok) row[c * S::kPosS + at] = Op::Widen(c, words[s][c] & 0xffffu);
            if (hi_ok) row[c * S::kPosS + at + 1] = Op::Widen(c, words[s][c] >> 16);
          }
        }
      }
    }
    if constexpr (!kAsync && kR16 < kRaw) {
#pragma unroll
      for (int s = 0; s < S::kLoads; ++s) {
        const int p = tid + s * kColThreads;
        if (p < S::kPos) {
          const int at = (p / S::kHX) * S::kHXS + p % S::kHX + S::kShift;
#pragma unroll
          for (int c = kR16; c < kRaw; ++c) dst[c * S::kPosS + at] = raw[s][c];
        }
      }
    }
  };
  // x pass on raw buffer `rbuf` into x-sum buffer `xbuf`: four adjacent
  // columns per thread, 8 threads per halo row, one pass over the 8 * kHY
  // items: w + 3 taps for four sums that share their middle w - 3 terms.
  // Sum j = (taps j..2 + middle) + taps w..w+j-1.
  auto x_pass = [&](int rbuf, int xbuf) {
    const float* src = s_raw + rbuf * kRawF * S::kPosS;  // channel c >= kH at (c - kH) * kPosS
    float* dst = s_xs + xbuf * kQ * S::kHY * 32;
    for (int item = tid; item < 8 * S::kHY; item += kColThreads) {
      const int row = item >> 3;
      const int col = 4 * (item & 7);
      const float* at = src + row * S::kHXS + col;
      // Aligned rows: the taps as three float4s per channel (tap k at
      // index k + kShift).
      float vec[kAligned ? kRaw : 1][kAligned ? 12 : 1];
      if constexpr (kStage16) {
        // Tap k's value at 16-bit index col + 4 + kShift + k (the row
        // starts at x0 - 8): three 8-byte words per channel.
#pragma unroll
        for (int c = 0; c < kH; ++c) {
          const uint16_t* h = s_half + ((rbuf * kH + c) * S::kHY + row) * kHalfRow + col + 4;
#pragma unroll
          for (int m = 0; m < 3; ++m) {
            const uint2 u = *reinterpret_cast<const uint2*>(h + 4 * m);
            vec[c][4 * m] = Op::Widen(c, u.x & 0xffffu);
            vec[c][4 * m + 1] = Op::Widen(c, u.x >> 16);
            vec[c][4 * m + 2] = Op::Widen(c, u.y & 0xffffu);
            vec[c][4 * m + 3] = Op::Widen(c, u.y >> 16);
          }
        }
      }
      if constexpr (kAligned) {
#pragma unroll
        for (int c = kH; c < kRaw; ++c) {
#pragma unroll
          for (int m = 0; m < 3; ++m) {
            const float4 f = *reinterpret_cast<const float4*>(at + (c - kH) * S::kPosS + 4 * m);
            vec[c][4 * m] = f.x;
            vec[c][4 * m + 1] = f.y;
            vec[c][4 * m + 2] = f.z;
            vec[c][4 * m + 3] = f.w;
          }
        }
      }
      auto tap = [&](int k, float q[kQ]) {
        float v[kRaw];
#pragma unroll
        for (int c = 0; c < kRaw; ++c) {
          if constexpr (kAligned) {
            v[c] = vec[c][k + S::kShift];
          } else {
            v[c] = at[c * S::kPosS + k];
          }
        }
        Op::Expand(v, q);
      };
      float mid[kQ], p2[kQ], p12[kQ], o0[kQ], q[kQ];
      if constexpr (kW > 3) {
        tap(3, mid);  // sums start from their first term (no 0 + x)
      } else {
#pragma unroll
        for (int c = 0; c < kQ; ++c) mid[c] = 0.f;
      }
#pragma unroll
      for (int k = 4; k < kW; ++k) {
        tap(k, q);
#pragma unroll
        for (int c = 0; c < kQ; ++c) mid[c] += q[c];
      }
      tap(2, p2);
      tap(1, q);
#pragma unroll
      for (int c = 0; c < kQ; ++c) p12[c] = q[c] + p2[c];
      tap(0, q);
#pragma unroll
      for (int c = 0; c < kQ; ++c) {
        o0[c] = (q[c] + p12[c]) + mid[c];
        p12[c] = p12[c] + mid[c];  // now the base of sum 1
        p2[c] = p2[c] + mid[c];    // and of sum 2
      }
      float s12[kQ], o1[kQ];
      tap(kW, q);
#pragma unroll
      for (int c = 0; c < kQ; ++c) {
        o1[c] = p12[c] + q[c];
        s12[c] = q[c];
      }
      tap(kW + 1, q);
#pragma unroll
      for (int c = 0; c < kQ; ++c) {
        s12[c] += q[c];
        p2[c] = p2[c] + s12[c];  // sum 2
      }
      tap(kW + 2, q);
#pragma unroll
      for (int c = 0; c < kQ; ++c) {
        const float o3 = mid[c] + (s12[c] + q[c]);
        *reinterpret_cast<float4*>(dst + (c * S::kHY + row) * 32 + col) = make_float4(o0[c], o1[c], p2[c], o3);
      }
    }
  };

  // The epilogue's own-voxel inputs (backward: F, W), loaded one step ahead
  // so that their latency hides behind a slice's passes.
  constexpr int kC = Op::kCenter;
  float center[kRows][kC], center_next[kRows][kC];
  auto load_center = [&](int64_t z) {
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      const int64_t my_y = y0 + warp * kRows + j;
      if (z >= z_begin && z < z_end && my_x < nx && my_y < ny) {
        op.LoadCenter(my_x + nx * my_y + plane * z, center_next[j]);
      } else {
#pragma unroll
        for (int c = 0; c < kC; ++c) center_next[j][c] = 0.f;
      }
    }
  };

  // ring: the xy sums P_u of input slice u at slot u % kW. kZPairs: also
  // pairs Q_u = P_u + P_{u+1} and quads R_u = Q_u + Q_{u+2} at slot u % kW,
  // each formed once and shared by the windows that contain it.
  float ring[kW][kRows][kQ];
  float pairs[kZPairs ? kW : 1][kRows][kQ];
  float quads[kZPairs ? kW : 1][kRows][kQ];
#pragma unroll
  for (int k = 0; k < kW; ++k)
#pragma unroll
    for (int j = 0; j < kRows; ++j)
#pragma unroll
      for (int c = 0; c < kQ; ++c) ring[k][j][c] = 0.f;
  if constexpr (kZPairs) {
#pragma unroll
    for (int k = 0; k < kW; ++k)
#pragma unroll
      for (int j = 0; j < kRows; ++j)
#pragma unroll
        for (int c = 0; c < kQ; ++c) pairs[k][j][c] = quads[k][j][c] = 0.f;
  }

  // y pass of x-sum buffer `buf` (input slice u, ring slot kSlot = u % kW),
  // then (when the slice z = u - r is one of this block's) the z sums and
  // the epilogue.
  auto y_pass_and_emit = [&](int buf, auto slot_tag, int64_t zin) {
    constexpr int kSlot = decltype(slot_tag)::value;
    const float* src = s_xs + buf * kQ * S::kHY * 32;
#pragma unroll
    for (int c = 0; c < kQ; ++c) {
      float rows[kRows + 2 * r];
#pragma unroll
      for (int h = 0; h < kRows + 2 * r; ++h) rows[h] = src[(c * S::kHY + warp * kRows + h) * 32 + lane];
      // The rows' common terms kRows - 1 .. w - 1 once; row j adds its own
      // first terms before them and its last terms after.
      float common = rows[kRows - 1];
#pragma unroll
      for (int h = kRows; h < kW; ++h) common += rows[h];
#pragma unroll
      for (int j = 0; j < kRows; ++j) {
        float sum = common;
        if (j <= kRows - 2) {
          float pre = rows[j];
#pragma unroll
          for (int h = j + 1; h <= kRows - 2; ++h) pre += rows[h];
          sum = pre + common;
        }
#pragma unroll
        for (int h = kW; h < kW + j; ++h) sum += rows[h];
        ring[kSlot][j][c] = sum;
      }
    }
    // The window of z = u - r is slices u - (w - 1) .. u, summed from the
    // oldest: kZPairs, quads while 4 or more slices remain, then a pair,
    // then P_u (w = 7: R_{u-6} + Q_{u-2} + P_u).
    [[maybe_unused]] constexpr int kNumQuads = kZPairs ? (kW - 1) / 4 : 0;
    if constexpr (kZPairs) {
      constexpr int kPrev = (kSlot + kW - 1) % kW;  // slice u - 1
#pragma unroll
      for (int j = 0; j < kRows; ++j)
#pragma unroll
        for (int c = 0; c < kQ; ++c) pairs[kPrev][j][c] = ring[kPrev][j][c] + ring[kSlot][j][c];
      if constexpr (kW >= 5) {
        constexpr int kOld = (kSlot + kW - 3) % kW;  // R_{u-3} = Q_{u-3} + Q_{u-1}
#pragma unroll
        for (int j = 0; j < kRows; ++j)
#pragma unroll
          for (int c = 0; c < kQ; ++c) quads[kOld][j][c] = pairs[kOld][j][c] + pairs[kPrev][j][c];
      }
    }
    const int64_t z = zin - r;
    if (z < z_begin || z >= z_end) return;
    double cc = 0.0;
    float abc[kRows][3];  // kWideStores: this thread's coefficients, stored below in pairs
#pragma unroll
    for (int j = 0; j < kRows; ++j) abc[j][0] = abc[j][1] = abc[j][2] = 0.f;
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      const int64_t my_y = y0 + warp * kRows + j;
      const bool inside = my_x < nx && my_y < ny;
      // kBranchFree: the sums and terms of both rows for every thread,
      // kept where inside; otherwise only inside.
      if (kBranchFree || inside) {
        float sum[kQ];
        if constexpr (kZPairs) {
          StaticFor<kNumQuads>([&](auto i_tag) {
            constexpr int i = decltype(i_tag)::value;
            constexpr int kAt = (kSlot + 1 + 4 * i) % kW;  // slice u - (w - 1) + 4i
#pragma unroll
            for (int c = 0; c < kQ; ++c) {
              if constexpr (i == 0) {
                sum[c] = quads[kAt][j][c];
              } else {
                sum[c] += quads[kAt][j][c];
              }
            }
          });
          if constexpr ((kW - 4 * kNumQuads) >= 2) {  // a pair
            constexpr int kAt = (kSlot + 1 + 4 * kNumQuads) % kW;
#pragma unroll
            for (int c = 0; c < kQ; ++c) {
              if constexpr (kNumQuads == 0) {
                sum[c] = pairs[kAt][j][c];
              } else {
                sum[c] += pairs[kAt][j][c];
              }
            }
          }
#pragma unroll
          for (int c = 0; c < kQ; ++c) sum[c] += ring[kSlot][j][c];
        } else {
          // The window's slices in ascending z, from the first term (no
          // 0 + x): the oldest (z - r) is the slot after the newest.
#pragma unroll
          for (int c = 0; c < kQ; ++c) sum[c] = ring[(kSlot + 1) % kW][j][c];
#pragma unroll
          for (int d = 2; d <= kW; ++d) {
#pragma unroll
            for (int c = 0; c < kQ; ++c) sum[c] += ring[(kSlot + d) % kW][j][c];
          }
        }
        const int64_t idx = my_x + nx * my_y + plane * z;
        // 16-bit paired stores: the terms only (stored below in pairs);
        // otherwise Emit / EmitAt store them (the forward) or the gradient.
        auto emit = [&](const auto* s) -> double {
          if constexpr (kWideStores) {
            return op.EmitTerms(idx, inside, s, abc[j]);
          } else if constexpr (kBranchFree) {
            return op.Emit(idx, s, inside);
          } else {
            return op.EmitAt(idx, s, center[j]);
          }
        };
        if (kBranchFree || float_epilogue) {  // (kBranchFree: only with the float epilogue)
          cc += emit(sum);
        } else {
          double acc[kQ];
#pragma unroll
          for (int c = 0; c < kQ; ++c) acc[c] = static_cast<double>(sum[c]);
          cc += emit(acc);
        }
      }
    }
    if constexpr (kWideStores) {
      // Lane pair (even x, x + 1): the even lane stores row 0's two values,
      // the odd lane row 1's; each gives the other the value it lacks.
      const int j = lane & 1;
      float lo[3], hi[3];
#pragma unroll
      for (int c = 0; c < 3; ++c) {
        const float got = __shfl_xor_sync(0xffffffffu, j == 0 ? abc[1][c] : abc[0][c], 1);
        lo[c] = j == 0 ? abc[0][c] : got;
        hi[c] = j == 0 ? got : abc[1][c];
      }
      const int64_t my_y = y0 + warp * kRows + j;
      const int64_t xe = my_x - j;
      if (xe < nx && my_y < ny) op.StorePair(xe + nx * my_y + plane * z, lo, hi);
    }
    if (partials != nullptr) {
      // One sum per (slice, xy tile, warp): a fixed shuffle tree.
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) cc += __shfl_xor_sync(0xffffffffu, cc, off);
      if (lane == 0) {
        const int64_t tile = blockIdx.x + static_cast<int64_t>(gridDim.x) * blockIdx.y;
        partials[(z * (static_cast<int64_t>(gridDim.x) * gridDim.y) + tile) * kColWarps + warp] = cc;
      }
    }
  };

  // Step t handles input slice zin_begin + t: x pass of it, y pass of the
  // one before. Ring slot of input slice t is t % kW, so the z loop is
  // unrolled by kW to keep the ring in registers.
  const int64_t zin_begin = z_begin - r;
  const int64_t nslices = (z_end + r) - zin_begin;
  if constexpr (kAsync && kWideLoads) {
    load_slice(zin_begin);
    store_slice(0);
    if (nslices > 1) load_slice(zin_begin + 1);
  }
  if constexpr (kAsync) {
    // One commit group per slice (empty past the end), so that waiting for
    // all but the newest kStages - 2 groups means "slice t + 1 has landed".
#pragma unroll
    for (int i = 0; i + 1 < kStages; ++i) {
      if (i < nslices) {
        copy_slice(zin_begin + i, i);
      } else {
        CpAsyncCommit();
      }
    }
    CpAsyncWaitGroup<kStages - 2>();
  } else {
    load_slice(zin_begin);
    store_slice(0);
    if (nslices > 1) load_slice(zin_begin + 1);
  }
  // Step t emits slice zin_begin + t - 1 - r (when it is >= z_begin); step
  // t - 1 loads its center values.
#pragma unroll
  for (int j = 0; j < kRows; ++j)
#pragma unroll
    for (int c = 0; c < kC; ++c) center[j][c] = 0.f;
  __syncthreads();
  for (int64_t t0 = 0; t0 <= nslices; t0 += kW) {
    StaticFor<kW>([&](auto k_tag) {
      constexpr int k = decltype(k_tag)::value;
      const int64_t t = t0 + k;
      // kZPairs runs whole periods, updating its partial sums at every step
      // (their slots are written unconditionally, so only the live ones
      // take registers); steps past the end touch no memory and emit
      // nothing.
      if constexpr (!kZPairs) {
        if (t > nslices) return;
      }
      const int buf = static_cast<int>(t & 1);
      if constexpr (kAsync) {
        // Into the buffer of slice t - 1 (its x pass is behind the barrier).
        const int64_t ahead = t + kStages - 1;
        if (ahead < nslices) {
          copy_slice(zin_begin + ahead, static_cast<int>(ahead % kStages));
        } else {
          CpAsyncCommit();
        }
        if constexpr (kWideLoads) {  // the 16-bit channels from registers, as below
          if (t + 1 < nslices) {
            store_slice(buf ^ 1);
            if (t + 2 < nslices) load_slice(zin_begin + t + 2);
          }
        }
      } else if (t + 1 < nslices) {
        store_slice(buf ^ 1);  // slice t + 1, loaded during step t - 1
        if (t + 2 < nslices) load_slice(zin_begin + t + 2);
      }
      if (kC > 1) load_center(zin_begin + t - r);  // the next step's voxels
      if (t < nslices) x_pass(kAsync ? static_cast<int>(t % kStages) : buf, buf);
      // (kZPairs at t = 0: a stale buffer into partial sums of slice -1,
      // which no emitted window contains.)
      if (kZPairs || t >= 1) {
        y_pass_and_emit(buf ^ 1, std::integral_constant<int, (k + kW - 1) % kW>{}, zin_begin + t - 1);
      }
      if (kC > 1) {
#pragma unroll
        for (int j = 0; j < kRows; ++j)
#pragma unroll
          for (int c = 0; c < kC; ++c) center[j][c] = center_next[j][c];
      }
      if constexpr (kAsync) CpAsyncWaitGroup<kStages - 2>();  // slice t + 1 is in shared memory
      __syncthreads();
    });
  }
}

// The z chunk depth that minimises waves * (chunk + 2r), the slices a wave
// of `resident` blocks marches (tail waves and warm-up slices both count);
// chunks stay >= 8r and 16 slices deep. The values do not depend on it
// (direct z sums). A fixed block count (2048, as MakeShape) measured no
// faster on an H100 (issue 37).
int64_t ColumnChunk(int64_t nz, int r, int64_t tiles, int64_t resident) {
  const int64_t min_chunk = 8 * r > 16 ? 8 * r : 16;
  int64_t best = nz < min_chunk ? min_chunk : nz;
  double best_cost = -1;
  for (int64_t chunks = 1; chunks <= 256; ++chunks) {
    const int64_t chunk = (nz + chunks - 1) / chunks;
    if (chunk < min_chunk && chunks > 1) break;
    const int64_t blocks = tiles * ((nz + chunk - 1) / chunk);
    const int64_t waves = (blocks + resident - 1) / resident;
    const double cost = static_cast<double>(waves) * static_cast<double>(chunk + 2 * r);
    if (best_cost < 0 || cost < 0.99 * best_cost) {
      best_cost = cost;
      best = chunk;
    }
  }
  return best;
}

template <class Op, int kW, bool kAsync = false, int kWide = 0, int kStages = 2, int kFast = 0>
absl::Status LaunchColumnMarch(const Op& op, Dims3 dims, bool float_epilogue,
                               double* partials, cudaStream_t stream) {
  using S = ColShape<kW, (kFast & kFastAligned) != 0>;
  const size_t smem = ColSharedBytes<Op, kW, kStages, kFast>();
  auto kernel = ColumnMarchKernel<Op, kW, kAsync, kWide, kStages, kFast>;
  TESSERA_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  int device = 0, sms = 0, per_sm = 0;
  TESSERA_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  TESSERA_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  TESSERA_CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kColThreads, smem));
  const int64_t resident = std::max<int64_t>(1, static_cast<int64_t>(sms) * per_sm);
  const int64_t tiles = ((dims.nx + 31) / 32) * ((dims.ny + S::kTY - 1) / S::kTY);
  const int64_t z_chunk = ColumnChunk(dims.nz, S::kR, tiles, resident);
  const dim3 grid(static_cast<unsigned>((dims.nx + 31) / 32), static_cast<unsigned>((dims.ny + S::kTY - 1) / S::kTY),
                  static_cast<unsigned>((dims.nz + z_chunk - 1) / z_chunk));
  kernel<<<grid, kColThreads, smem, stream>>>(op, dims.nx, dims.ny, dims.nz, z_chunk, float_epilogue, partials);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("lncc column march");
  return absl::OkStatus();
}

// Window 7 with the kFast bits given; the forward's float epilogue
// branch-free (kFastBranchFree).
template <class Op, bool kAsync = false, int kWide = 0, int kStages = 2, int kFast = 0>
absl::Status LaunchColumnMarch7(const Op& op, Dims3 dims, bool float_epilogue, double* partials,
                                cudaStream_t stream) {
  if constexpr (Op::kForward) {
    if (float_epilogue) {
      return LaunchColumnMarch<Op, 7, kAsync, kWide, kStages, kFast | kFastBranchFree>(op, dims, float_epilogue,
                                                                                        partials, stream);
    }
  }
  return LaunchColumnMarch<Op, 7, kAsync, kWide, kStages, kFast>(op, dims, float_epilogue, partials, stream);
}

// The same with aligned rows where `aligned`.
template <class Op, bool kAsync, int kWide, int kStages>
absl::Status LaunchColumnMarch7Rows(const Op& op, Dims3 dims, bool float_epilogue, bool aligned, double* partials,
                                    cudaStream_t stream) {
  if (aligned) {
    return LaunchColumnMarch7<Op, kAsync, kWide, kStages, kFastAligned>(op, dims, float_epilogue, partials, stream);
  }
  return LaunchColumnMarch7<Op, kAsync, kWide, kStages>(op, dims, float_epilogue, partials, stream);
}

// wide: the paired 16-bit accesses that apply (kWideLoadBit, kWideStoreBit;
// the caller checked even nx and alignment). aligned_rows, stage16: window
// 7's LnccOptions::cuda_aligned_rows and cuda_stage16, dropped where they do
// not apply (with cp.async, aligned rows need nx % 4 == 0 and 16-byte aligned
// float channels; 16-bit staging needs cp.async, nx % 8 == 0 and 16-byte
// aligned volumes).
template <class Op>
absl::Status DispatchColumnWindow(const Op& op, Dims3 dims, int window, bool float_epilogue, bool async_copy,
                                  bool aligned_rows, bool stage16, int wide, double* partials, cudaStream_t stream) {
  const bool async_aligned = aligned_rows && dims.nx % 4 == 0 && op.RawAligned16();
  if constexpr (Op::kRaw16 > 0) {
    if (window == 7 && async_copy && stage16 && dims.nx % 8 == 0 && op.RawAligned16() && op.Raw16Aligned16()) {
      if constexpr (Op::kWideStores) {
        if ((wide & kWideStoreBit) != 0) {
          return LaunchColumnMarch7<Op, true, kWideStoreBit, kColStages, kStage16Fast>(op, dims, float_epilogue,
                                                                                      partials, stream);
        }
      }
      return LaunchColumnMarch7<Op, true, 0, kColStages, kStage16Fast>(op, dims, float_epilogue, partials, stream);
    }
  }
  // Paired 16-bit loads / stores: window 7 only (the registration default).
  if constexpr (Op::kRaw16 > 0 || Op::kWideStores) {
    if (window == 7) {
      constexpr int kL = Op::kRaw16 > 0 ? kWideLoadBit : 0;
      constexpr int kS = Op::kWideStores ? kWideStoreBit : 0;
      // The mixed forward with paired F loads and cp.async: F words through
      // registers, W by cp.async (its 4-byte floats).
      if constexpr (kL != 0 && Op::kRaw16 < Op::kRaw) {
        if (async_copy && wide == kL) {
          return LaunchColumnMarch7Rows<Op, true, kL, 2>(op, dims, float_epilogue, async_aligned, partials, stream);
        }
        if constexpr (kS != 0) {
          if (async_copy && wide == (kL | kS)) {
            return LaunchColumnMarch7Rows<Op, true, kL | kS, 2>(op, dims, float_epilogue, async_aligned, partials,
                                                                stream);
          }
        }
      }
      if (kL != 0 && wide == kL) {  // the mixed backward: a, b, c in words through registers
        return LaunchColumnMarch7Rows<Op, false, kL, 2>(op, dims, float_epilogue, aligned_rows, partials, stream);
      }
      // (Aligned rows only change where values are staged, not the bits:
      // left out on the paths below.)
      if (kS != 0 && wide == kS) {
        return LaunchColumnMarch7<Op, false, kS>(op, dims, float_epilogue, partials, stream);
      }
      if (kL != 0 && kS != 0 && wide == (kL | kS)) {
        return LaunchColumnMarch7<Op, false, kL | kS>(op, dims, float_epilogue, partials, stream);
      }
    }
  }
  if constexpr (Op::kAsyncCapable) {  // cp.async staging: window 7 only (the registration default)
    if (async_copy && window == 7) {
      return LaunchColumnMarch7Rows<Op, true, 0, kColStages>(op, dims, float_epilogue, async_aligned, partials,
                                                             stream);
    }
  }
  switch (window) {
    case 3: return LaunchColumnMarch<Op, 3>(op, dims, float_epilogue, partials, stream);
    case 5: return LaunchColumnMarch<Op, 5>(op, dims, float_epilogue, partials, stream);
    case 7: return LaunchColumnMarch7<Op>(op, dims, float_epilogue, partials, stream);
    case 9: return LaunchColumnMarch<Op, 9>(op, dims, float_epilogue, partials, stream);
    default: return absl::InvalidArgumentError("lncc (CUDA column march): unsupported window");
  }
}

bool ColumnMarchSupports(int window) { return window == 3 || window == 5 || window == 7 || window == 9; }

// total_voxels: N of the loss and gradient (dims.size() unless dims is a
// z-slab of a larger volume); slice_cc (device, dims.nz doubles, may be
// null): the per-slice cc sums.
template <typename FixedT, typename CoefT>
absl::Status LnccImpl(const Stream& stream, const FixedT* fixed, const float* warped, Dims3 dims,
                      const LnccOptions& options, int64_t total_voxels, float* loss, double* slice_cc,
                      float* grad_warped, Workspace* workspace, CoefT* coefficients, VoxelMask mask = {}) {
  if (options.window > kLnccMaxCudaWindow) {
    return absl::InvalidArgumentError(
        absl::StrCat("lncc (CUDA): window ", options.window, " exceeds the maximum of ", kLnccMaxCudaWindow));
  }
  if (loss == nullptr && slice_cc == nullptr && grad_warped == nullptr) return absl::OkStatus();
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  int max_smem = 0;
  TESSERA_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, stream.ordinal()));
  const MarchShape sh = MakeShape(dims, options.window);
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  if (SharedBytes<ForwardOp<>::kQ>(sh) + 32 * sizeof(double) > static_cast<size_t>(max_smem)) {
    return absl::InvalidArgumentError(
        absl::StrCat("lncc (CUDA): window ", options.window, " needs more shared memory than the GPU has"));
  }
  const dim3 grid = MarchGrid(sh);
  // kDefault: the column march (issue 37: faster on an H100 in
  // bench/lncc_variants_bench) where it supports the window.
  const bool column = options.cuda_kernel != LnccCudaKernel::kBoxMarch && ColumnMarchSupports(options.window);
  const int64_t column_tile_y = kColWarps * kColRows;
  const int64_t tiles = column ? ((dims.nx + 31) / 32) * ((dims.ny + column_tile_y - 1) / column_tile_y)
                               : static_cast<int64_t>(grid.x) * grid.y;
  // Partials per slice: one per tile and warp (both kernels: 8 warps).
  static_assert(kColWarps == kWarps, "one partial per warp in both kernels");
  const int64_t per_slice = tiles * kWarps;
  auto march = [&](const auto& op, double* part) -> absl::Status {
    using Op = std::decay_t<decltype(op)>;
    if (column) {
      // Paired 16-bit accesses (one 32-bit load or store per two values, the
      // same bits) wherever they apply: even x in every word (even nx) and
      // 4-byte aligned volumes. With cuda_stage16 only the paired a, b, c
      // stores remain (16-byte copies load the 16-bit halos).
      int wide = 0;
      if (dims.nx % 2 == 0) {
        if (Op::kRaw16 > 0 && op.LoadsAligned()) wide |= kWideLoadBit;
        if (Op::kWideStores && op.StoresAligned()) wide |= kWideStoreBit;
      }
      // The float epilogue's approximate reciprocal needs a normal
      // denominator (ComputeLnccTermsF): a smaller eps takes the double one.
      const bool float_epilogue = options.cuda_float_epilogue && options.eps >= std::numeric_limits<float>::min();
      return DispatchColumnWindow<Op>(op, dims, options.window, float_epilogue, options.cuda_async_copy,
                                      options.cuda_aligned_rows, options.cuda_stage16, wide, part, s);
    }
    if (part != nullptr) return DispatchMarch<Op, true>(op, sh, part, s);
    return DispatchMarch<Op, false>(op, sh, nullptr, s);
  };
  const int64_t n = dims.size();
  const bool want_grad = grad_warped != nullptr;
  const bool want_sums = loss != nullptr || slice_cc != nullptr;

  size_t bytes =
      ScratchCarver::Align(sizeof(double) * per_slice * dims.nz) + ScratchCarver::Align(sizeof(double) * dims.nz);
  const bool own_coefficients = want_grad && coefficients == nullptr;
  if (own_coefficients) bytes += 3 * ScratchCarver::Align(sizeof(CoefT) * n);
  Workspace local;
  TESSERA_ASSIGN_OR_RETURN(void* base, ReserveScratch(stream, bytes, workspace, local));
  ScratchCarver carve(base);
  double* partials = carve.Take<double>(per_slice * dims.nz);
  double* slices = carve.Take<double>(dims.nz);
  CoefT* a = own_coefficients ? carve.Take<CoefT>(n) : (want_grad ? coefficients : nullptr);
  CoefT* b = own_coefficients ? carve.Take<CoefT>(n) : (want_grad ? coefficients + n : nullptr);
  CoefT* c = own_coefficients ? carve.Take<CoefT>(n) : (want_grad ? coefficients + 2 * n : nullptr);

  ForwardOp<FixedT, CoefT> fwd{fixed, warped, a, b, c, 1.0 / (static_cast<double>(sh.w) * sh.w * sh.w), options.eps,
                               mask};
  if (want_sums) {
    // loss = -(sum of the slices' cc sums in ascending z) / N, as the CPU
    // reference and the sharded evaluation (slice_sums.h).
    TESSERA_RETURN_IF_ERROR(march(fwd, partials));
    TESSERA_CUDA_RETURN_IF_ERROR(cuda_detail::FinishSlices(partials, dims.nz, per_slice, slice_cc != nullptr ? slice_cc : slices,
                                                           -1.0, static_cast<double>(total_voxels), loss, s));
  } else {
    TESSERA_RETURN_IF_ERROR(march(fwd, nullptr));
  }
  if (want_grad) {
    BackwardOp<FixedT, CoefT> bwd{a, b, c, fixed, warped, grad_warped, -1.0 / static_cast<double>(total_voxels)};
    TESSERA_RETURN_IF_ERROR(march(bwd, nullptr));
  }
  if (workspace == nullptr) TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return absl::OkStatus();
}

}  // namespace

absl::Status Lncc(const Stream& stream, const float* fixed, const float* warped, Dims3 dims,
                  const LnccOptions& options, float* loss, float* grad_warped, Workspace* workspace,
                  float* coefficients, VoxelMask mask) {
  return LnccImpl(stream, fixed, warped, dims, options, mask.mask != nullptr ? mask.count : dims.size(), loss,
                  nullptr, grad_warped, workspace, coefficients, mask);
}

absl::Status LnccSlab(const Stream& stream, const float* fixed, const float* warped, Dims3 dims,
                      const LnccOptions& options, int64_t total_voxels, double* slice_cc, float* grad_warped,
                      Workspace* workspace) {
  return LnccImpl<float, float>(stream, fixed, warped, dims, options, total_voxels, nullptr, slice_cc, grad_warped,
                                workspace, nullptr);
}

absl::Status LnccHalfFixed(const Stream& stream, const Half* fixed, const float* warped, Dims3 dims,
                           const LnccOptions& options, float* loss, float* grad_warped, BFloat16* coefficients,
                           Workspace* workspace, VoxelMask mask) {
  return LnccImpl(stream, fixed, warped, dims, options, mask.mask != nullptr ? mask.count : dims.size(), loss,
                  nullptr, grad_warped, workspace, coefficients, mask);
}

}  // namespace cuda
}  // namespace registration
}  // namespace tessera
