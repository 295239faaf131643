// CUDA MSE: a grid-stride pass writes dL/dW and accumulates squared
// differences per thread (double), reduced per block and then in order.
#include <cuda_runtime.h>

#include <cstdint>

#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/registration/mse.h"
#include "kernels/registration/reduce.cuh"

namespace tessera {
namespace registration {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;

template <bool kGrad>
__global__ void __launch_bounds__(kThreads)
    MseKernel(const float* __restrict__ fixed, const float* __restrict__ warped, int64_t n, float grad_scale,
              float* __restrict__ grad, double* __restrict__ partials) {
  __shared__ double scratch[32];
  double sum = 0.0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t v = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; v < n; v += stride) {
    const float diff = __ldg(warped + v) - __ldg(fixed + v);
    sum += static_cast<double>(diff) * diff;
    if (kGrad) grad[v] = grad_scale * diff;
  }
  double s[1] = {sum};
  cuda_detail::BlockSum<1>(s, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = s[0];
}

}  // namespace

absl::Status Mse(const Stream& stream, const float* fixed, const float* warped, Dims3 dims, float* loss,
                 float* grad_warped, Workspace* workspace) {
  if (loss == nullptr && grad_warped == nullptr) return absl::OkStatus();
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  const int64_t n = dims.size();
  int64_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  Workspace local;
  TESSERA_ASSIGN_OR_RETURN(void* scratch, ReserveScratch(stream, sizeof(double) * blocks, workspace, local));
  double* partials = static_cast<double*>(scratch);
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  const float grad_scale = static_cast<float>(2.0 / static_cast<double>(n));
  if (grad_warped != nullptr) {
    MseKernel<true><<<blocks, kThreads, 0, s>>>(fixed, warped, n, grad_scale, grad_warped, partials);
  } else {
    MseKernel<false><<<blocks, kThreads, 0, s>>>(fixed, warped, n, grad_scale, nullptr, partials);
  }
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("mse");
  if (loss != nullptr) {
    TESSERA_CUDA_RETURN_IF_ERROR(
        cuda_detail::FinishPartials(partials, blocks, 1, 1.0 / static_cast<double>(n), loss, s));
  }
  if (workspace == nullptr) TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace registration
}  // namespace tessera
