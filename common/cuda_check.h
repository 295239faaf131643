// Turning CUDA runtime errors into absl::Status. Only for files compiled with
// CUDA available (TESSERA_WITH_CUDA); include it from .cu and guarded .cc files.
#ifndef TESSERA_COMMON_CUDA_CHECK_H_
#define TESSERA_COMMON_CUDA_CHECK_H_

#include <cuda_runtime_api.h>

#include <string>

#include "absl/status/status.h"

namespace tessera {

inline absl::Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  const absl::StatusCode code =
      err == cudaErrorMemoryAllocation ? absl::StatusCode::kResourceExhausted : absl::StatusCode::kInternal;
  return absl::Status(code, std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

}  // namespace tessera

// Evaluates a cudaError_t expression and returns an absl::Status on failure.
#define TESSERA_CUDA_RETURN_IF_ERROR(expr)                                  \
  do {                                                                      \
    ::absl::Status tessera_cuda_status_ = ::tessera::CudaStatus((expr), #expr); \
    if (!tessera_cuda_status_.ok()) return tessera_cuda_status_;            \
  } while (0)

// After a kernel launch: reports (and clears) launch-configuration errors.
// `kernel_name` must be a string literal.
#define TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR(kernel_name)                       \
  do {                                                                       \
    cudaError_t tessera_launch_err_ = cudaGetLastError();                    \
    if (tessera_launch_err_ != cudaSuccess)                                  \
      return ::tessera::CudaStatus(tessera_launch_err_, "launching " kernel_name); \
  } while (0)

#endif  // TESSERA_COMMON_CUDA_CHECK_H_
