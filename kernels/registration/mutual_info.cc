// Backend dispatch and argument checks for MattesMutualInformation.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/registration/mutual_info.h"
#include "kernels/registration/mutual_info_cpu_steps.h"
#include "kernels/registration/reg_checks.h"

namespace tessera {
namespace registration {

#if TESSERA_WITH_CUDA
// mutual_info.cu
absl::StatusOr<size_t> MattesMiScratchBytesCuda(int bins, int ordinal);
absl::StatusOr<MattesMiResult> MattesMutualInformationCuda(const NDArray& fixed, const NDArray& warped,
                                                           const NDArray* mask, const MattesMiOptions& options,
                                                           NDArray* grad, const Stream& stream, Buffer* scratch);
#endif

namespace {

absl::Status ValidateBins(int bins) {
  if (bins < kMattesMiMinBins || bins > kMattesMiMaxBins) {
    return absl::InvalidArgumentError(absl::StrCat("MattesMutualInformation: bins must be in [", kMattesMiMinBins,
                                                   ", ", kMattesMiMaxBins, "], got ", bins));
  }
  return absl::OkStatus();
}

absl::Status ValidateRange(float lo, float hi, const char* which) {
  if (!std::isfinite(lo) || !std::isfinite(hi) || !(hi > lo)) {
    return absl::InvalidArgumentError(
        absl::StrCat("MattesMutualInformation: ", which, " intensity range needs finite min < max, got [", lo,
                     ", ", hi, "]"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<size_t> MattesMiScratchBytes(int bins, int ordinal) {
  TESSERA_RETURN_IF_ERROR(ValidateBins(bins));
#if TESSERA_WITH_CUDA
  return MattesMiScratchBytesCuda(bins, ordinal);
#else
  (void)ordinal;
  return reg_internal::CudaUnavailable("MattesMiScratchBytes");
#endif
}

namespace {

// The checks of the inputs every MI call shares.
absl::Status CheckMiInputs(const NDArray& fixed, const NDArray& warped, const NDArray* mask,
                           const MattesMiOptions& options, const Stream& stream) {
  using namespace reg_internal;  // NOLINT
  TESSERA_RETURN_IF_ERROR(ValidateBins(options.bins));
  TESSERA_RETURN_IF_ERROR(ValidateRange(options.fixed_min, options.fixed_max, "fixed"));
  TESSERA_RETURN_IF_ERROR(ValidateRange(options.warped_min, options.warped_max, "warped"));
  TESSERA_RETURN_IF_ERROR(CheckArray(fixed, "fixed", DType::kFloat32));
  TESSERA_RETURN_IF_ERROR(CheckArray(warped, "warped", DType::kFloat32));
  TESSERA_RETURN_IF_ERROR(CheckSameShape(fixed, "fixed", warped, "warped"));
  TESSERA_RETURN_IF_ERROR(CheckResidency(fixed, "fixed", stream));
  TESSERA_RETURN_IF_ERROR(CheckResidency(warped, "warped", stream));
  if (mask != nullptr) {
    TESSERA_RETURN_IF_ERROR(CheckArray(*mask, "mask", DType::kUInt8));
    TESSERA_RETURN_IF_ERROR(CheckSameShape(fixed, "fixed", *mask, "mask"));
    TESSERA_RETURN_IF_ERROR(CheckResidency(*mask, "mask", stream));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<MattesMiResult> MattesMutualInformation(const NDArray& fixed, const NDArray& warped,
                                                       const NDArray* mask, const MattesMiOptions& options,
                                                       NDArray* grad, const Stream& stream, Buffer* scratch) {
  using namespace reg_internal;  // NOLINT
  TESSERA_RETURN_IF_ERROR(CheckMiInputs(fixed, warped, mask, options, stream));
  if (grad != nullptr) {
    TESSERA_RETURN_IF_ERROR(CheckArray(*grad, "grad", DType::kFloat32));
    TESSERA_RETURN_IF_ERROR(CheckSameShape(fixed, "fixed", *grad, "grad"));
    TESSERA_RETURN_IF_ERROR(CheckResidency(*grad, "grad", stream));
    if (grad->num_elements() > 0 &&
        (grad->raw_data() == fixed.raw_data() || grad->raw_data() == warped.raw_data())) {
      return absl::InvalidArgumentError("MattesMutualInformation: grad must not alias fixed or warped");
    }
  }
  if (stream.backend() == Backend::kCpu) return MattesMutualInformationCpu(fixed, warped, mask, options, grad);
#if TESSERA_WITH_CUDA
  return MattesMutualInformationCuda(fixed, warped, mask, options, grad, stream, scratch);
#else
  (void)scratch;
  return CudaUnavailable("MattesMutualInformation");
#endif
}

namespace mi_cpu {

absl::StatusOr<MattesMiResult> MattesMutualInformationOverWarped(const NDArray& fixed, NDArray& warped,
                                                                 const NDArray* mask,
                                                                 const MattesMiOptions& options) {
  TESSERA_RETURN_IF_ERROR(CheckMiInputs(fixed, warped, mask, options, Stream::Cpu()));
  return MattesMutualInformationCpu(fixed, warped, mask, options, &warped);
}

}  // namespace mi_cpu
}  // namespace registration
}  // namespace tessera
