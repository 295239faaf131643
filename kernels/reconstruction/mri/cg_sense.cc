#include "kernels/reconstruction/mri/cg_sense.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/memory_kind_for.h"
#include "common/status.h"
#include "kernels/reconstruction/vector_ops.h"

namespace tessera {
namespace recon {
namespace mri {
namespace {

// Checked before the operator is made (its set-up is the expensive part).
absl::Status CheckArguments(const CgSenseOptions& options, const std::complex<float>* kspace,
                            const std::complex<float>* image) {
  if (options.iterations < 1) {
    return absl::InvalidArgumentError(absl::StrCat("CG-SENSE: iterations = ", options.iterations, " < 1"));
  }
  if (!(options.lambda >= 0) || !std::isfinite(options.lambda)) {
    return absl::InvalidArgumentError(absl::StrCat("CG-SENSE: lambda = ", options.lambda, " is not finite and >= 0"));
  }
  if (kspace == nullptr || image == nullptr) return absl::InvalidArgumentError("CG-SENSE: kspace or image is null");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CgSenseResult> CgSense(const Stream& stream, const SenseGeometry& geometry,
                                      const std::complex<float>* kspace, const CgSenseOptions& options,
                                      std::complex<float>* image) {
  TESSERA_RETURN_IF_ERROR(CheckArguments(options, kspace, image));
  SenseOperatorOptions op_options = options.nufft;
  op_options.use_toeplitz = options.use_toeplitz;
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<SenseOperator> op, SenseOperator::Create(stream, geometry, op_options));
  return CgSense(stream, *op, kspace, options, image);
}

absl::StatusOr<CgSenseResult> CgSense(const Stream& stream, SenseOperator& sense, const std::complex<float>* kspace,
                                      const CgSenseOptions& options, std::complex<float>* image) {
  return CgSense(stream, static_cast<EncodingOperator&>(sense), kspace, options, image);
}

absl::StatusOr<CgSenseResult> CgSense(const Stream& stream, EncodingOperator& encoding,
                                      const std::complex<float>* kspace, const CgSenseOptions& options,
                                      std::complex<float>* image) {
  TESSERA_RETURN_IF_ERROR(CheckArguments(options, kspace, image));
  EncodingOperator* op = &encoding;
  CgSenseResult result;
  TESSERA_ASSIGN_OR_RETURN(const double weight_sum, op->NormalScale());
  result.lambda_absolute = options.lambda * weight_sum;
  const float lambda = static_cast<float>(result.lambda_absolute);

  const int64_t npix = op->pixels();
  TESSERA_ASSIGN_OR_RETURN(
      std::shared_ptr<Buffer> rhs_buffer,
      Buffer::Allocate(MemoryKindFor(stream), npix * sizeof(std::complex<float>), stream.ordinal()));
  auto* rhs = static_cast<std::complex<float>*>(rhs_buffer->data());
  TESSERA_RETURN_IF_ERROR(op->Adjoint(kspace, rhs));

  linalg::Matvec normal = [&](const float* x, float* ax) -> absl::Status {
    const auto* xc = reinterpret_cast<const std::complex<float>*>(x);
    TESSERA_RETURN_IF_ERROR(op->Normal(xc, reinterpret_cast<std::complex<float>*>(ax)));
    if (lambda > 0) TESSERA_RETURN_IF_ERROR(Axpy(stream, lambda, x, ax, 2 * npix));
    return absl::OkStatus();
  };
  linalg::CgOptions cg;
  cg.max_iterations = options.iterations;
  cg.tolerance = options.tolerance;
  cg.zero_initial_guess = true;
  cg.progress = options.progress;
  TESSERA_ASSIGN_OR_RETURN(result.cg, linalg::ConjugateGradientComplex(stream, normal,
                                                                      reinterpret_cast<const float*>(rhs),
                                                                      reinterpret_cast<float*>(image), npix, cg));
  return result;
}

absl::Status AdjointSense(const Stream& stream, const SenseGeometry& geometry, const std::complex<float>* kspace,
                          const SenseOperatorOptions& options, std::complex<float>* image) {
  if (kspace == nullptr || image == nullptr) return absl::InvalidArgumentError("adjoint SENSE: kspace or image is null");
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<SenseOperator> op, SenseOperator::Create(stream, geometry, options));
  return AdjointSense(stream, *op, kspace, image);
}

absl::Status AdjointSense(const Stream& stream, SenseOperator& op, const std::complex<float>* kspace,
                          std::complex<float>* image) {
  return AdjointSense(stream, static_cast<EncodingOperator&>(op), kspace, image);
}

absl::Status AdjointSense(const Stream& stream, EncodingOperator& op, const std::complex<float>* kspace,
                          std::complex<float>* image) {
  if (kspace == nullptr || image == nullptr) return absl::InvalidArgumentError("adjoint SENSE: kspace or image is null");
  TESSERA_RETURN_IF_ERROR(op.Adjoint(kspace, image));
  const int64_t npix = op.pixels();
  return Scale(stream, static_cast<float>(1.0 / npix), reinterpret_cast<float*>(image), 2 * npix);
}

}  // namespace mri
}  // namespace recon
}  // namespace tessera
