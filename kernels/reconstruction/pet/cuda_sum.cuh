// Deterministic sums for the PET CUDA kernels: a kernel leaves one double per
// block (a fixed-tree block sum, registration/reduce.cuh), then FinishSum adds
// the partials in a fixed order (each of 256 threads a contiguous run, then a
// fixed tree) and brings the total to the host. No atomics, so the result
// depends only on the launch shape.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_PET_CUDA_SUM_CUH_
#define TESSERA_KERNELS_RECONSTRUCTION_PET_CUDA_SUM_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/cuda_check.h"
#include "common/device.h"
#include "kernels/registration/reduce.cuh"

namespace tessera {
namespace recon {
namespace pet {
namespace cuda_detail {

constexpr int kSumThreads = 256;

// Every thread of the block must call it; thread 0 writes the block's sum.
__device__ __forceinline__ void WriteBlockSum(double value, double* partials) {
  __shared__ double scratch[32];
  double v[1] = {value};
  registration::cuda_detail::BlockSum<1>(v, scratch);
  const int tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  if (tid == 0) partials[blockIdx.x] = v[0];
}

namespace {  // one private copy of the kernel per translation unit
__global__ void SumPartialsKernel(const double* partials, int64_t count, double* out) {
  __shared__ double scratch[32];
  const int64_t per = (count + kSumThreads - 1) / kSumThreads;
  const int64_t begin = threadIdx.x * per;
  const int64_t end = begin + per < count ? begin + per : count;
  double s = 0.0;
  for (int64_t i = begin; i < end; ++i) s += partials[i];
  double v[1] = {s};
  registration::cuda_detail::BlockSum<1>(v, scratch);
  if (threadIdx.x == 0) *out = v[0];
}
}  // namespace

// Sums partials[0, count) (device) into partials[count] and returns it; the
// buffer must hold count + 1 doubles. Synchronizes the stream.
inline absl::StatusOr<double> FinishSum(const Stream& stream, double* partials, int64_t count) {
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  SumPartialsKernel<<<1, kSumThreads, 0, s>>>(partials, count, partials + count);
  if (absl::Status st = CudaStatus(cudaGetLastError(), "pet sum partials"); !st.ok()) return st;
  double result = 0.0;
  if (absl::Status st = CudaStatus(
          cudaMemcpyAsync(&result, partials + count, sizeof(double), cudaMemcpyDeviceToHost, s), "pet sum copy");
      !st.ok()) {
    return st;
  }
  if (absl::Status st = stream.Synchronize(); !st.ok()) return st;
  return result;
}

}  // namespace cuda_detail
}  // namespace pet
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_PET_CUDA_SUM_CUH_
