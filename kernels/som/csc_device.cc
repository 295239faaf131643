// Builds without CUDA: TransposeCsr is unavailable (the host path is BuildCsc).
#include "kernels/som/csc_device.h"

#if !TESSERA_WITH_CUDA
namespace tessera {
namespace som {
namespace cuda {

absl::Status TransposeCsr(const Stream&, int64_t, int64_t, int64_t, const int64_t*, const int32_t*, int64_t*,
                          int32_t*) {
  return absl::FailedPreconditionError("TransposeCsr: built without CUDA");
}

}  // namespace cuda
}  // namespace som
}  // namespace tessera
#endif
