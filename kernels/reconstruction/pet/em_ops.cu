// CUDA EM steps: grid-stride element-wise kernels; PoissonRatio's
// log-likelihood through the deterministic block partials of cuda_sum.cuh.
#include <cuda_runtime.h>

#include <cstdint>

#include "common/buffer.h"
#include "common/cuda_check.h"
#include "kernels/reconstruction/pet/cuda_sum.cuh"
#include "kernels/reconstruction/pet/em_ops.h"

namespace tessera {
namespace recon {
namespace pet {
namespace cuda {
namespace {

constexpr int kThreads = cuda_detail::kSumThreads;
constexpr int64_t kMaxBlocks = 4096;

int Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

cudaStream_t Native(const Stream& s) { return static_cast<cudaStream_t>(s.native()); }

__global__ void __launch_bounds__(kThreads)
    PoissonRatioKernel(const float* __restrict__ y, const float* fwd, const float* __restrict__ background,
                       float* ratio, int64_t n, double* partials) {
  double ll = 0.0;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < n; i += int64_t{gridDim.x} * kThreads) {
    const float ybar = background != nullptr ? fwd[i] + background[i] : fwd[i];
    const float yi = y[i];
    float r = 0.0f;
    if (ybar > 0.0f) {
      ll += (yi > 0.0f ? static_cast<double>(yi) * log(static_cast<double>(ybar)) : 0.0) - ybar;
      r = yi / ybar;
    }
    ratio[i] = r;
  }
  cuda_detail::WriteBlockSum(ll, partials);
}

__global__ void EmUpdateKernel(const float* __restrict__ back, const float* __restrict__ sens, float eps,
                               float* __restrict__ image, int64_t n) {
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < n; j += int64_t{gridDim.x} * blockDim.x) {
    const float s = sens[j];
    if (s > eps) image[j] = fmaxf(image[j] * back[j] / s, 0.0f);
  }
}

__global__ void FirstInvalidKernel(const float* __restrict__ x, int64_t n, unsigned long long* first) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float v = x[i];
    if (!isfinite(v) || v < 0.0f) atomicMin(first, static_cast<unsigned long long>(i));
  }
}

__global__ void ExpNegateKernel(float* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    x[i] = expf(-x[i]);
  }
}

}  // namespace

absl::StatusOr<double> PoissonRatio(const Stream& stream, const float* y, const float* fwd, const float* background,
                                    float* ratio, int64_t n) {
  if (n == 0) return 0.0;
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  const int blocks = Blocks(n);
  auto buffer = Buffer::Allocate(MemoryKind::kDevice, (blocks + 1) * sizeof(double), stream.ordinal());
  if (!buffer.ok()) return buffer.status();
  double* partials = static_cast<double*>((*buffer)->data());
  PoissonRatioKernel<<<blocks, kThreads, 0, Native(stream)>>>(y, fwd, background, ratio, n, partials);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("PoissonRatioKernel");
  return cuda_detail::FinishSum(stream, partials, blocks);
}

absl::Status EmUpdate(const Stream& stream, const float* back, const float* sens, float eps, float* image, int64_t n) {
  if (n == 0) return absl::OkStatus();
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  EmUpdateKernel<<<Blocks(n), kThreads, 0, Native(stream)>>>(back, sens, eps, image, n);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("EmUpdateKernel");
  return absl::OkStatus();
}

absl::StatusOr<int64_t> FirstInvalid(const Stream& stream, const float* x, int64_t n) {
  if (n == 0) return int64_t{-1};
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  auto buffer = Buffer::Allocate(MemoryKind::kDevice, sizeof(unsigned long long), stream.ordinal());
  if (!buffer.ok()) return buffer.status();
  auto* first = static_cast<unsigned long long*>((*buffer)->data());
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(first, 0xff, sizeof(unsigned long long), Native(stream)));
  FirstInvalidKernel<<<Blocks(n), kThreads, 0, Native(stream)>>>(x, n, first);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("FirstInvalidKernel");
  unsigned long long host = 0;
  TESSERA_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(&host, first, sizeof(host), cudaMemcpyDeviceToHost, Native(stream)));
  if (absl::Status s = stream.Synchronize(); !s.ok()) return s;
  return host == ~0ull ? int64_t{-1} : static_cast<int64_t>(host);
}

absl::Status ExpNegate(const Stream& stream, float* x, int64_t n) {
  if (n == 0) return absl::OkStatus();
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  ExpNegateKernel<<<Blocks(n), kThreads, 0, Native(stream)>>>(x, n);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("ExpNegateKernel");
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace pet
}  // namespace recon
}  // namespace tessera
