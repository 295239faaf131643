// Device halves of the sharded Mattes MI (sharded_mi.cc): this rank's joint
// Parzen histogram and the gradient from the global table. The window
// arithmetic is mutual_info_parzen.h's, shared with the single-GPU kernels
// (mutual_info.cu) and the CPU reference. Those fused kernels are file-private
// and finalize on the device from their own block partials, with no place to
// add the other ranks' histograms in between; these two are their plain
// counterparts (one shared-memory histogram per block, float atomics; the
// gradient contracts T held in shared memory), with the finalize done on the
// host by the CPU reference's own step (mi_cpu::Finalize) on the all-reduced
// B x B histogram.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "common/buffer.h"
#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/parallel/sharded_internal.h"
#include "kernels/registration/mutual_info_parzen.h"

namespace tessera {
namespace parallel {
namespace sharded_internal {
namespace {

using mi_internal::BinCoord;
using mi_internal::BoxBin;
using mi_internal::CubicWeights;
using mi_internal::CubicWeightsAndDerivatives;

constexpr int kThreads = 256;
constexpr int kBlocksPerSm = 4;

struct Params {
  float f_lo, f_inv, w_lo, w_inv, span;
  int bins;
};

Params ParamsOf(const MiMapping& o) {
  // As mutual_info.cu: the inverse ranges rounded once to float.
  Params p;
  p.f_lo = o.fixed_min;
  p.f_inv = static_cast<float>(1.0 / (static_cast<double>(o.fixed_max) - o.fixed_min));
  p.w_lo = o.warped_min;
  p.w_inv = static_cast<float>(1.0 / (static_cast<double>(o.warped_max) - o.warped_min));
  p.span = static_cast<float>(o.bins - 4);
  p.bins = o.bins;
  return p;
}

template <int kTaps>
__device__ __forceinline__ int FixedWindow(float v, const Params& p, float w[4]) {
  bool inside;
  const float t = BinCoord(v, p.f_lo, p.f_inv, p.span, &inside);
  if constexpr (kTaps == 1) {
    w[0] = 1.f;
    return BoxBin(t);
  } else {
    return CubicWeights(t, w);
  }
}

template <int kTaps>
__global__ void __launch_bounds__(kThreads)
    HistogramKernel(const float* __restrict__ F, const float* __restrict__ W, const uint8_t* __restrict__ M,
                    int64_t n, Params p, float* __restrict__ partials) {
  extern __shared__ float hist[];
  const int B = p.bins, BB = B * B;
  for (int e = threadIdx.x; e < BB; e += kThreads) hist[e] = 0.f;
  __syncthreads();
  for (int64_t k = blockIdx.x * int64_t{kThreads} + threadIdx.x; k < n; k += int64_t{gridDim.x} * kThreads) {
    if (M != nullptr && M[k] == 0) continue;
    float wf[4], ww[4];
    const int a0 = FixedWindow<kTaps>(__ldg(F + k), p, wf);
    bool inside;
    const int b0 = CubicWeights(BinCoord(__ldg(W + k), p.w_lo, p.w_inv, p.span, &inside), ww);
#pragma unroll
    for (int a = 0; a < kTaps; ++a) {
#pragma unroll
      for (int b = 0; b < 4; ++b) atomicAdd(hist + (a0 + a) * B + b0 + b, wf[a] * ww[b]);
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < BB; e += kThreads) partials[int64_t(blockIdx.x) * BB + e] = hist[e];
}

// One thread per bin: the block partials in double, in block order.
__global__ void SumPartialsKernel(const float* __restrict__ partials, int blocks, int bb, double* __restrict__ out) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= bb) return;
  double s = 0;
  for (int b = 0; b < blocks; ++b) s += partials[int64_t(b) * bb + e];
  out[e] = s;
}

template <int kTaps>
__global__ void __launch_bounds__(kThreads)
    GradientKernel(const float* __restrict__ F, const float* __restrict__ W, const uint8_t* __restrict__ M,
                   int64_t n, Params p, const float* __restrict__ table, float* __restrict__ grad) {
  extern __shared__ float T[];
  const int B = p.bins;
  for (int e = threadIdx.x; e < B * B; e += kThreads) T[e] = table[e];
  __syncthreads();
  for (int64_t k = blockIdx.x * int64_t{kThreads} + threadIdx.x; k < n; k += int64_t{gridDim.x} * kThreads) {
    float g = 0.f;
    bool inside;
    const float t = BinCoord(__ldg(W + k), p.w_lo, p.w_inv, p.span, &inside);
    if (inside && (M == nullptr || M[k] != 0)) {
      float wf[4], ww[4], dw[4];
      const int a0 = FixedWindow<kTaps>(__ldg(F + k), p, wf);
      const int b0 = CubicWeightsAndDerivatives(t, ww, dw);
#pragma unroll
      for (int a = 0; a < kTaps; ++a) {
        const float* row = T + (a0 + a) * B + b0;
        float r = 0.f;
#pragma unroll
        for (int b = 0; b < 4; ++b) r = fmaf(row[b], dw[b], r);
        g = fmaf(wf[a], r, g);
      }
    }
    grad[k] = g;
  }
}

absl::StatusOr<int> Blocks(const Stream& stream, int64_t n) {
  int sms = 0;
  TESSERA_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, stream.ordinal()));
  const int64_t want = (n + kThreads - 1) / kThreads;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(want, int64_t{std::max(sms, 1)} * kBlocksPerSm)));
}

}  // namespace

absl::Status MiJointHistogramCuda(const Stream& stream, const float* fixed, const float* warped, const uint8_t* mask,
                                  int64_t n, const MiMapping& options, double* histogram) {
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  const int bb = options.bins * options.bins;
  if (n <= 0) {
    TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(histogram, 0, bb * sizeof(double), s));
    return absl::OkStatus();
  }
  TESSERA_ASSIGN_OR_RETURN(const int blocks, Blocks(stream, n));
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> partials,
                           Buffer::Allocate(MemoryKind::kDevice, size_t(blocks) * bb * sizeof(float), stream.ordinal()));
  float* part = static_cast<float*>(partials->data());
  const Params p = ParamsOf(options);
  const size_t smem = bb * sizeof(float);
  if (options.fixed_box) {
    HistogramKernel<1><<<blocks, kThreads, smem, s>>>(fixed, warped, mask, n, p, part);
  } else {
    HistogramKernel<4><<<blocks, kThreads, smem, s>>>(fixed, warped, mask, n, p, part);
  }
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("sharded MI histogram");
  SumPartialsKernel<<<(bb + 255) / 256, 256, 0, s>>>(part, blocks, bb, histogram);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("sharded MI histogram sum");
  // `partials` is freed on return: the kernels must be done with it.
  return stream.Synchronize();
}

absl::Status MiGradientCuda(const Stream& stream, const float* fixed, const float* warped, const uint8_t* mask,
                            int64_t n, const MiMapping& options, const float* table,
                            float* grad) {
  if (n <= 0) return absl::OkStatus();
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  TESSERA_ASSIGN_OR_RETURN(const int blocks, Blocks(stream, n));
  const Params p = ParamsOf(options);
  const size_t smem = size_t(options.bins) * options.bins * sizeof(float);
  if (options.fixed_box) {
    GradientKernel<1><<<blocks, kThreads, smem, s>>>(fixed, warped, mask, n, p, table, grad);
  } else {
    GradientKernel<4><<<blocks, kThreads, smem, s>>>(fixed, warped, mask, n, p, table, grad);
  }
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("sharded MI gradient");
  return absl::OkStatus();
}

}  // namespace sharded_internal
}  // namespace parallel
}  // namespace tessera
