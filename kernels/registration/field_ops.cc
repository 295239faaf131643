// Backend dispatch and validation for field_ops.h.
#include "kernels/registration/field_ops.h"

#include <cstring>

#include "absl/strings/str_cat.h"

#if TESSERA_WITH_CUDA
#include <cuda_runtime_api.h>

#include "common/cuda_check.h"
#endif

namespace tessera {
namespace registration {
namespace {

absl::Status CheckResidency(const NDArray& a, const Stream& stream, const char* what) {
  if (a.dtype() != DType::kFloat32) return absl::InvalidArgumentError(absl::StrCat(what, " must be float32"));
  const bool on_device = a.memory_kind() == MemoryKind::kDevice;
  if (on_device != (stream.backend() == Backend::kCuda) && a.num_elements() > 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is not in the stream's backend memory"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ScaleComponents(NDArray& field, const std::array<float, 3>& factors, const Stream& stream) {
  if (absl::Status s = CheckResidency(field, stream, "field"); !s.ok()) return s;
  if (field.rank() != 4 || field.dim(3) != 3) {
    return absl::InvalidArgumentError(absl::StrCat("field must be (nx, ny, nz, 3), got ", ShapeToString(field.shape())));
  }
  const int64_t voxels = field.num_elements() / 3;
  if (stream.backend() == Backend::kCpu) {
    cpu::ScaleComponents(field.data<float>(), voxels, factors);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return cuda::ScaleComponents(field.data<float>(), voxels, factors, stream);
#else
  return absl::FailedPreconditionError("CUDA stream in a build without CUDA");
#endif
}

absl::Status MixComponents(NDArray& field, const std::array<double, 9>& m, const Stream& stream) {
  if (absl::Status s = CheckResidency(field, stream, "field"); !s.ok()) return s;
  if (field.rank() != 4 || field.dim(3) != 3) {
    return absl::InvalidArgumentError(absl::StrCat("field must be (nx, ny, nz, 3), got ", ShapeToString(field.shape())));
  }
  const int64_t voxels = field.num_elements() / 3;
  if (stream.backend() == Backend::kCpu) {
    cpu::MixComponents(field.data<float>(), voxels, m);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return cuda::MixComponents(field.data<float>(), voxels, m, stream);
#else
  return absl::FailedPreconditionError("CUDA stream in a build without CUDA");
#endif
}

absl::Status Axpy(float alpha, const NDArray& x, NDArray& y, const Stream& stream) {
  if (absl::Status s = CheckResidency(x, stream, "x"); !s.ok()) return s;
  if (absl::Status s = CheckResidency(y, stream, "y"); !s.ok()) return s;
  if (x.num_elements() != y.num_elements()) return absl::InvalidArgumentError("Axpy: element counts differ");
  if (stream.backend() == Backend::kCpu) {
    cpu::Axpy(alpha, x.data<float>(), y.data<float>(), y.num_elements());
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return cuda::Axpy(alpha, x.data<float>(), y.data<float>(), y.num_elements(), stream);
#else
  return absl::FailedPreconditionError("CUDA stream in a build without CUDA");
#endif
}

absl::Status FillZero(NDArray& array, const Stream& stream) {
  if (array.memory_kind() != MemoryKind::kDevice) {
    std::memset(array.raw_data(), 0, array.nbytes());
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  TESSERA_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(array.raw_data(), 0, array.nbytes(), static_cast<cudaStream_t>(stream.native())));
  return absl::OkStatus();
#else
  (void)stream;
  return absl::FailedPreconditionError("device array in a build without CUDA");
#endif
}

}  // namespace registration
}  // namespace tessera
