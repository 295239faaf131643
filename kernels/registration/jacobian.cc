// Argument checks and backend dispatch for JacobianDeterminant.
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/registration/jacobian.h"
#include "kernels/registration/jacobian_internal.h"
#include "kernels/registration/reg_checks.h"

namespace tessera {
namespace registration {

absl::StatusOr<JacobianSummary> JacobianDeterminant(const NDArray& u, NDArray* det, const Stream& stream,
                                                    DisplacementUnits units) {
  using namespace reg_internal;  // NOLINT
  TESSERA_RETURN_IF_ERROR(CheckArray(u, "displacement", DType::kFloat32, 4));
  if (u.dim(3) != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("displacement: expected (nx, ny, nz, 3), got ", ShapeToString(u.shape())));
  }
  TESSERA_RETURN_IF_ERROR(CheckResidency(u, "displacement", stream));
  if (det != nullptr) {
    TESSERA_RETURN_IF_ERROR(CheckArray(*det, "det", DType::kFloat32, 3));
    if (det->dim(0) != u.dim(0) || det->dim(1) != u.dim(1) || det->dim(2) != u.dim(2)) {
      return absl::InvalidArgumentError(absl::StrCat("det is ", ShapeToString(det->shape()), ", displacement ",
                                                     ShapeToString(u.shape())));
    }
    TESSERA_RETURN_IF_ERROR(CheckResidency(*det, "det", stream));
  }
  jac_internal::Field f;
  f.u = u.data<float>();
  for (int a = 0; a < 3; ++a) {
    f.n[a] = u.dim(a);
    f.scale[a] = units == DisplacementUnits::kNormalized ? 0.5f * float(f.n[a] - 1) : 1.f;
  }
  if (u.num_elements() == 0) return JacobianSummary{};
  float* d = det != nullptr ? det->data<float>() : nullptr;
  if (stream.backend() == Backend::kCpu) return jac_internal::JacobianCpu(f, d);
#if TESSERA_WITH_CUDA
  return jac_internal::JacobianCuda(f, d, stream);
#else
  return CudaUnavailable("JacobianDeterminant");
#endif
}

}  // namespace registration
}  // namespace tessera
