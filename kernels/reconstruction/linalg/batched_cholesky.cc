// Argument checks and backend dispatch for the batched Cholesky solves.
#include "kernels/reconstruction/linalg/batched_cholesky.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/reconstruction/linalg/batched_cholesky_cuda.h"

namespace tessera {
namespace recon {
namespace linalg {
namespace {

absl::Status Check(const BatchedSolveShape& shape, float lambda, const void* a, const void* b, const void* x,
                   const int* info) {
  if (shape.n < 1 || shape.n > kMaxBatchedSolveSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("batched solve: n = ", shape.n, " is not in [1, ", kMaxBatchedSolveSize, "]"));
  }
  if (shape.nrhs < 1) return absl::InvalidArgumentError(absl::StrCat("batched solve: nrhs = ", shape.nrhs, " < 1"));
  if (shape.batch < 0) return absl::InvalidArgumentError(absl::StrCat("batched solve: batch = ", shape.batch, " < 0"));
  if (!std::isfinite(lambda)) return absl::InvalidArgumentError(absl::StrCat("batched solve: lambda = ", lambda));
  if (shape.batch > 0 && (a == nullptr || b == nullptr || x == nullptr || info == nullptr)) {
    return absl::InvalidArgumentError("batched solve: a, b, x or info is null");
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status Dispatch(const Stream& stream, const BatchedSolveShape& shape, float lambda, const T* a, const T* b, T* x,
                      int* info) {
  if (absl::Status s = Check(shape, lambda, a, b, x, info); !s.ok()) return s;
  if (shape.batch == 0) return absl::OkStatus();
  if (stream.backend() == Backend::kCpu) {
    cpu::BatchedCholeskySolve(shape, lambda, a, b, x, info);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return cuda::BatchedCholeskySolve(stream, shape, lambda, a, b, x, info);
#else
  return absl::FailedPreconditionError(
      absl::StrCat("batched solve: CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
#endif
}

}  // namespace

absl::Status BatchedCholeskySolve(const Stream& stream, const BatchedSolveShape& shape, float lambda, const float* a,
                                  const float* b, float* x, int* info) {
  return Dispatch(stream, shape, lambda, a, b, x, info);
}

absl::Status BatchedCholeskySolve(const Stream& stream, const BatchedSolveShape& shape, float lambda,
                                  const std::complex<float>* a, const std::complex<float>* b, std::complex<float>* x,
                                  int* info) {
  return Dispatch(stream, shape, lambda, a, b, x, info);
}

#if TESSERA_WITH_CUDA
namespace cuda {
namespace {

template <typename T>
absl::Status Solve(const Stream& stream, const BatchedSolveShape& shape, float lambda, const T* a, const T* b, T* x,
                   int* info) {
  if (shape.batch == 0) return absl::OkStatus();
  if (shape.n <= kMaxRegisterSolveSize) return cuda_detail::SolveSmall<T>(stream, shape, lambda, a, b, x, info);
  return cuda_detail::SolveBlocked<T>(stream, shape, lambda, a, b, x, info);
}

}  // namespace

absl::Status BatchedCholeskySolve(const Stream& stream, const BatchedSolveShape& shape, float lambda, const float* a,
                                  const float* b, float* x, int* info) {
  return Solve(stream, shape, lambda, a, b, x, info);
}

absl::Status BatchedCholeskySolve(const Stream& stream, const BatchedSolveShape& shape, float lambda,
                                  const std::complex<float>* a, const std::complex<float>* b, std::complex<float>* x,
                                  int* info) {
  return Solve(stream, shape, lambda, a, b, x, info);
}

}  // namespace cuda
#endif  // TESSERA_WITH_CUDA

}  // namespace linalg
}  // namespace recon
}  // namespace tessera
