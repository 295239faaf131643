// Argument checks, scratch and backend dispatch of SENSE unfolding.
#include "kernels/reconstruction/mri/sense_unfold.h"

#include <cmath>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/memory_kind_for.h"
#include "common/status.h"
#include "kernels/reconstruction/linalg/batched_cholesky.h"

namespace tessera {
namespace recon {
namespace mri {

absl::Status CheckSenseShape(const SenseShape& shape) {
  if (shape.nx < 1 || shape.ny < 1) {
    return absl::InvalidArgumentError(absl::StrCat("SENSE: image ", shape.nx, " x ", shape.ny, " is empty"));
  }
  if (shape.coils < 1) return absl::InvalidArgumentError(absl::StrCat("SENSE: coils = ", shape.coils, " < 1"));
  if (shape.reduction < 1 || shape.reduction > kMaxSenseReduction) {
    return absl::InvalidArgumentError(
        absl::StrCat("SENSE: reduction = ", shape.reduction, " is not in [1, ", kMaxSenseReduction, "]"));
  }
  if (shape.axis != 0 && shape.axis != 1) {
    return absl::InvalidArgumentError(absl::StrCat("SENSE: axis = ", shape.axis, " is not 0 or 1"));
  }
  const int64_t n = shape.axis == 0 ? shape.nx : shape.ny;
  if (n % shape.reduction != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("SENSE: axis ", shape.axis, " size ", n, " is not divisible by reduction ", shape.reduction));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> SenseUnfold(const Stream& stream, const SenseShape& shape, float lambda,
                                    const std::complex<float>* maps, const std::complex<float>* aliased,
                                    std::complex<float>* image) {
  TESSERA_RETURN_IF_ERROR(CheckSenseShape(shape));
  if (!(lambda >= 0) || !std::isfinite(lambda)) {
    return absl::InvalidArgumentError(absl::StrCat("SENSE: lambda = ", lambda, " is not a finite value >= 0"));
  }
  if (maps == nullptr || aliased == nullptr || image == nullptr) {
    return absl::InvalidArgumentError("SENSE: maps, aliased or image is null");
  }
  const int rr = shape.reduction;
  const int64_t batch = shape.aliased_pixels();
  const bool cuda = stream.backend() == Backend::kCuda;
  const MemoryKind kind = MemoryKindFor(stream);
  const size_t complex_values = static_cast<size_t>(batch) * (rr * rr + rr);
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> scratch,
                           Buffer::Allocate(kind, complex_values * sizeof(std::complex<float>), stream.ordinal()));
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> info_buffer,
                           Buffer::Allocate(kind, batch * sizeof(int), stream.ordinal()));
  auto* normal = static_cast<std::complex<float>*>(scratch->data());
  std::complex<float>* rhs = normal + batch * rr * rr;  // solved in place
  int* info = static_cast<int*>(info_buffer->data());

  if (cuda) {
#if TESSERA_WITH_CUDA
    TESSERA_RETURN_IF_ERROR(cuda::FormSenseNormalEquations(stream, shape, maps, aliased, normal, rhs));
#else
    return absl::FailedPreconditionError(
        absl::StrCat("SENSE: CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
#endif
  } else {
    cpu::FormSenseNormalEquations(shape, maps, aliased, normal, rhs);
  }
  TESSERA_RETURN_IF_ERROR(linalg::BatchedCholeskySolve(stream, {batch, rr, 1}, lambda, normal, rhs, rhs, info));
  if (cuda) {
#if TESSERA_WITH_CUDA
    TESSERA_RETURN_IF_ERROR(cuda::ScatterSenseSolution(stream, shape, rhs, image));
#endif
  } else {
    cpu::ScatterSenseSolution(shape, rhs, image);
  }
  std::vector<int> host_info(batch);
  TESSERA_RETURN_IF_ERROR(
      CopyBytes(host_info.data(), MemoryKind::kHost, info, kind, batch * sizeof(int), stream));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  int64_t failed = 0;
  for (int v : host_info) failed += v != 0;
  return failed;
}

}  // namespace mri
}  // namespace recon
}  // namespace tessera
