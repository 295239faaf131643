#include "kernels/reconstruction/mri/cartesian_operator.h"

#include "absl/strings/str_cat.h"
#include "common/memory_kind_for.h"
#include "common/status.h"
#include "kernels/reconstruction/mri/coil_ops.h"
#include "kernels/reconstruction/vector_ops.h"

namespace tessera {
namespace recon {
namespace mri {

absl::StatusOr<std::unique_ptr<CartesianSenseOperator>> CartesianSenseOperator::Create(
    const Stream& stream, const CartesianGeometry& geometry) {
  if (geometry.nx < 2 || geometry.ny < 2 || geometry.nz < 1) {
    return absl::InvalidArgumentError(absl::StrCat("Cartesian SENSE operator: image ", geometry.nx, " x ",
                                                   geometry.ny, " x ", geometry.nz,
                                                   " (nx, ny must be >= 2, nz >= 1)"));
  }
  if (geometry.coils < 1) {
    return absl::InvalidArgumentError(absl::StrCat("Cartesian SENSE operator: coils = ", geometry.coils, " < 1"));
  }
  if (geometry.maps == nullptr || geometry.mask == nullptr) {
    return absl::InvalidArgumentError("Cartesian SENSE operator: coil maps or sampling mask are null");
  }
  std::unique_ptr<CartesianSenseOperator> op(new CartesianSenseOperator(stream, geometry));
  TESSERA_ASSIGN_OR_RETURN(op->fft_,
                           CenteredFft::Create(stream, {geometry.nx, geometry.ny, geometry.nz}, geometry.coils));
  TESSERA_ASSIGN_OR_RETURN(
      op->scratch_,
      Buffer::Allocate(MemoryKindFor(stream), op->kspace_size() * sizeof(std::complex<float>), stream.ordinal()));
  op->coil_images_ = static_cast<std::complex<float>*>(op->scratch_->data());
  return op;
}

absl::StatusOr<double> CartesianSenseOperator::NormalScale() const { return Sum(stream_, geometry_.mask, pixels()); }

absl::Status CartesianSenseOperator::Forward(const std::complex<float>* x, std::complex<float>* kspace) {
  const CartesianGeometry& g = geometry_;
  TESSERA_RETURN_IF_ERROR(ExpandCoils(stream_, g.coils, pixels(), g.maps, x, kspace));
  TESSERA_RETURN_IF_ERROR(fft_->Execute(kspace, -1));
  return WeightSamples(stream_, g.coils, pixels(), g.mask, kspace);
}

absl::Status CartesianSenseOperator::Adjoint(const std::complex<float>* kspace, std::complex<float>* x) {
  const CartesianGeometry& g = geometry_;
  const MemoryKind kind = MemoryKindFor(stream_);
  TESSERA_RETURN_IF_ERROR(
      CopyBytes(coil_images_, kind, kspace, kind, sizeof(std::complex<float>) * kspace_size(), stream_));
  TESSERA_RETURN_IF_ERROR(WeightSamples(stream_, g.coils, pixels(), g.mask, coil_images_));
  TESSERA_RETURN_IF_ERROR(fft_->Execute(coil_images_, +1));
  return CombineCoils(stream_, g.coils, pixels(), g.maps, coil_images_, x);
}

absl::Status CartesianSenseOperator::Normal(const std::complex<float>* x, std::complex<float>* out) {
  const CartesianGeometry& g = geometry_;
  TESSERA_RETURN_IF_ERROR(ExpandCoils(stream_, g.coils, pixels(), g.maps, x, coil_images_));
  TESSERA_RETURN_IF_ERROR(fft_->Execute(coil_images_, -1));
  TESSERA_RETURN_IF_ERROR(WeightSamples(stream_, g.coils, pixels(), g.mask, coil_images_));
  TESSERA_RETURN_IF_ERROR(fft_->Execute(coil_images_, +1));
  return CombineCoils(stream_, g.coils, pixels(), g.maps, coil_images_, out);
}

std::vector<float> SamplingMask(const std::complex<float>* kspace, int64_t voxels, int coils, int64_t* sampled) {
  std::vector<float> mask(voxels, 0.f);
  int64_t count = 0;
  for (int64_t p = 0; p < voxels; ++p) {
    for (int c = 0; c < coils; ++c) {
      if (kspace[p + voxels * c] != std::complex<float>(0, 0)) {
        mask[p] = 1;
        ++count;
        break;
      }
    }
  }
  if (sampled != nullptr) *sampled = count;
  return mask;
}

}  // namespace mri
}  // namespace recon
}  // namespace tessera
