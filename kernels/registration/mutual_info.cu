// CUDA Mattes mutual information: fused histogram forward and on-the-fly
// Parzen gradient. See mutual_info.h for the math, the launch sequence and the
// exact device memory used (MattesMiScratchBytes).
#include <cub/block/block_reduce.cuh>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/registration/mutual_info.h"
#include "kernels/registration/mutual_info_cuda_steps.h"
#include "kernels/registration/mutual_info_parzen.h"

namespace tessera {
namespace registration {
namespace {

using mi_internal::BinCoord;
using mi_internal::BoxBin;
using mi_internal::CubicWeights;
using mi_internal::CubicWeightsAndDerivatives;

// ---------------------------------------------------------------------------
// Policy (SM 90 / H200 first).
// ---------------------------------------------------------------------------
struct MiPolicySm90 {
  static constexpr int kThreads = 256;               // histogram / gradient block
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kBlocksPerSm = 4;             // grid = min(this * SMs, work)
  static constexpr int kVoxelsPerThread = 4;         // one float4 per thread per step
  static constexpr int kFinalizeThreads = 1024;      // the single finalize block
  static constexpr size_t kHistSmemBytes = 48 * 1024;  // budget for the per-warp histogram copies
};
using Policy = MiPolicySm90;
static_assert(Policy::kThreads % 32 == 0, "block must be whole warps");
static_assert(Policy::kVoxelsPerThread == 4, "loads are float4 / uchar4");
static_assert(Policy::kFinalizeThreads >= 2 * kMattesMiMaxBins, "finalize computes both marginals at once");
static_assert(size_t{kMattesMiMaxBins} * kMattesMiMaxBins * sizeof(unsigned long long) <= Policy::kHistSmemBytes,
              "one histogram copy must fit the shared-memory budget");

constexpr unsigned kFullMask = 0xffffffffu;

struct MiParams {
  float f_lo, f_inv;  // fixed: x = (v - f_lo) * f_inv
  float w_lo, w_inv;  // warped
  float span;         // B - 4
  int bins;           // B
  int copies;         // histogram copies per block (warp w uses copy w % copies)
};

using Count = unsigned long long;  // a histogram bin, in units of 2^-mi_cuda::kHistogramBits
using Part = unsigned int;         // a voxel's, a lane's or a warp's part of one bin (< 2^31)
static_assert(mi_cuda::kHistogramBits + 2 + 5 <= 31,
              "4 voxels per lane and 32 lanes of products <= 1 must sum below 2^31");

struct DeviceResult {
  double mi;
  double total;
};

constexpr size_t AlignUp(size_t x) { return (x + 255) / 256 * 256; }

struct ScratchLayout {
  size_t histogram = 0;  // B^2 Counts (the fixed-point joint histogram)
  size_t table = 0;      // B^2 floats
  size_t result = 0;     // DeviceResult
  size_t total = 0;
  explicit ScratchLayout(int bins) {
    const size_t bb = size_t(bins) * bins;
    histogram = 0;
    table = AlignUp(bb * sizeof(Count));
    result = table + AlignUp(bb * sizeof(float));
    total = result + AlignUp(sizeof(DeviceResult));
  }
};

absl::StatusOr<int> MaxBlocks(int ordinal) {
  int sms = 0;
  TESSERA_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ordinal));
  return std::max(1, sms) * Policy::kBlocksPerSm;
}

// ---------------------------------------------------------------------------
// Per-thread loads of 4 consecutive voxels (vectorised when aligned and whole).
// ---------------------------------------------------------------------------
__device__ __forceinline__ void LoadFour(const float* __restrict__ p, int64_t base, int64_t n, bool vec,
                                         float out[4]) {
  if (vec && base + 4 <= n) {
    const float4 v = __ldg(reinterpret_cast<const float4*>(p + base));
    out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) out[i] = base + i < n ? __ldg(p + base + i) : 0.f;
  }
}

__device__ __forceinline__ void LoadFourMask(const uint8_t* __restrict__ p, int64_t base, int64_t n, bool vec,
                                             uint8_t out[4]) {
  if (vec && base + 4 <= n) {
    const uchar4 v = __ldg(reinterpret_cast<const uchar4*>(p + base));
    out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) out[i] = base + i < n ? __ldg(p + base + i) : uint8_t{0};
  }
}

// Fixed-image window: kTaps = 4 (cubic) or 1 (box).
template <int kTaps>
__device__ __forceinline__ int FixedWindow(float v, const MiParams& p, float w[kTaps]) {
  bool inside;
  const float t = BinCoord(v, p.f_lo, p.f_inv, p.span, &inside);
  if constexpr (kTaps == 1) {
    w[0] = 1.f;
    return BoxBin(t);
  } else {
    return CubicWeights(t, w);
  }
}

// ---------------------------------------------------------------------------
// Histogram agent: shared-memory accumulation.
// ---------------------------------------------------------------------------
// A voxel's product of Parzen weights (<= 1) rounded to an integer number of
// 2^-kHistogramBits: integer sums are exact in any order, so the histogram
// does not depend on how voxels are split over threads, blocks or shards
// (issue 39). 32-bit parts keep the per-lane runs and the warp shuffles as
// cheap as float ones; only the shared bins are 64-bit.
__device__ __forceinline__ Part FixedPoint(float wf, float ww) {
  return __float2uint_rn(fmaxf(0.f, wf * ww) * float(1u << mi_cuda::kHistogramBits));
}

template <int kTaps>
__device__ __forceinline__ void FlushDirect(Count* hist, int B, int key, const Part (&acc)[kTaps][4]) {
#pragma unroll
  for (int a = 0; a < kTaps; ++a) {
#pragma unroll
    for (int b = 0; b < 4; ++b) atomicAdd(hist + key + a * B + b, Count{acc[a][b]});
  }
}

// Called by all 32 lanes. A lane with key < 0 holds nothing (acc all zero).
// When every holding lane has the same window, the warp sums by shuffles and
// kTaps * 4 lanes do one atomic each; otherwise every lane adds its own.
template <int kTaps>
__device__ __forceinline__ void WarpFlush(Count* hist, int B, int key, Part (&acc)[kTaps][4], int lane) {
  const int kmax = __reduce_max_sync(kFullMask, key);
  if (kmax < 0) return;
  if (__all_sync(kFullMask, key < 0 || key == kmax)) {
#pragma unroll
    for (int a = 0; a < kTaps; ++a) {
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        Part v = acc[a][b];
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(kFullMask, v, off);
        if (lane == a * 4 + b) atomicAdd(hist + kmax + a * B + b, Count{v});
      }
    }
  } else if (key >= 0) {
    FlushDirect<kTaps>(hist, B, key, acc);
  }
}

// Adds the n voxels' fixed-point joint histogram into `histogram` (B^2
// Counts in global memory): per-warp shared copies, then one integer atomic
// per bin and block.
template <int kTaps, bool kMasked>
__global__ void __launch_bounds__(Policy::kThreads)
    HistogramKernel(const float* __restrict__ F, const float* __restrict__ W, const uint8_t* __restrict__ M,
                    int64_t n, MiParams p, bool vec, Count* __restrict__ histogram) {
  extern __shared__ Count smem[];
  const int B = p.bins;
  const int BB = B * B;
  for (int e = threadIdx.x; e < p.copies * BB; e += Policy::kThreads) smem[e] = 0;
  __syncthreads();
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  Count* hist = smem + (warp % p.copies) * BB;
  const int64_t chunks = (n + 3) / 4;
  const int64_t stride = int64_t(gridDim.x) * Policy::kThreads;
  // The loop bound is uniform across the warp (c0 is the warp's first chunk),
  // so WarpFlush always sees all 32 lanes.
  for (int64_t c0 = int64_t(blockIdx.x) * Policy::kThreads + warp * 32; c0 < chunks; c0 += stride) {
    const int64_t c = c0 + lane;
    int key = -1;
    Part acc[kTaps][4];
#pragma unroll
    for (int a = 0; a < kTaps; ++a) {
#pragma unroll
      for (int b = 0; b < 4; ++b) acc[a][b] = 0;
    }
    if (c < chunks) {
      const int64_t base = c * 4;
      float fv[4], wv[4];
      uint8_t mv[4] = {1, 1, 1, 1};
      LoadFour(F, base, n, vec, fv);
      LoadFour(W, base, n, vec, wv);
      if constexpr (kMasked) LoadFourMask(M, base, n, vec, mv);
#pragma unroll
      for (int v = 0; v < 4; ++v) {
        if (base + v >= n || mv[v] == 0) continue;
        float wf[kTaps], ww[4];
        const int a0 = FixedWindow<kTaps>(fv[v], p, wf);
        bool inside;
        const int b0 = CubicWeights(BinCoord(wv[v], p.w_lo, p.w_inv, p.span, &inside), ww);
        const int k = a0 * B + b0;
        if (k != key) {
          if (key >= 0) FlushDirect<kTaps>(hist, B, key, acc);
          key = k;
#pragma unroll
          for (int a = 0; a < kTaps; ++a) {
#pragma unroll
            for (int b = 0; b < 4; ++b) acc[a][b] = 0;
          }
        }
#pragma unroll
        for (int a = 0; a < kTaps; ++a) {
#pragma unroll
          for (int b = 0; b < 4; ++b) acc[a][b] += FixedPoint(wf[a], ww[b]);
        }
      }
    }
    WarpFlush<kTaps>(hist, B, key, acc, lane);
  }
  __syncthreads();
  for (int e = threadIdx.x; e < BB; e += Policy::kThreads) {
    Count s = 0;
    for (int r = 0; r < p.copies; ++r) s += smem[r * BB + e];
    if (s != 0) atomicAdd(histogram + e, s);
  }
}

// ---------------------------------------------------------------------------
// Finalize: one block. Fixed-point histogram -> P (double) -> MI and table T.
// ---------------------------------------------------------------------------
__global__ void __launch_bounds__(Policy::kFinalizeThreads)
    FinalizeKernel(const Count* __restrict__ histogram, MiParams p, float* __restrict__ table,
                   DeviceResult* __restrict__ result) {
  extern __shared__ double dsmem[];
  const int B = p.bins;
  const int BB = B * B;
  double* joint = dsmem;
  double* pf = joint + BB;
  double* pw = pf + B;
  // The integers rounded once to double.
  for (int e = threadIdx.x; e < BB; e += Policy::kFinalizeThreads) joint[e] = ldexp(double(histogram[e]), -mi_cuda::kHistogramBits);
  __syncthreads();
  const int tid = threadIdx.x;
  if (tid < B) {
    double s = 0;
    for (int b = 0; b < B; ++b) s += joint[tid * B + b];
    pf[tid] = s;
  } else if (tid < 2 * B) {
    const int b = tid - B;
    double s = 0;
    for (int a = 0; a < B; ++a) s += joint[a * B + b];
    pw[b] = s;
  }
  __syncthreads();
  double total = 0;
  for (int a = 0; a < B; ++a) total += pf[a];
  const double dtdw = double(p.span) * double(p.w_inv);
  double mi = 0;
  for (int e = tid; e < BB; e += Policy::kFinalizeThreads) {
    const int a = e / B;
    const int b = e - a * B;
    const double h = joint[e];
    float t = 0.f;
    if (total > 0 && h > 0) {
      const double g = log(h * total / (pf[a] * pw[b]));
      mi += (h / total) * g;
      t = float(-g * dtdw / total);
    }
    table[e] = t;
  }
  using BlockReduce = cub::BlockReduce<double, Policy::kFinalizeThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  const double sum = BlockReduce(temp).Sum(mi);
  if (tid == 0) {
    result->mi = sum;
    result->total = total;
  }
}

// ---------------------------------------------------------------------------
// Gradient: recompute windows per voxel, contract with T in shared memory.
// ---------------------------------------------------------------------------
template <int kTaps, bool kMasked>
__global__ void __launch_bounds__(Policy::kThreads)
    GradientKernel(const float* __restrict__ F, const float* __restrict__ W, const uint8_t* __restrict__ M,
                   int64_t n, MiParams p, bool vec, const float* __restrict__ table, float* __restrict__ grad) {
  extern __shared__ float T[];
  const int B = p.bins;
  for (int e = threadIdx.x; e < B * B; e += Policy::kThreads) T[e] = table[e];
  __syncthreads();
  const int64_t chunks = (n + 3) / 4;
  const int64_t stride = int64_t(gridDim.x) * Policy::kThreads;
  for (int64_t c = int64_t(blockIdx.x) * Policy::kThreads + threadIdx.x; c < chunks; c += stride) {
    const int64_t base = c * 4;
    float fv[4], wv[4], g[4];
    uint8_t mv[4] = {1, 1, 1, 1};
    LoadFour(F, base, n, vec, fv);
    LoadFour(W, base, n, vec, wv);
    if constexpr (kMasked) LoadFourMask(M, base, n, vec, mv);
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      g[v] = 0.f;
      bool inside;
      const float t = BinCoord(wv[v], p.w_lo, p.w_inv, p.span, &inside);
      if (!inside || mv[v] == 0) continue;
      float wf[kTaps], ww[4], dw[4];
      const int a0 = FixedWindow<kTaps>(fv[v], p, wf);
      const int b0 = CubicWeightsAndDerivatives(t, ww, dw);
      float s = 0.f;
#pragma unroll
      for (int a = 0; a < kTaps; ++a) {
        const float* row = T + (a0 + a) * B + b0;
        float r = 0.f;
#pragma unroll
        for (int b = 0; b < 4; ++b) r = fmaf(row[b], dw[b], r);
        s = fmaf(wf[a], r, s);
      }
      g[v] = s;
    }
    if (vec && base + 4 <= n) {
      *reinterpret_cast<float4*>(grad + base) = make_float4(g[0], g[1], g[2], g[3]);
    } else {
      for (int v = 0; v < 4; ++v) {
        if (base + v < n) grad[base + v] = g[v];
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Dispatch.
// ---------------------------------------------------------------------------
bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

MiParams ParamsOf(const MattesMiOptions& options) {
  MiParams p;
  p.f_lo = options.fixed_min;
  p.f_inv = float(1.0 / (double(options.fixed_max) - options.fixed_min));
  p.w_lo = options.warped_min;
  p.w_inv = float(1.0 / (double(options.warped_max) - options.warped_min));
  p.span = float(options.bins - 4);
  p.bins = options.bins;
  const size_t copy_bytes = size_t(options.bins) * options.bins * sizeof(Count);
  p.copies = int(std::max<size_t>(1, std::min<size_t>(Policy::kWarps, Policy::kHistSmemBytes / copy_bytes)));
  return p;
}

// The voxel loop's launch: grid, and whether loads may be vectorised.
struct VoxelLaunch {
  int blocks = 1;
  bool vec = false;
};

absl::StatusOr<VoxelLaunch> VoxelLaunchOf(const Stream& stream, const float* F, const float* W, const uint8_t* M,
                                          const float* G, int64_t n) {
  TESSERA_ASSIGN_OR_RETURN(int max_blocks, MaxBlocks(stream.ordinal()));
  VoxelLaunch l;
  l.vec = Aligned16(F) && Aligned16(W) && (G == nullptr || Aligned16(G)) &&
          (M == nullptr || reinterpret_cast<uintptr_t>(M) % 4 == 0);
  const int64_t chunks = (n + 3) / 4;
  l.blocks = int(std::max<int64_t>(1, std::min<int64_t>(max_blocks, (chunks + Policy::kThreads - 1) / Policy::kThreads)));
  return l;
}

}  // namespace

namespace mi_cuda {

absl::Status AddJointHistogram(const Stream& stream, const float* F, const float* W, const uint8_t* M, int64_t n,
                               const MattesMiOptions& options, uint64_t* histogram) {
  if (n == 0) return absl::OkStatus();
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  TESSERA_ASSIGN_OR_RETURN(VoxelLaunch l, VoxelLaunchOf(stream, F, W, M, nullptr, n));
  const MiParams p = ParamsOf(options);
  const size_t smem = p.copies * size_t(p.bins) * p.bins * sizeof(Count);
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  Count* h = reinterpret_cast<Count*>(histogram);
  const bool box = options.fixed_kernel == ParzenKernel::kBox;
  if (box && M != nullptr) {
    HistogramKernel<1, true><<<l.blocks, Policy::kThreads, smem, s>>>(F, W, M, n, p, l.vec, h);
  } else if (box) {
    HistogramKernel<1, false><<<l.blocks, Policy::kThreads, smem, s>>>(F, W, M, n, p, l.vec, h);
  } else if (M != nullptr) {
    HistogramKernel<4, true><<<l.blocks, Policy::kThreads, smem, s>>>(F, W, M, n, p, l.vec, h);
  } else {
    HistogramKernel<4, false><<<l.blocks, Policy::kThreads, smem, s>>>(F, W, M, n, p, l.vec, h);
  }
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("HistogramKernel");
  return absl::OkStatus();
}

absl::Status Finalize(const Stream& stream, const uint64_t* histogram, const MattesMiOptions& options, float* table,
                      double* result) {
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  const MiParams p = ParamsOf(options);
  const size_t bb = size_t(p.bins) * p.bins;
  static_assert(sizeof(DeviceResult) == 2 * sizeof(double), "result is {mi, total}");
  FinalizeKernel<<<1, Policy::kFinalizeThreads, (bb + 2 * p.bins) * sizeof(double),
                   static_cast<cudaStream_t>(stream.native())>>>(reinterpret_cast<const Count*>(histogram), p, table,
                                                                 reinterpret_cast<DeviceResult*>(result));
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("FinalizeKernel");
  return absl::OkStatus();
}

absl::Status Gradient(const Stream& stream, const float* F, const float* W, const uint8_t* M, int64_t n,
                      const MattesMiOptions& options, const float* table, float* grad) {
  if (n == 0) return absl::OkStatus();
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  TESSERA_ASSIGN_OR_RETURN(VoxelLaunch l, VoxelLaunchOf(stream, F, W, M, grad, n));
  const MiParams p = ParamsOf(options);
  const size_t smem = size_t(p.bins) * p.bins * sizeof(float);
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  const bool box = options.fixed_kernel == ParzenKernel::kBox;
  if (box && M != nullptr) {
    GradientKernel<1, true><<<l.blocks, Policy::kThreads, smem, s>>>(F, W, M, n, p, l.vec, table, grad);
  } else if (box) {
    GradientKernel<1, false><<<l.blocks, Policy::kThreads, smem, s>>>(F, W, M, n, p, l.vec, table, grad);
  } else if (M != nullptr) {
    GradientKernel<4, true><<<l.blocks, Policy::kThreads, smem, s>>>(F, W, M, n, p, l.vec, table, grad);
  } else {
    GradientKernel<4, false><<<l.blocks, Policy::kThreads, smem, s>>>(F, W, M, n, p, l.vec, table, grad);
  }
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("GradientKernel");
  return absl::OkStatus();
}

absl::StatusOr<MattesMiResult> ReadResult(const Stream& stream, const double* result) {
  DeviceResult host;
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(&host, result, sizeof(host), cudaMemcpyDeviceToHost, s));
  TESSERA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
  MattesMiResult out;
  out.mutual_information = host.mi;
  out.loss = -host.mi;
  out.total_weight = host.total;
  return out;
}

}  // namespace mi_cuda

absl::StatusOr<size_t> MattesMiScratchBytesCuda(int bins, int /*ordinal*/) { return ScratchLayout(bins).total; }

absl::StatusOr<MattesMiResult> MattesMutualInformationCuda(const NDArray& fixed, const NDArray& warped,
                                                           const NDArray* mask, const MattesMiOptions& options,
                                                           NDArray* grad, const Stream& stream, Buffer* scratch) {
  const int64_t n = fixed.num_elements();
  if (n == 0) return MattesMiResult{};
  const int ordinal = stream.ordinal();
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal));
  const int B = options.bins;
  const ScratchLayout layout(B);
  std::shared_ptr<Buffer> owned;
  if (scratch == nullptr) {
    TESSERA_ASSIGN_OR_RETURN(owned, Buffer::Allocate(MemoryKind::kDevice, layout.total, ordinal));
    scratch = owned.get();
  } else if (scratch->kind() != MemoryKind::kDevice || scratch->ordinal() != ordinal ||
             scratch->size() < layout.total) {
    return absl::InvalidArgumentError(absl::StrCat("MattesMutualInformation: scratch must be >= ", layout.total,
                                                   " bytes of device memory on GPU ", ordinal));
  }
  char* base = static_cast<char*>(scratch->data());
  uint64_t* histogram = reinterpret_cast<uint64_t*>(base + layout.histogram);
  float* table = reinterpret_cast<float*>(base + layout.table);
  double* result = reinterpret_cast<double*>(base + layout.result);
  const float* F = fixed.data<float>();
  const float* W = warped.data<float>();
  const uint8_t* M = mask != nullptr ? mask->data<uint8_t>() : nullptr;
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(histogram, 0, size_t(B) * B * sizeof(uint64_t), s));
  TESSERA_RETURN_IF_ERROR(mi_cuda::AddJointHistogram(stream, F, W, M, n, options, histogram));
  TESSERA_RETURN_IF_ERROR(mi_cuda::Finalize(stream, histogram, options, table, result));
  if (grad != nullptr) {
    TESSERA_RETURN_IF_ERROR(mi_cuda::Gradient(stream, F, W, M, n, options, table, grad->data<float>()));
  }
  return mi_cuda::ReadResult(stream, result);
}

}  // namespace registration
}  // namespace tessera
