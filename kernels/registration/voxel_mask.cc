// Argument checks and backend dispatch for CombineMasks.
#include "kernels/registration/voxel_mask.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace tessera {
namespace registration {

absl::StatusOr<int64_t> CombineMasks(const Stream& stream, const uint8_t* fixed, const int32_t* moving, int64_t n,
                                     uint8_t* out, Workspace* workspace) {
  if (n <= 0 || out == nullptr) return absl::InvalidArgumentError("combine masks: empty volume or null output");
  if (stream.backend() == Backend::kCpu) return cpu::CombineMasks(fixed, moving, n, out);
#if TESSERA_WITH_CUDA
  return cuda::CombineMasks(stream, fixed, moving, n, out, workspace);
#else
  (void)workspace;
  return absl::FailedPreconditionError(
      absl::StrCat("combine masks: CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
#endif
}

}  // namespace registration
}  // namespace tessera
