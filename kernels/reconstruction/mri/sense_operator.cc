#include "kernels/reconstruction/mri/sense_operator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/memory_kind_for.h"
#include "common/status.h"
#include "kernels/reconstruction/mri/coil_ops.h"
#include "kernels/reconstruction/vector_ops.h"

namespace tessera {
namespace recon {
namespace mri {
namespace {

constexpr double kPi = 3.14159265358979323846;

}  // namespace

absl::StatusOr<std::unique_ptr<SenseOperator>> SenseOperator::Create(const Stream& stream,
                                                                     const SenseGeometry& geometry,
                                                                     const SenseOperatorOptions& options) {
  if (geometry.nx < 2 || geometry.ny < 2) {
    return absl::InvalidArgumentError(absl::StrCat("SENSE operator: image ", geometry.nx, " x ", geometry.ny,
                                                   " (each side must be >= 2)"));
  }
  if (geometry.kz == nullptr ? geometry.nz != 1 : geometry.nz < 2) {
    return absl::InvalidArgumentError(absl::StrCat("SENSE operator: nz = ", geometry.nz,
                                                   geometry.kz == nullptr ? " needs a kz trajectory (2-D: nz = 1)"
                                                                          : " with a kz trajectory (3-D: nz >= 2)"));
  }
  if (geometry.coils < 1) {
    return absl::InvalidArgumentError(absl::StrCat("SENSE operator: coils = ", geometry.coils, " < 1"));
  }
  if (geometry.points < 1) {
    return absl::InvalidArgumentError(absl::StrCat("SENSE operator: points = ", geometry.points, " < 1"));
  }
  if (geometry.kx == nullptr || geometry.ky == nullptr || geometry.maps == nullptr) {
    return absl::InvalidArgumentError("SENSE operator: trajectory or coil maps are null");
  }
  std::unique_ptr<SenseOperator> op(new SenseOperator(stream, geometry));
  nufft::NufftOptions nufft_options;
  nufft_options.tolerance = options.nufft_tolerance;
  nufft_options.upsampling = options.nufft_upsampling;
  nufft_options.ntransforms = geometry.coils;
  nufft_options.mode = options.mode;
  const bool three_d = geometry.kz != nullptr;
  const std::array<int64_t, 3> modes = {geometry.nx, geometry.ny, geometry.nz};
  nufft_options.sign = -1;
  TESSERA_ASSIGN_OR_RETURN(op->type2_, nufft::NufftPlan<float>::Create(stream, nufft::NufftType::kType2, modes,
                                                                        nufft_options));
  nufft_options.sign = +1;
  TESSERA_ASSIGN_OR_RETURN(op->type1_, nufft::NufftPlan<float>::Create(stream, nufft::NufftType::kType1, modes,
                                                                        nufft_options));

  const int64_t npix = geometry.nx * geometry.ny * geometry.nz, m = geometry.points;
  // The sample scratch stages the NUFFT coordinates below: 3-D needs 3 m
  // floats, more than one coil's 2 m.
  const int64_t sample_values = std::max<int64_t>(geometry.coils * m, three_d ? (3 * m + 1) / 2 : 0);
  const size_t values = static_cast<size_t>(geometry.coils) * (npix + (options.use_toeplitz ? npix : 0)) +
                        static_cast<size_t>(sample_values);
  const MemoryKind kind = MemoryKindFor(stream);
  TESSERA_ASSIGN_OR_RETURN(op->scratch_,
                           Buffer::Allocate(kind, values * sizeof(std::complex<float>), stream.ordinal()));
  op->coil_images_ = static_cast<std::complex<float>*>(op->scratch_->data());
  op->coil_samples_ = op->coil_images_ + geometry.coils * npix;
  if (options.use_toeplitz) op->coil_normal_ = op->coil_samples_ + sample_values;

  // NUFFT coordinates x = 2 pi k / n, staged in the (not yet used) sample
  // scratch (sized for them above).
  float* x = reinterpret_cast<float*>(op->coil_samples_);
  float* y = x + m;
  float* z = three_d ? y + m : nullptr;
  TESSERA_RETURN_IF_ERROR(CopyBytes(x, kind, geometry.kx, kind, m * sizeof(float), stream));
  TESSERA_RETURN_IF_ERROR(CopyBytes(y, kind, geometry.ky, kind, m * sizeof(float), stream));
  TESSERA_RETURN_IF_ERROR(Scale(stream, static_cast<float>(2 * kPi / geometry.nx), x, m));
  TESSERA_RETURN_IF_ERROR(Scale(stream, static_cast<float>(2 * kPi / geometry.ny), y, m));
  if (three_d) {
    TESSERA_RETURN_IF_ERROR(CopyBytes(z, kind, geometry.kz, kind, m * sizeof(float), stream));
    TESSERA_RETURN_IF_ERROR(Scale(stream, static_cast<float>(2 * kPi / geometry.nz), z, m));
  }
  TESSERA_RETURN_IF_ERROR(op->type2_->SetPoints(m, x, y, z));
  TESSERA_RETURN_IF_ERROR(op->type1_->SetPoints(m, x, y, z));
  if (options.use_toeplitz) {
    nufft::ToeplitzOptions toeplitz_options;
    toeplitz_options.tolerance = options.nufft_tolerance;
    toeplitz_options.upsampling = options.nufft_upsampling;
    toeplitz_options.sign = -1;  // E's type-2 sign
    toeplitz_options.ntransforms = geometry.coils;
    toeplitz_options.mode = options.mode;
    TESSERA_ASSIGN_OR_RETURN(op->toeplitz_,
                             nufft::ToeplitzOperator<float>::Create(stream, modes, m, x, y, z,
                                                                    geometry.density_weights, toeplitz_options));
  }
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return op;
}

absl::StatusOr<double> SenseOperator::NormalScale() const {
  if (geometry_.density_weights == nullptr) return static_cast<double>(geometry_.points);
  return Sum(stream_, geometry_.density_weights, geometry_.points);
}

absl::Status SenseOperator::Forward(const std::complex<float>* x, std::complex<float>* kspace) {
  const SenseGeometry& g = geometry_;
  TESSERA_RETURN_IF_ERROR(ExpandCoils(stream_, g.coils, pixels(), g.maps, x, coil_images_));
  return type2_->Execute(kspace, coil_images_);
}

absl::Status SenseOperator::Adjoint(const std::complex<float>* kspace, std::complex<float>* x) {
  const SenseGeometry& g = geometry_;
  const MemoryKind kind = MemoryKindFor(stream_);
  TESSERA_RETURN_IF_ERROR(CopyBytes(coil_samples_, kind, kspace, kind,
                                    sizeof(std::complex<float>) * g.coils * g.points, stream_));
  if (g.density_weights != nullptr) {
    TESSERA_RETURN_IF_ERROR(WeightSamples(stream_, g.coils, g.points, g.density_weights, coil_samples_));
  }
  TESSERA_RETURN_IF_ERROR(type1_->Execute(coil_samples_, coil_images_));
  return CombineCoils(stream_, g.coils, pixels(), g.maps, coil_images_, x);
}

absl::Status SenseOperator::Normal(const std::complex<float>* x, std::complex<float>* out) {
  const SenseGeometry& g = geometry_;
  TESSERA_RETURN_IF_ERROR(ExpandCoils(stream_, g.coils, pixels(), g.maps, x, coil_images_));
  if (toeplitz_ != nullptr) {
    TESSERA_RETURN_IF_ERROR(toeplitz_->Apply(coil_images_, coil_normal_));
    return CombineCoils(stream_, g.coils, pixels(), g.maps, coil_normal_, out);
  }
  TESSERA_RETURN_IF_ERROR(type2_->Execute(coil_samples_, coil_images_));
  if (g.density_weights != nullptr) {
    TESSERA_RETURN_IF_ERROR(WeightSamples(stream_, g.coils, g.points, g.density_weights, coil_samples_));
  }
  TESSERA_RETURN_IF_ERROR(type1_->Execute(coil_samples_, coil_images_));
  return CombineCoils(stream_, g.coils, pixels(), g.maps, coil_images_, out);
}

}  // namespace mri
}  // namespace recon
}  // namespace tessera
