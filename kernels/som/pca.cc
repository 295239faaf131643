// Dispatch and argument checks of the PCA initialisation (pca.h).
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/som/bmu.h"
#include "kernels/som/pca.h"

namespace tessera {
namespace som {

absl::StatusOr<PrincipalPlane> LeadingComponents(const Stream& stream, const CsrView& rows,
                                                 const PcaOptions& options) {
  if (rows.rows <= 0) return absl::InvalidArgumentError("LeadingComponents: no rows");
  if (rows.cols <= 0) return absl::InvalidArgumentError("LeadingComponents: no features");
  if (stream.backend() == Backend::kCpu) return cpu::LeadingComponents(rows, options);
#if TESSERA_WITH_CUDA
  return cuda::LeadingComponents(stream, rows, options);
#else
  return absl::FailedPreconditionError(
      absl::StrCat("LeadingComponents: CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
#endif
}

absl::Status FillPcaCodebook(const Stream& stream, const CodebookView& codebook, const PcaFillInputs& inputs) {
  TESSERA_RETURN_IF_ERROR(CheckCodebook(codebook, "FillPcaCodebook"));
  if (codebook.layout != CodebookLayout::kFeatureMajor) {
    return absl::InvalidArgumentError("FillPcaCodebook: the codebook must be feature-major");
  }
  if (inputs.mean == nullptr || inputs.u0 == nullptr || inputs.u1 == nullptr || inputs.c0 == nullptr ||
      inputs.c1 == nullptr) {
    return absl::InvalidArgumentError("FillPcaCodebook: mean, u0, u1, c0 and c1 are all needed");
  }
  if (stream.backend() == Backend::kCpu) {
    cpu::FillPcaCodebook(codebook, inputs);
    return ComputeSqNorms(stream, codebook);
  }
#if TESSERA_WITH_CUDA
  TESSERA_RETURN_IF_ERROR(cuda::FillPcaCodebook(stream, codebook, inputs));
  return ComputeSqNorms(stream, codebook);
#else
  return absl::FailedPreconditionError(
      absl::StrCat("FillPcaCodebook: CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
#endif
}

}  // namespace som
}  // namespace tessera
