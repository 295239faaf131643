// Builds without CUDA: the device quality pass is unavailable.
#include "kernels/som/quality_device.h"

#if !TESSERA_WITH_CUDA
namespace tessera {
namespace som {
namespace cuda {

absl::StatusOr<QualityMetrics> ComputeQuality(const Stream&, const int64_t*, int64_t, const int32_t*, const int32_t*,
                                              const float*, const float*, const GridShape&, Adjacency,
                                              SomWorkspace&) {
  return absl::FailedPreconditionError("ComputeQuality: built without CUDA");
}

}  // namespace cuda
}  // namespace som
}  // namespace tessera
#endif
