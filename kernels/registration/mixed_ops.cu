// CUDA kernels of mixed_ops.h: grid-stride element-wise passes; MaxAbs as a
// block max then an atomicMax on the float's bits (|x| >= 0 orders like its
// bits, so the result is exact and independent of scheduling); MSE reduced
// per block in double, then in a fixed order.
#include <cuda_runtime.h>

#include <cstdint>

#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/registration/mixed_ops.h"
#include "kernels/registration/reduce.cuh"

namespace tessera {
namespace registration {
namespace mixed_internal {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;

int Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < kMaxBlocks ? b : kMaxBlocks);
}

template <typename In, typename Out>
__global__ void ConvertKernel(const In* __restrict__ in, Out* __restrict__ out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < n; i += int64_t{gridDim.x} * kThreads) {
    out[i] = FromFloat<Out>(ToFloat(in[i]));
  }
}

__global__ void MaxAbsKernel(const BFloat16* __restrict__ x, int64_t n, unsigned int* __restrict__ result) {
  __shared__ float warp_max[kThreads / 32];
  float m = 0.f;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < n; i += int64_t{gridDim.x} * kThreads) {
    const float a = fabsf(ToFloat(x[i]));
    if (!(a <= m)) m = a;
  }
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float o = __shfl_down_sync(0xffffffffu, m, offset);
    if (!(o <= m)) m = o;
  }
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) {
      if (!(warp_max[w] <= m)) m = warp_max[w];
    }
    atomicMax(result, __float_as_uint(m));  // NaN (0x7fc00000 and up) wins over every finite value
  }
}

__global__ void __launch_bounds__(kThreads)
    MseKernel(const Half* __restrict__ fixed, float* warped, int64_t n, float grad_scale, bool want_grad,
              double* __restrict__ partials) {
  __shared__ double scratch[32];
  double sum = 0.0;
  for (int64_t v = blockIdx.x * int64_t{kThreads} + threadIdx.x; v < n; v += int64_t{gridDim.x} * kThreads) {
    const float diff = warped[v] - ToFloat(fixed[v]);
    sum += static_cast<double>(diff) * diff;
    if (want_grad) warped[v] = grad_scale * diff;
  }
  double s[1] = {sum};
  cuda_detail::BlockSum<1>(s, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = s[0];
}

}  // namespace

absl::Status ConvertToHalfCuda(const float* in, Half* out, int64_t n, const Stream& stream) {
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  ConvertKernel<float, Half><<<Blocks(n), kThreads, 0, static_cast<cudaStream_t>(stream.native())>>>(in, out, n);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("ConvertToHalf");
  return absl::OkStatus();
}

absl::Status ConvertToFloatCuda(const Half* in, float* out, int64_t n, const Stream& stream) {
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  ConvertKernel<Half, float><<<Blocks(n), kThreads, 0, static_cast<cudaStream_t>(stream.native())>>>(in, out, n);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("ConvertToFloat");
  return absl::OkStatus();
}

absl::StatusOr<float> MaxAbsCuda(const BFloat16* x, int64_t n, Workspace* workspace, const Stream& stream) {
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  Workspace local;
  TESSERA_ASSIGN_OR_RETURN(void* scratch, ReserveScratch(stream, sizeof(unsigned int), workspace, local));
  unsigned int* result = static_cast<unsigned int*>(scratch);
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(result, 0, sizeof(unsigned int), s));
  MaxAbsKernel<<<Blocks(n), kThreads, 0, s>>>(x, n, result);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("MaxAbs");
  unsigned int bits = 0;
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(&bits, result, sizeof bits, cudaMemcpyDeviceToHost, s));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return storage_internal::BitsFloat(bits);
}

absl::Status MseHalfFixedCuda(const Half* fixed, float* warped, int64_t n, float* loss, bool want_grad,
                              Workspace* workspace, const Stream& stream) {
  if (loss == nullptr && !want_grad) return absl::OkStatus();
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  const int blocks = Blocks(n);
  Workspace local;
  TESSERA_ASSIGN_OR_RETURN(void* scratch, ReserveScratch(stream, sizeof(double) * blocks, workspace, local));
  double* partials = static_cast<double*>(scratch);
  const float grad_scale = static_cast<float>(2.0 / static_cast<double>(n));
  MseKernel<<<blocks, kThreads, 0, s>>>(fixed, warped, n, grad_scale, want_grad, partials);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("MseHalfFixed");
  if (loss != nullptr) {
    TESSERA_CUDA_RETURN_IF_ERROR(
        cuda_detail::FinishPartials(partials, blocks, 1, 1.0 / static_cast<double>(n), loss, s));
  }
  if (workspace == nullptr) TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return absl::OkStatus();
}

}  // namespace mixed_internal
}  // namespace registration
}  // namespace tessera
