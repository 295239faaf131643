// Argument checks and backend dispatch for MSE.
#include "kernels/registration/mse.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace tessera {
namespace registration {

absl::Status Mse(const Stream& stream, const float* fixed, const float* warped, Dims3 dims, float* loss,
                 float* grad_warped, Workspace* workspace, VoxelMask mask) {
  if (dims.nx <= 0 || dims.ny <= 0 || dims.nz <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("mse: dims must be positive, got ", DimsToString(dims)));
  }
  if (fixed == nullptr || warped == nullptr) return absl::InvalidArgumentError("mse: fixed or warped is null");
  if (mask.mask != nullptr && mask.count <= 0) return absl::InvalidArgumentError("mse: the mask holds no voxel");
  if (stream.backend() == Backend::kCpu) {
    const double value = cpu::Mse<float>(fixed, warped, dims, grad_warped, mask);
    if (loss != nullptr) *loss = static_cast<float>(value);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return cuda::Mse(stream, fixed, warped, dims, loss, grad_warped, workspace, mask);
#else
  (void)workspace;
  return absl::FailedPreconditionError(
      absl::StrCat("mse: CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
#endif
}

}  // namespace registration
}  // namespace tessera
