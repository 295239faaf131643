#include <cuda_runtime.h>

#include <algorithm>

#include "common/cuda_check.h"
#include "kernels/registration/sharded/sharded_internal.h"

namespace tessera {
namespace parallel {
namespace sharded_internal {
namespace {

__global__ void ScaleKernel(float* p, int64_t n, float factor) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    p[i] = __fmul_rn(p[i], factor);  // as the CPU loop
  }
}

}  // namespace

absl::Status ScaleCuda(float* p, int64_t n, float factor, const Stream& stream) {
  if (n <= 0) return absl::OkStatus();
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<int64_t>((n + threads - 1) / threads, 4096));
  ScaleKernel<<<blocks, threads, 0, static_cast<cudaStream_t>(stream.native())>>>(p, n, factor);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("ScaleKernel");
  return absl::OkStatus();
}

}  // namespace sharded_internal
}  // namespace parallel
}  // namespace tessera
