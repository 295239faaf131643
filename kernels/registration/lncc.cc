// Argument checks and backend dispatch for LNCC.
#include "kernels/registration/lncc.h"

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/status.h"

namespace tessera {
namespace registration {

absl::Status ValidateLnccArgs(const float* fixed, const float* warped, Dims3 dims, const LnccOptions& options) {
  if (dims.nx <= 0 || dims.ny <= 0 || dims.nz <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("lncc: dims must be positive, got ", DimsToString(dims)));
  }
  if (fixed == nullptr || warped == nullptr) return absl::InvalidArgumentError("lncc: fixed or warped is null");
  if (options.window < 1 || options.window % 2 == 0) {
    return absl::InvalidArgumentError(absl::StrCat("lncc: window must be odd and >= 1, got ", options.window));
  }
  if (!(options.eps >= 0.0)) return absl::InvalidArgumentError("lncc: eps must be >= 0");
  return absl::OkStatus();
}

namespace {
absl::Status ValidateLnccMask(VoxelMask mask) {
  if (mask.mask != nullptr && mask.count <= 0) return absl::InvalidArgumentError("lncc: the mask holds no voxel");
  return absl::OkStatus();
}

// The CPU backend's loss into the float the dispatchers store (a CPU
// stream's memory is host memory): the one place it is rounded.
absl::Status StoreCpuLoss(absl::StatusOr<double> value, float* loss) {
  TESSERA_RETURN_IF_ERROR(value.status());
  if (loss != nullptr) *loss = static_cast<float>(*value);
  return absl::OkStatus();
}

// The float-image CPU backend: the workspace's kept volumes, else fresh ones (the same bits).
absl::Status CpuLncc(const float* fixed, const float* warped, Dims3 dims, const LnccOptions& options, float* loss,
                     float* grad_warped, LnccWorkspace* workspace, VoxelMask mask) {
  if (workspace == nullptr) {
    return StoreCpuLoss(cpu::Lncc<float>(fixed, warped, dims, options, grad_warped, mask), loss);
  }
  return StoreCpuLoss(workspace->host.Lncc(fixed, warped, dims, options, grad_warped, mask), loss);
}

#if TESSERA_WITH_CUDA
Workspace* DeviceWorkspace(LnccWorkspace* workspace) {
  return workspace != nullptr ? &workspace->device : nullptr;
}
#endif
}  // namespace

absl::Status Lncc(const Stream& stream, const float* fixed, const float* warped, Dims3 dims,
                  const LnccOptions& options, float* loss, float* grad_warped, LnccWorkspace* workspace,
                  VoxelMask mask) {
  TESSERA_RETURN_IF_ERROR(ValidateLnccArgs(fixed, warped, dims, options));
  TESSERA_RETURN_IF_ERROR(ValidateLnccMask(mask));
  if (stream.backend() == Backend::kCpu) return CpuLncc(fixed, warped, dims, options, loss, grad_warped, workspace, mask);
#if TESSERA_WITH_CUDA
  return cuda::Lncc(stream, fixed, warped, dims, options, loss, grad_warped, DeviceWorkspace(workspace), nullptr,
                    mask);
#else
  return absl::FailedPreconditionError(
      absl::StrCat("lncc: CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
#endif
}

absl::Status LnccWithCoefficients(const Stream& stream, const float* fixed, const float* warped, Dims3 dims,
                                  const LnccOptions& options, float* loss, float* grad_warped, float* coefficients,
                                  LnccWorkspace* workspace, VoxelMask mask) {
  TESSERA_RETURN_IF_ERROR(ValidateLnccArgs(fixed, warped, dims, options));
  TESSERA_RETURN_IF_ERROR(ValidateLnccMask(mask));
  if (grad_warped != nullptr && coefficients == nullptr) {
    return absl::InvalidArgumentError("lncc: coefficients (3 volumes) are needed for the gradient");
  }
  // The CPU reference keeps its own host volumes (host memory is not the budget).
  if (stream.backend() == Backend::kCpu) return CpuLncc(fixed, warped, dims, options, loss, grad_warped, workspace, mask);
#if TESSERA_WITH_CUDA
  return cuda::Lncc(stream, fixed, warped, dims, options, loss, grad_warped, DeviceWorkspace(workspace), coefficients,
                    mask);
#else
  return absl::FailedPreconditionError(
      absl::StrCat("lncc: CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
#endif
}

absl::Status LnccHalfFixed(const Stream& stream, const Half* fixed, const float* warped, Dims3 dims,
                           const LnccOptions& options, float* loss, float* grad_warped, BFloat16* coefficients,
                           LnccWorkspace* workspace, VoxelMask mask) {
  TESSERA_RETURN_IF_ERROR(ValidateLnccArgs(reinterpret_cast<const float*>(fixed), warped, dims, options));
  TESSERA_RETURN_IF_ERROR(ValidateLnccMask(mask));
  if (stream.backend() == Backend::kCpu) {  // the CPU reference needs no coefficient volumes
    if (workspace == nullptr) {
      return StoreCpuLoss(cpu::LnccHalfFixed(fixed, warped, dims, options, grad_warped, mask), loss);
    }
    return StoreCpuLoss(workspace->host.LnccHalfFixed(fixed, warped, dims, options, grad_warped, mask), loss);
  }
  if (grad_warped != nullptr && coefficients == nullptr) {
    return absl::InvalidArgumentError("lncc (fp16 fixed): coefficients (3 bf16 volumes) are needed for the gradient");
  }
#if TESSERA_WITH_CUDA
  return cuda::LnccHalfFixed(stream, fixed, warped, dims, options, loss, grad_warped, coefficients,
                             DeviceWorkspace(workspace), mask);
#else
  return absl::FailedPreconditionError(
      absl::StrCat("lncc: CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
#endif
}

}  // namespace registration
}  // namespace tessera
