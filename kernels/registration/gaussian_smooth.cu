// CUDA separable Gaussian smoothing and trilinear resampling; see
// gaussian_smooth.h. Per component: an x pass that stages each row (with its
// clamped halo) in shared memory, so it may run in place; y and z passes as
// one tiled kernel over a strided axis (32 consecutive x values per warp,
// coalesced), out of place through one scalar scratch volume.
#include <algorithm>
#include <cstdint>

#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/registration/gaussian_smooth.h"
#include "kernels/registration/gaussian_smooth_internal.h"
#include "kernels/registration/storage16.h"

namespace tessera {
namespace registration {
namespace gs_internal {
namespace {

// ---------------------------------------------------------------------------
// Policies (SM 90 first).
// ---------------------------------------------------------------------------
struct RowPolicy {
  static constexpr int kThreads = 256;
  static constexpr int kWarps = kThreads / 32;
  static constexpr int64_t kMaxWarpRow = 1024;  // row + halo per warp (8 warps: <= 32 KB): one warp per row
  static constexpr int64_t kMaxRow = 8192;      // row + halo per block (<= 33 KB): one block per row
};
struct AxisPolicy {
  static constexpr int kInner = 32;   // threads along the contiguous inner index
  static constexpr int kRows = 8;     // threads along the filtered axis
  static constexpr int kTile = 64;    // outputs along the axis per block
  static constexpr int kMaxGridZ = 65535;
};
static_assert(AxisPolicy::kTile % AxisPolicy::kRows == 0, "each thread row owns whole outputs");
static_assert(RowPolicy::kThreads % 32 == 0, "whole warps");

struct Taps {
  int radius;
  float w[2 * kGaussianMaxRadius + 1];
};

Taps MakeTaps(const std::vector<float>& t) {
  Taps taps{};
  taps.radius = static_cast<int>(t.size() / 2);
  std::copy(t.begin(), t.end(), taps.w);
  return taps;
}

__device__ __forceinline__ int64_t ClampIdx(int64_t v, int64_t hi) { return v < 0 ? 0 : (v > hi ? hi : v); }

// One block per row of nx floats (rows = ny * nz). in may equal out: the block
// reads its whole row before writing it.
// In / Out: float, or the mixed-precision stage's bf16 (converted on load and
// store; arithmetic in float either way).
template <typename In = float, typename Out = float>
__global__ void __launch_bounds__(RowPolicy::kThreads)
    RowKernel(const In* in, Out* out, int64_t nx, int64_t rows, Taps taps) {
  extern __shared__ float line[];
  const int r = taps.radius;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const In* src = in + row * nx;
    for (int64_t i = threadIdx.x; i < nx + 2 * r; i += RowPolicy::kThreads) {
      line[i] = ToFloat(src[ClampIdx(i - r, nx - 1)]);
    }
    __syncthreads();
    Out* dst = out + row * nx;
    for (int64_t i = threadIdx.x; i < nx; i += RowPolicy::kThreads) {
      float s = 0.f;
      for (int d = 0; d <= 2 * r; ++d) s = fmaf(taps.w[d], line[i + d], s);
      dst[i] = FromFloat<Out>(s);
    }
    __syncthreads();
  }
}

// Filters along an axis: element (i, a, o) at i + inner * (a + n * o).
// Block: 32 inner values x a tile of kTile axis outputs, for one o.
template <typename In = float, typename Out = float>
__global__ void __launch_bounds__(AxisPolicy::kInner * AxisPolicy::kRows)
    AxisKernel(const In* __restrict__ in, Out* __restrict__ out, int64_t inner, int64_t n, int64_t outer,
               Taps taps) {
  extern __shared__ float tile[];  // (kTile + 2r) x kInner
  const int r = taps.radius;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t i = int64_t(blockIdx.x) * AxisPolicy::kInner + tx;
  const int64_t a0 = int64_t(blockIdx.y) * AxisPolicy::kTile;
  const int span = AxisPolicy::kTile + 2 * r;
  for (int64_t o = blockIdx.z; o < outer; o += gridDim.z) {
    const In* src = in + inner * n * o;
    for (int s = ty; s < span; s += AxisPolicy::kRows) {
      const int64_t a = ClampIdx(a0 + s - r, n - 1);
      tile[s * AxisPolicy::kInner + tx] = i < inner ? ToFloat(src[i + inner * a]) : 0.f;
    }
    __syncthreads();
    if (i < inner) {
      Out* dst = out + inner * n * o;
      for (int t = ty; t < AxisPolicy::kTile; t += AxisPolicy::kRows) {
        const int64_t a = a0 + t;
        if (a >= n) break;
        float s = 0.f;
        for (int d = 0; d <= 2 * r; ++d) s = fmaf(taps.w[d], tile[(t + d) * AxisPolicy::kInner + tx], s);
        dst[i + inner * a] = FromFloat<Out>(s);
      }
    }
    __syncthreads();
  }
}

// AxisKernel's filter with each thread computing kRun consecutive outputs
// along the axis from one sweep over the tile: kRun + 2r shared-memory loads
// instead of kRun (2r + 1) (shared-memory loads bound AxisKernel at the
// lean stage's sigma 6, 37 taps). The taps slide through registers (tap
// d - o for output o at step d, 0 outside [0, 2r]), so each output still sums
// fmaf(w[d], x[d], s) for d ascending from s = 0, as AxisKernel: the zero
// taps add +-0, which leaves a finite sum unchanged, so the results are
// AxisKernel's bit for bit for finite inputs (a non-finite input would also
// reach the kRun - 1 neighbours' sums through 0 * inf).
template <typename In = float, typename Out = float>
__global__ void __launch_bounds__(AxisPolicy::kInner * AxisPolicy::kRows)
    AxisRunKernel(const In* __restrict__ in, Out* __restrict__ out, int64_t inner, int64_t n, int64_t outer,
                  Taps taps) {
  constexpr int kRun = AxisPolicy::kTile / AxisPolicy::kRows;
  extern __shared__ float tile[];  // (kTile + 2r) x kInner, then the 2r + 1 taps
  const int r = taps.radius;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t i = int64_t(blockIdx.x) * AxisPolicy::kInner + tx;
  const int64_t a0 = int64_t(blockIdx.y) * AxisPolicy::kTile;
  const int span = AxisPolicy::kTile + 2 * r;
  float* w = tile + span * AxisPolicy::kInner;
  for (int q = ty * AxisPolicy::kInner + tx; q <= 2 * r; q += AxisPolicy::kInner * AxisPolicy::kRows) w[q] = taps.w[q];
  const int t0 = ty * kRun;  // this thread's first output row in the tile
  for (int64_t o = blockIdx.z; o < outer; o += gridDim.z) {
    const In* src = in + inner * n * o;
    for (int s = ty; s < span; s += AxisPolicy::kRows) {
      const int64_t a = ClampIdx(a0 + s - r, n - 1);
      tile[s * AxisPolicy::kInner + tx] = i < inner ? ToFloat(src[i + inner * a]) : 0.f;
    }
    __syncthreads();
    float acc[kRun], wr[kRun];
#pragma unroll
    for (int q = 0; q < kRun; ++q) acc[q] = wr[q] = 0.f;
    const float* column = tile + t0 * AxisPolicy::kInner + tx;
    for (int d = 0; d < 2 * r + kRun; ++d) {
#pragma unroll
      for (int q = kRun - 1; q > 0; --q) wr[q] = wr[q - 1];
      wr[0] = d <= 2 * r ? w[d] : 0.f;
      const float x = column[d * AxisPolicy::kInner];
#pragma unroll
      for (int q = 0; q < kRun; ++q) acc[q] = fmaf(wr[q], x, acc[q]);
    }
    if (i < inner) {
      Out* dst = out + inner * n * o;
#pragma unroll
      for (int q = 0; q < kRun; ++q) {
        const int64_t a = a0 + t0 + q;
        if (a < n) dst[i + inner * a] = FromFloat<Out>(acc[q]);
      }
    }
    __syncthreads();
  }
}

// AxisRunKernel with the radius R a template argument: the sweep unrolls, so
// each output's sum is fmaf(w[d], x, s) for d ascending from s = 0 (exactly
// AxisKernel's) with the taps as constant operands and no sliding registers
// (the run kernel spends ~20 instructions per 8 fmafs on them at radius 18).
// The block index is linear with the axis tiles fastest, so the blocks that
// share a tile's halo rows run together (their second read hits L2; with the
// inner index fastest, the z pass re-reads its halos from DRAM).
template <int R, typename In = float, typename Out = float>
__global__ void __launch_bounds__(AxisPolicy::kInner * AxisPolicy::kRows)
    AxisFixedKernel(const In* __restrict__ in, Out* __restrict__ out, int64_t inner, int64_t n, int64_t outer,
                    Taps taps) {
  constexpr int kRun = AxisPolicy::kTile / AxisPolicy::kRows;
  constexpr int kSpan = AxisPolicy::kTile + 2 * R;
  __shared__ float tile[kSpan * AxisPolicy::kInner];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t tiles = (n + AxisPolicy::kTile - 1) / AxisPolicy::kTile;
  const int64_t inner_blocks = (inner + AxisPolicy::kInner - 1) / AxisPolicy::kInner;
  const int64_t b = blockIdx.x;
  const int64_t a0 = (b % tiles) * AxisPolicy::kTile;
  const int64_t rest = b / tiles;
  const int64_t i = (rest % inner_blocks) * AxisPolicy::kInner + tx;
  const int64_t o = rest / inner_blocks;
  if (o >= outer) return;
  const In* src = in + inner * n * o;
  // Every load of the tile issued before any is stored (all in flight: with
  // a load or a few at a time per thread, latency bounds the pass).
  constexpr int kLoads = (kSpan + AxisPolicy::kRows - 1) / AxisPolicy::kRows;
  float v[kLoads];
#pragma unroll
  for (int m = 0; m < kLoads; ++m) {
    const int s = ty + m * AxisPolicy::kRows;
    v[m] = s < kSpan && i < inner ? ToFloat(src[i + inner * ClampIdx(a0 + s - R, n - 1)]) : 0.f;
  }
#pragma unroll
  for (int m = 0; m < kLoads; ++m) {
    const int s = ty + m * AxisPolicy::kRows;
    if (s < kSpan) tile[s * AxisPolicy::kInner + tx] = v[m];
  }
  __syncthreads();
  const int t0 = ty * kRun;
  float acc[kRun];
#pragma unroll
  for (int q = 0; q < kRun; ++q) acc[q] = 0.f;
  const float* column = tile + t0 * AxisPolicy::kInner + tx;
#pragma unroll
  for (int d = 0; d < 2 * R + kRun; ++d) {
    const float x = column[d * AxisPolicy::kInner];
#pragma unroll
    for (int q = 0; q < kRun; ++q) {
      if (d - q >= 0 && d - q <= 2 * R) acc[q] = fmaf(taps.w[d - q], x, acc[q]);
    }
  }
  if (i < inner) {
    Out* dst = out + inner * n * o;
#pragma unroll
    for (int q = 0; q < kRun; ++q) {
      const int64_t a = a0 + t0 + q;
      if (a < n) dst[i + inner * a] = FromFloat<Out>(acc[q]);
    }
  }
}

// AxisFixedKernel's sums (the same fmaf order over the same clamped
// neighbours, so the same bits) from one block per 32-wide inner strip that
// marches along the whole axis in steps of kMarchRows kRun-output rows
// (issue 37): each input is loaded from global memory once (AxisFixedKernel
// loads a 64-output tile's 2R halo rows again for every tile: 1.56x at
// radius 18), and the loads of the next step are issued before the current
// step's sums, so they are in flight while it computes (AxisFixedKernel
// waits for its loads, then computes: at radius 18 its ~300 fmafs per thread
// do not overlap the memory time). The staged rows live in a ring of kRing
// rows (a power of two >= the step's 8 kRun + 2R rows: the next step's rows
// are stored after a barrier, over rows no step reads again). in may equal
// out: a block reads every row of its strip before it writes it (its loads
// run ahead of its stores) and no other block touches the strip.
// The ring's first 2R + kRun rows are mirrored past its end, so a thread's
// window of 2R + kRun rows is contiguous (constant offsets from one base: no
// wrap-around arithmetic per tap row; 2R + kRun more rows of shared memory
// and stores). Issue 37, H100 2026-12-07: the sigma-6 bf16 gradient at 512^3
// 5.17 -> 4.98 ms with the mirror, the greedy iteration 17.61 -> 17.36 ms,
// the same bits.
template <int R, int kRun, typename In = float, typename Out = float>
__global__ void __launch_bounds__(AxisPolicy::kInner * AxisPolicy::kRows)
    AxisMarchKernel(const In* in, Out* out, int64_t inner, int64_t n, int64_t outer, Taps taps) {
  constexpr int kStep = AxisPolicy::kRows * kRun;  // outputs per step
  constexpr int kRing = kStep + 2 * R <= 128 ? 128 : 256;
  static_assert(kStep + 2 * R <= kRing, "the next step's rows overwrite only rows it does not read");
  constexpr int kFirst = (kStep + 2 * R + AxisPolicy::kRows - 1) / AxisPolicy::kRows;  // first step's loads
  constexpr int kMirror = 2 * R + kRun;
  __shared__ float ring[(kRing + kMirror) * AxisPolicy::kInner];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t inner_blocks = (inner + AxisPolicy::kInner - 1) / AxisPolicy::kInner;
  const int64_t i = (int64_t(blockIdx.x) % inner_blocks) * AxisPolicy::kInner + tx;
  const int64_t o = int64_t(blockIdx.x) / inner_blocks;
  if (o >= outer) return;
  const bool live = i < inner;
  const In* src = in + inner * n * o + (live ? i : 0);
  Out* dst = out + inner * n * o + i;
  // Logical row L (axis position, -R <= L < n + R, clamped when loaded) sits in ring slot (L + R) % kRing.
  auto slot = [](int64_t row) { return int((row + R) & (kRing - 1)) * AxisPolicy::kInner; };
  auto put = [&](int64_t row, float value) {
    const int q = slot(row);
    ring[q + tx] = value;
    if (q < kMirror * AxisPolicy::kInner) ring[q + kRing * AxisPolicy::kInner + tx] = value;
  };
  {
    float v[kFirst];
#pragma unroll
    for (int m = 0; m < kFirst; ++m) {
      const int s = ty + m * AxisPolicy::kRows;
      v[m] = s < kStep + 2 * R && live ? ToFloat(src[inner * ClampIdx(s - R, n - 1)]) : 0.f;
    }
#pragma unroll
    for (int m = 0; m < kFirst; ++m) {
      const int s = ty + m * AxisPolicy::kRows;
      if (s < kStep + 2 * R) put(s - R, v[m]);
    }
  }
  __syncthreads();
  for (int64_t a0 = 0; a0 < n; a0 += kStep) {
    // The next step's new rows a0 + kStep + R + s, s < kStep (in flight during the sums).
    const bool more = a0 + kStep < n;
    float v[kRun];
#pragma unroll
    for (int m = 0; m < kRun; ++m) {
      const int64_t row = a0 + kStep + R + ty + m * AxisPolicy::kRows;
      v[m] = more && live ? ToFloat(src[inner * ClampIdx(row, n - 1)]) : 0.f;
    }
    const int64_t first = a0 + ty * kRun;  // this thread's first output
    float acc[kRun];
#pragma unroll
    for (int q = 0; q < kRun; ++q) acc[q] = 0.f;
    const float* window = ring + slot(first - R) + tx;  // rows first - R + d at window[d * kInner]
#pragma unroll
    for (int d = 0; d < 2 * R + kRun; ++d) {
      const float x = window[d * AxisPolicy::kInner];
#pragma unroll
      for (int q = 0; q < kRun; ++q) {
        if (d - q >= 0 && d - q <= 2 * R) acc[q] = fmaf(taps.w[d - q], x, acc[q]);
      }
    }
    if (live) {
#pragma unroll
      for (int q = 0; q < kRun; ++q) {
        if (first + q < n) dst[inner * (first + q)] = FromFloat<Out>(acc[q]);
      }
    }
    if (!more) break;
    __syncthreads();  // every thread is done with rows below a0 + kStep - R
#pragma unroll
    for (int m = 0; m < kRun; ++m) {
      const int64_t row = a0 + kStep + R + ty + m * AxisPolicy::kRows;
      put(row, v[m]);
    }
    __syncthreads();
  }
}

// One warp per row (short rows: no block-wide barriers, 8 rows in flight per
// block). in may equal out: each warp reads its whole row before writing it.
__global__ void __launch_bounds__(RowPolicy::kThreads)
    RowWarpKernel(const float* in, float* out, int64_t nx, int64_t rows, Taps taps) {
  extern __shared__ float lines[];
  const int r = taps.radius;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  float* line = lines + warp * (nx + 2 * r);
  for (int64_t row = int64_t(blockIdx.x) * RowPolicy::kWarps + warp; row < rows;
       row += int64_t(gridDim.x) * RowPolicy::kWarps) {
    const float* src = in + row * nx;
    for (int64_t i = lane; i < nx + 2 * r; i += 32) line[i] = src[ClampIdx(i - r, nx - 1)];
    __syncwarp();
    float* dst = out + row * nx;
    for (int64_t i = lane; i < nx; i += 32) {
      float s = 0.f;
      for (int d = 0; d <= 2 * r; ++d) s = fmaf(taps.w[d], line[i + d], s);
      dst[i] = s;
    }
    __syncwarp();
  }
}

// RowWarpKernel with each lane filtering kRowRun consecutive outputs from
// one sweep over the staged row (kRowRun + 2r shared-memory loads instead of
// kRowRun (2r + 1)), taps sliding through registers as in AxisRunKernel (the
// same sums bit for bit for finite inputs). kRowRun is odd, so the 32 lanes'
// reads, kRowRun floats apart, fall in 32 different banks; a warp covers
// 32 kRowRun outputs per segment, staged in shared memory for coalesced stores.
constexpr int kRowRun = 9;
constexpr int kRowSegment = 32 * kRowRun;

__global__ void __launch_bounds__(RowPolicy::kThreads)
    RowWarpRunKernel(const float* in, float* out, int64_t nx, int64_t rows, Taps taps) {
  extern __shared__ float smem[];
  const int r = taps.radius;
  const int ntaps = 2 * r + 1;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int64_t line_len = nx + 2 * r;
  float* w = smem;
  float* line = smem + ntaps + warp * (line_len + kRowSegment);
  float* staged = line + line_len;
  for (int q = threadIdx.x; q < ntaps; q += RowPolicy::kThreads) w[q] = taps.w[q];
  __syncthreads();
  for (int64_t row = int64_t(blockIdx.x) * RowPolicy::kWarps + warp; row < rows;
       row += int64_t(gridDim.x) * RowPolicy::kWarps) {
    const float* src = in + row * nx;
    for (int64_t i = lane; i < line_len; i += 32) line[i] = src[ClampIdx(i - r, nx - 1)];
    __syncwarp();
    float* dst = out + row * nx;
    const int len = static_cast<int>(line_len);  // <= kMaxWarpRow: int positions
    for (int s0 = 0; s0 < nx; s0 += kRowSegment) {
      const int first = s0 + lane * kRowRun;  // this lane's first output
      float acc[kRowRun], wr[kRowRun];
#pragma unroll
      for (int q = 0; q < kRowRun; ++q) acc[q] = wr[q] = 0.f;
      for (int d = 0; d < ntaps + kRowRun - 1; ++d) {
#pragma unroll
        for (int q = kRowRun - 1; q > 0; --q) wr[q] = wr[q - 1];
        wr[0] = d < ntaps ? w[d] : 0.f;
        const int p = first + d;
        const float x = p < len ? line[p] : 0.f;  // past the row: only outputs beyond nx use it
#pragma unroll
        for (int q = 0; q < kRowRun; ++q) acc[q] = fmaf(wr[q], x, acc[q]);
      }
      __syncwarp();  // the previous segment's staged values are stored
#pragma unroll
      for (int q = 0; q < kRowRun; ++q) staged[lane * kRowRun + q] = acc[q];
      __syncwarp();
      for (int t = lane; t < kRowSegment && s0 + t < nx; t += 32) dst[s0 + t] = staged[t];
    }
    __syncwarp();  // every lane is done with this row's line
  }
}

// RowWarpRunKernel with the radius R a template argument (as AxisFixedKernel:
// the same sums, the sweep unrolled, taps as constant operands).
template <int R>
__global__ void __launch_bounds__(RowPolicy::kThreads)
    RowWarpFixedKernel(const float* in, float* out, int64_t nx, int64_t rows, Taps taps) {
  extern __shared__ float smem[];
  constexpr int kTaps = 2 * R + 1;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int64_t line_len = nx + 2 * R;
  float* line = smem + warp * (line_len + kRowSegment);
  float* staged = line + line_len;
  for (int64_t row = int64_t(blockIdx.x) * RowPolicy::kWarps + warp; row < rows;
       row += int64_t(gridDim.x) * RowPolicy::kWarps) {
    const float* src = in + row * nx;
    const int len = static_cast<int>(line_len);  // <= kMaxWarpRow: int positions
    const int last = static_cast<int>(nx - 1);
    for (int base = lane; base < len; base += 8 * 32) {  // 8 loads in flight per lane, then their stores
      float v[8];
#pragma unroll
      for (int m = 0; m < 8; ++m) v[m] = base + 32 * m < len ? src[min(max(base + 32 * m - R, 0), last)] : 0.f;
#pragma unroll
      for (int m = 0; m < 8; ++m) {
        if (base + 32 * m < len) line[base + 32 * m] = v[m];
      }
    }
    __syncwarp();
    float* dst = out + row * nx;
    for (int s0 = 0; s0 < nx; s0 += kRowSegment) {
      const int first = s0 + lane * kRowRun;  // this lane's first output
      float acc[kRowRun];
#pragma unroll
      for (int q = 0; q < kRowRun; ++q) acc[q] = 0.f;
#pragma unroll
      for (int d = 0; d < kTaps + kRowRun - 1; ++d) {
        const int p = first + d;
        const float x = p < len ? line[p] : 0.f;  // past the row: only outputs beyond nx use it
#pragma unroll
        for (int q = 0; q < kRowRun; ++q) {
          if (d - q >= 0 && d - q < kTaps) acc[q] = fmaf(taps.w[d - q], x, acc[q]);
        }
      }
      __syncwarp();  // the previous segment's staged values are stored
#pragma unroll
      for (int q = 0; q < kRowRun; ++q) staged[lane * kRowRun + q] = acc[q];
      __syncwarp();
      for (int t = lane; t < kRowSegment && s0 + t < nx; t += 32) dst[s0 + t] = staged[t];
    }
    __syncwarp();  // every lane is done with this row's line
  }
}

// The radii with fixed-radius kernels: the lean stage's defaults (sigma 0.5:
// radius 2; sigma 6: radius 18).
constexpr bool HasFixedRadius(int r) { return r == 2 || r == 18; }

template <int R>
absl::Status LaunchRowFixed(const float* in, float* out, int64_t nx, int64_t rows, const Taps& taps, cudaStream_t s) {
  const int64_t line = nx + 2 * R;
  const int grid = int(std::min<int64_t>((rows + RowPolicy::kWarps - 1) / RowPolicy::kWarps, int64_t{1} << 30));
  const size_t smem = RowPolicy::kWarps * size_t(line + kRowSegment) * sizeof(float);
  RowWarpFixedKernel<R><<<grid, RowPolicy::kThreads, smem, s>>>(in, out, nx, rows, taps);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("RowWarpFixedKernel");
  return absl::OkStatus();
}

absl::Status LaunchRow(const float* in, float* out, int64_t nx, int64_t rows, const Taps& taps, cudaStream_t s,
                       PassKernels kernels = {}) {
  const bool run_kernel = kernels.run_kernel;
  const int64_t line = nx + 2 * taps.radius;
  if (run_kernel && kernels.fixed_radius && line <= RowPolicy::kMaxWarpRow && HasFixedRadius(taps.radius)) {
    return taps.radius == 2 ? LaunchRowFixed<2>(in, out, nx, rows, taps, s)
                            : LaunchRowFixed<18>(in, out, nx, rows, taps, s);
  }
  if (run_kernel && line <= RowPolicy::kMaxWarpRow) {
    const int grid = int(std::min<int64_t>((rows + RowPolicy::kWarps - 1) / RowPolicy::kWarps, int64_t{1} << 30));
    const size_t smem = (size_t(2 * taps.radius + 1) + RowPolicy::kWarps * size_t(line + kRowSegment)) * sizeof(float);
    RowWarpRunKernel<<<grid, RowPolicy::kThreads, smem, s>>>(in, out, nx, rows, taps);
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("RowWarpRunKernel");
    return absl::OkStatus();
  }
  if (line <= RowPolicy::kMaxWarpRow) {
    const int grid = int(std::min<int64_t>((rows + RowPolicy::kWarps - 1) / RowPolicy::kWarps, int64_t{1} << 30));
    RowWarpKernel<<<grid, RowPolicy::kThreads, RowPolicy::kWarps * line * sizeof(float), s>>>(in, out, nx, rows,
                                                                                             taps);
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("RowWarpKernel");
    return absl::OkStatus();
  }
  const int grid = int(std::min<int64_t>(rows, int64_t{1} << 30));
  RowKernel<<<grid, RowPolicy::kThreads, line * sizeof(float), s>>>(in, out, nx, rows, taps);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("RowKernel");
  return absl::OkStatus();
}

template <int R, typename In, typename Out>
absl::Status LaunchAxisFixed(const In* in, Out* out, int64_t inner, int64_t n, int64_t outer, const Taps& taps,
                             cudaStream_t s) {
  const int64_t blocks = ((n + AxisPolicy::kTile - 1) / AxisPolicy::kTile) *
                         ((inner + AxisPolicy::kInner - 1) / AxisPolicy::kInner) * outer;
  AxisFixedKernel<R, In, Out><<<unsigned(blocks), dim3(AxisPolicy::kInner, AxisPolicy::kRows), 0, s>>>(
      in, out, inner, n, outer, taps);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("AxisFixedKernel");
  return absl::OkStatus();
}

template <int R, int kRun, typename In, typename Out>
absl::Status LaunchAxisMarch(const In* in, Out* out, int64_t inner, int64_t n, int64_t outer, const Taps& taps,
                             cudaStream_t s) {
  const int64_t blocks = ((inner + AxisPolicy::kInner - 1) / AxisPolicy::kInner) * outer;
  const dim3 block(AxisPolicy::kInner, AxisPolicy::kRows);
  AxisMarchKernel<R, kRun, In, Out><<<unsigned(blocks), block, 0, s>>>(in, out, inner, n, outer, taps);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("AxisMarchKernel");
  return absl::OkStatus();
}

// SmoothCuda's x then y passes in one kernel (fixed_radius at radius 2;
// float in, float out; in may be out's source volume but not out): one block
// per 128 x 32 output tile of a slice, the tile with its clamped halo in
// shared memory, the x pass over every staged row into a second tile, then
// the y pass; 8 bytes per voxel less than the x pass in place and the y pass
// to the scratch. Same sums bit for bit (RowWarpFixedKernel's, then
// AxisFixedKernel's). (The bf16 gradient's y, x fusion was slower than its
// separate passes at radius 18 on an H100, 7.16 vs 6.43 ms: removed.)
constexpr int kXyTileX = 128, kXyTileY = 32, kXyRun = 8, kXyThreads = 256;

template <int R>
constexpr size_t XFirstSmemBytes() {
  return (size_t(kXyTileY + 2 * R) * ((kXyTileX + 2 * R) | 1) + size_t(kXyTileY + 2 * R) * (kXyTileX + 1)) *
         sizeof(float);
}

template <int R>
__global__ void __launch_bounds__(kXyThreads)
    XFirstFixedKernel(const float* __restrict__ in, float* __restrict__ out, int64_t nx, int64_t ny, int64_t nz,
                      Taps tx_taps, Taps ty_taps) {
  constexpr int kCols = kXyTileX + 2 * R;    // staged columns
  constexpr int kStride = kCols | 1;         // odd: the x pass's lanes (a row each) hit 32 banks
  constexpr int kRowsIn = kXyTileY + 2 * R;  // staged rows
  constexpr int kRuns = kXyTileX / kXyRun;   // x runs per row
  constexpr int kXpStride = kXyTileX + 1;    // odd: the x pass's stores (a lane per row) hit 32 banks
  extern __shared__ float smem[];
  float* tile = smem;                    // kRowsIn x kStride
  float* xp = smem + kRowsIn * kStride;  // kRowsIn x kXpStride
  const int tid = threadIdx.x;
  const int64_t i0 = int64_t(blockIdx.x) * kXyTileX, j0 = int64_t(blockIdx.y) * kXyTileY;
  for (int64_t k = blockIdx.z; k < nz; k += gridDim.z) {
    const float* src = in + k * nx * ny;
    // 32-bit positions inside a slice (the launch checks nx * ny < 2^31).
    const int x0 = int(i0) - R, y0 = int(j0) - R, xl = int(nx) - 1, yl = int(ny) - 1, w = int(nx);
    for (int q0 = tid; q0 < kRowsIn * kCols; q0 += 8 * kXyThreads) {  // 8 loads in flight per thread
      float v[8];
#pragma unroll
      for (int m = 0; m < 8; ++m) {
        const int q = q0 + m * kXyThreads, row = q / kCols, col = q - row * kCols;
        v[m] = q < kRowsIn * kCols ? src[min(max(y0 + row, 0), yl) * w + min(max(x0 + col, 0), xl)] : 0.f;
      }
#pragma unroll
      for (int m = 0; m < 8; ++m) {
        const int q = q0 + m * kXyThreads, row = q / kCols, col = q - row * kCols;
        if (q < kRowsIn * kCols) tile[row * kStride + col] = v[m];
      }
    }
    __syncthreads();
    // x pass: item = run * kRowsIn + row (lanes along rows).
    for (int item = tid; item < kRuns * kRowsIn; item += kXyThreads) {
      const int run = item / kRowsIn, row = item - run * kRowsIn;
      float acc[kXyRun];
#pragma unroll
      for (int q = 0; q < kXyRun; ++q) acc[q] = 0.f;
      const float* line = tile + row * kStride + run * kXyRun;
#pragma unroll
      for (int d = 0; d < 2 * R + kXyRun; ++d) {
        const float x = line[d];
#pragma unroll
        for (int q = 0; q < kXyRun; ++q) {
          if (d - q >= 0 && d - q <= 2 * R) acc[q] = fmaf(tx_taps.w[d - q], x, acc[q]);
        }
      }
#pragma unroll
      for (int q = 0; q < kXyRun; ++q) xp[row * kXpStride + run * kXyRun + q] = acc[q];
    }
    __syncthreads();
    // y pass: item = run * kXyTileX + column (lanes along x: coalesced stores).
    for (int item = tid; item < (kXyTileY / kXyRun) * kXyTileX; item += kXyThreads) {
      const int run = item / kXyTileX, col = item - run * kXyTileX;
      float acc[kXyRun];
#pragma unroll
      for (int q = 0; q < kXyRun; ++q) acc[q] = 0.f;
      const float* column = xp + run * kXyRun * kXpStride + col;
#pragma unroll
      for (int d = 0; d < 2 * R + kXyRun; ++d) {
        const float x = column[d * kXpStride];
#pragma unroll
        for (int q = 0; q < kXyRun; ++q) {
          if (d - q >= 0 && d - q <= 2 * R) acc[q] = fmaf(ty_taps.w[d - q], x, acc[q]);
        }
      }
      const int64_t i = i0 + col;
      if (i < nx) {
#pragma unroll
        for (int q = 0; q < kXyRun; ++q) {
          const int64_t j = j0 + run * kXyRun + q;
          if (j < ny) out[k * nx * ny + j * nx + i] = acc[q];
        }
      }
    }
    __syncthreads();  // the tiles are refilled for the next slice
  }
}

template <int R>
absl::Status LaunchXFirstFixed(const float* in, float* out, const Grid& g, const Taps& tx, const Taps& ty,
                               cudaStream_t s) {
  constexpr size_t smem = XFirstSmemBytes<R>();
  if (smem > 48 * 1024) {
    TESSERA_CUDA_RETURN_IF_ERROR(
        cudaFuncSetAttribute(XFirstFixedKernel<R>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  }
  const dim3 grid(unsigned((g.nx + kXyTileX - 1) / kXyTileX), unsigned((g.ny + kXyTileY - 1) / kXyTileY),
                  unsigned(std::min<int64_t>(g.nz, AxisPolicy::kMaxGridZ)));
  XFirstFixedKernel<R><<<grid, kXyThreads, smem, s>>>(in, out, g.nx, g.ny, g.nz, tx, ty);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("XFirstFixedKernel");
  return absl::OkStatus();
}

// run_kernel: AxisRunKernel (same results, fewer shared-memory loads) instead
// of AxisKernel; with fixed_radius, at radius 2 AxisFixedKernel and at radius
// 18 AxisMarchKernel, 16 outputs per thread and step from float inputs, 8
// from bf16 (where the linear grid fits). At radius 18 on an H100 (512^3 x 3,
// 2026-12-07) the march took the bf16 gradient's smoothing from 6.49 to 5.32
// ms (8 per step; 16: 5.42) and a float field's from 5.37 to 4.82 ms (16; 8:
// 4.97); at radius 2 it was 0.1 ms slower than AxisFixedKernel.
template <typename In, typename Out>
absl::Status LaunchAxis(const In* in, Out* out, int64_t inner, int64_t n, int64_t outer, const Taps& taps,
                        cudaStream_t s, PassKernels kernels = {}) {
  const bool run_kernel = kernels.run_kernel;
  if (run_kernel && kernels.fixed_radius && taps.radius == 18 &&
      ((inner + AxisPolicy::kInner - 1) / AxisPolicy::kInner) * outer < (int64_t{1} << 31)) {
    constexpr int kRun = sizeof(In) == sizeof(float) ? 16 : 8;
    return LaunchAxisMarch<18, kRun>(in, out, inner, n, outer, taps, s);
  }
  if (run_kernel && kernels.fixed_radius && taps.radius == 2 &&
      ((n + AxisPolicy::kTile - 1) / AxisPolicy::kTile) * ((inner + AxisPolicy::kInner - 1) / AxisPolicy::kInner) *
              outer < (int64_t{1} << 31)) {
    return LaunchAxisFixed<2>(in, out, inner, n, outer, taps, s);
  }
  const dim3 block(AxisPolicy::kInner, AxisPolicy::kRows);
  const dim3 grid(unsigned((inner + AxisPolicy::kInner - 1) / AxisPolicy::kInner),
                  unsigned((n + AxisPolicy::kTile - 1) / AxisPolicy::kTile),
                  unsigned(std::min<int64_t>(outer, AxisPolicy::kMaxGridZ)));
  const size_t smem = size_t(AxisPolicy::kTile + 2 * taps.radius) * AxisPolicy::kInner * sizeof(float);
  if (run_kernel) {
    AxisRunKernel<In, Out><<<grid, block, smem + size_t(2 * taps.radius + 1) * sizeof(float), s>>>(in, out, inner, n,
                                                                                                    outer, taps);
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("AxisRunKernel");
    return absl::OkStatus();
  }
  AxisKernel<In, Out><<<grid, block, smem, s>>>(in, out, inner, n, outer, taps);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("AxisKernel");
  return absl::OkStatus();
}

// Trilinear resampling with aligned corners; one thread per output voxel,
// all components.
__global__ void ResampleKernel(const float* __restrict__ in, int64_t inx, int64_t iny, int64_t inz,
                               float* __restrict__ out, int64_t onx, int64_t ony, int64_t onz, int64_t comps,
                               float sx, float sy, float sz) {
  const int64_t nvox = onx * ony * onz;
  const int64_t ivox = inx * iny * inz;
  for (int64_t v = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; v < nvox; v += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = v % onx, j = (v / onx) % ony, k = v / (onx * ony);
    auto coord = [](int64_t q, int64_t n_in, int64_t n_out) {
      return n_out <= 1 ? 0.5 * double(n_in - 1) : double(q) * double(n_in - 1) / double(n_out - 1);
    };
    const double x = coord(i, inx, onx), y = coord(j, iny, ony), z = coord(k, inz, onz);
    const int64_t i0 = min(int64_t(floor(x)), inx - 1), i1 = min(i0 + 1, inx - 1);
    const int64_t j0 = min(int64_t(floor(y)), iny - 1), j1 = min(j0 + 1, iny - 1);
    const int64_t k0 = min(int64_t(floor(z)), inz - 1), k1 = min(k0 + 1, inz - 1);
    const float fx = float(x - i0), fy = float(y - j0), fz = float(z - k0);
    for (int64_t c = 0; c < comps; ++c) {
      const float* p = in + c * ivox;
      auto at = [&](int64_t a, int64_t b, int64_t d) { return __ldg(p + a + inx * (b + iny * d)); };
      const float c00 = at(i0, j0, k0) + fx * (at(i1, j0, k0) - at(i0, j0, k0));
      const float c10 = at(i0, j1, k0) + fx * (at(i1, j1, k0) - at(i0, j1, k0));
      const float c01 = at(i0, j0, k1) + fx * (at(i1, j0, k1) - at(i0, j0, k1));
      const float c11 = at(i0, j1, k1) + fx * (at(i1, j1, k1) - at(i0, j1, k1));
      const float c0 = c00 + fy * (c10 - c00);
      const float c1 = c01 + fy * (c11 - c01);
      const float s = c == 0 ? sx : (c == 1 ? sy : (c == 2 ? sz : 1.f));
      out[v + c * nvox] = s * (c0 + fz * (c1 - c0));
    }
  }
}

}  // namespace

absl::Status SmoothCuda(const float* in, float* out, const Grid& g, const std::vector<float> taps[3],
                        float* scratch, const Stream& stream, PassKernels kernels) {
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  const Taps tx = MakeTaps(taps[0]), ty = MakeTaps(taps[1]), tz = MakeTaps(taps[2]);
  const bool fx = taps[0].size() > 1, fy = taps[1].size() > 1, fz = taps[2].size() > 1;
  const int64_t V = g.voxels();
  // fixed_radius at radius 2 on x and y: x and y by XFirstFixedKernel (src ->
  // scratch), then z (u at sigma 0.5 on an H100, 512^3 x 3: 2.69 ms against
  // 3.46 for the three passes; at radius 18 the fused tiles were slower, 6.36
  // against 5.37 ms).
  const bool xy = kernels.run_kernel && kernels.fixed_radius && fx && fy && fz && tx.radius == 2 && ty.radius == 2 &&
                  (g.ny + kXyTileY - 1) / kXyTileY <= 65535 && g.nx * g.ny < (int64_t{1} << 31);
  for (int64_t c = 0; c < g.comps; ++c) {
    const float* src = in + c * V;
    float* dst = out + c * V;
    if (xy) {
      TESSERA_RETURN_IF_ERROR(LaunchXFirstFixed<2>(src, scratch, g, tx, ty, s));
      TESSERA_RETURN_IF_ERROR(LaunchAxis(scratch, dst, g.nx * g.ny, g.nz, 1, tz, s, kernels));
      continue;
    }
    // x: src -> dst (in place safe).
    if (fx && g.nx <= RowPolicy::kMaxRow) {
      TESSERA_RETURN_IF_ERROR(LaunchRow(src, dst, g.nx, g.ny * g.nz, tx, s, kernels));
    } else if (fx) {  // very long rows: through the scratch volume
      TESSERA_RETURN_IF_ERROR(LaunchAxis(src, scratch, 1, g.nx, g.ny * g.nz, tx, s, kernels));
      TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, scratch, V * sizeof(float), cudaMemcpyDeviceToDevice, s));
    } else if (src != dst) {
      TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, V * sizeof(float), cudaMemcpyDeviceToDevice, s));
    }
    // y: dst -> scratch; z: scratch -> dst (or a copy back when one is skipped).
    if (fy && fz) {
      TESSERA_RETURN_IF_ERROR(LaunchAxis(dst, scratch, g.nx, g.ny, g.nz, ty, s, kernels));
      TESSERA_RETURN_IF_ERROR(LaunchAxis(scratch, dst, g.nx * g.ny, g.nz, 1, tz, s, kernels));
    } else if (fy || fz) {
      const bool y = fy;
      TESSERA_RETURN_IF_ERROR(y ? LaunchAxis(dst, scratch, g.nx, g.ny, g.nz, ty, s, kernels)
                                : LaunchAxis(dst, scratch, g.nx * g.ny, g.nz, 1, tz, s, kernels));
      TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, scratch, V * sizeof(float), cudaMemcpyDeviceToDevice, s));
    }
  }
  return absl::OkStatus();
}

// Per component: y (or a plain conversion) bf16 field -> float scratch, x in
// place on the scratch, z (or a conversion) scratch -> field: one rounding.
absl::Status SmoothBf16InPlaceCuda(BFloat16* field, const Grid& g, const std::vector<float> taps[3], float* scratch,
                                   const Stream& stream, PassKernels kernels) {
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  const Taps tx = MakeTaps(taps[0]), ty = MakeTaps(taps[1]), tz = MakeTaps(taps[2]);
  const bool fx = taps[0].size() > 1, fy = taps[1].size() > 1, fz = taps[2].size() > 1;
  const Taps one = MakeTaps(std::vector<float>{1.f});  // a conversion pass
  const int64_t V = g.voxels();
  for (int64_t c = 0; c < g.comps; ++c) {
    BFloat16* comp = field + c * V;
    TESSERA_RETURN_IF_ERROR(LaunchAxis(comp, scratch, g.nx, g.ny, g.nz, fy ? ty : one, s, kernels));
    if (fx) TESSERA_RETURN_IF_ERROR(LaunchRow(scratch, scratch, g.nx, g.ny * g.nz, tx, s, kernels));
    TESSERA_RETURN_IF_ERROR(LaunchAxis(scratch, comp, g.nx * g.ny, g.nz, 1, fz ? tz : one, s, kernels));
  }
  return absl::OkStatus();
}

absl::Status ResampleCuda(const float* in, const Grid& gi, float* out, const Grid& go, const float scale[3],
                          const Stream& stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((go.voxels() + threads - 1) / threads, int64_t{1} << 20);
  ResampleKernel<<<unsigned(std::max<int64_t>(1, blocks)), threads, 0, s>>>(
      in, gi.nx, gi.ny, gi.nz, out, go.nx, go.ny, go.nz, go.comps, scale[0], scale[1], scale[2]);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("ResampleKernel");
  return absl::OkStatus();
}

}  // namespace gs_internal
}  // namespace registration
}  // namespace tessera
