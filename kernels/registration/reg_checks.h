// Argument checks shared by the registration kernels written against NDArray
// (mutual_info, gaussian_smooth, adam, jacobian). Header-only; internal to
// kernels/registration.
#ifndef TESSERA_KERNELS_REGISTRATION_REG_CHECKS_H_
#define TESSERA_KERNELS_REGISTRATION_REG_CHECKS_H_

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/device.h"
#include "common/ndarray.h"

namespace tessera {
namespace reg_internal {

// `a` must have storage (unless empty), dtype `dtype`, and rank `rank`
// (rank < 0: any rank).
inline absl::Status CheckArray(const NDArray& a, const char* name, DType dtype, int rank = -1) {
  if (a.dtype() != dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": expected dtype ", DTypeName(dtype), ", got ", DTypeName(a.dtype())));
  }
  if (rank >= 0 && a.rank() != rank) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": expected rank ", rank, ", got shape ", ShapeToString(a.shape())));
  }
  if (a.empty() && a.num_elements() != 0) return absl::InvalidArgumentError(absl::StrCat(name, ": no storage"));
  return absl::OkStatus();
}

inline absl::Status CheckSameShape(const NDArray& a, const char* a_name, const NDArray& b, const char* b_name) {
  if (a.shape() != b.shape()) {
    return absl::InvalidArgumentError(absl::StrCat(a_name, " is ", ShapeToString(a.shape()), " but ", b_name,
                                                   " is ", ShapeToString(b.shape())));
  }
  return absl::OkStatus();
}

// A CPU stream needs host (or pinned) memory; a CUDA stream needs device
// memory on the stream's GPU. Moving data is the caller's job.
inline absl::Status CheckResidency(const NDArray& a, const char* name, const Stream& stream) {
  const bool on_device = a.memory_kind() == MemoryKind::kDevice;
  if (stream.backend() == Backend::kCpu && on_device) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is in device memory but the stream is a CPU stream"));
  }
  if (stream.backend() == Backend::kCuda) {
    if (!on_device) {
      return absl::InvalidArgumentError(absl::StrCat(name, " must be in device memory for a CUDA stream"));
    }
    if (a.ordinal() != stream.ordinal()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " is on GPU ", a.ordinal(), " but the stream is on GPU ", stream.ordinal()));
    }
  }
  return absl::OkStatus();
}

inline absl::Status CudaUnavailable(const char* op) {
  return absl::FailedPreconditionError(absl::StrCat(op, ": CUDA stream in a build without CUDA"));
}

}  // namespace reg_internal
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_REG_CHECKS_H_
