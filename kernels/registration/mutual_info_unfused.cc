// MattesMiUnfused without CUDA: every entry point reports the missing backend.
// With CUDA the class is implemented in mutual_info_unfused.cu.
#include "kernels/registration/mutual_info_unfused.h"

#if !TESSERA_WITH_CUDA
namespace tessera {
namespace registration {

absl::StatusOr<std::unique_ptr<MattesMiUnfused>> MattesMiUnfused::Create(const Stream&) {
  return absl::FailedPreconditionError("MattesMiUnfused: built without CUDA");
}
MattesMiUnfused::~MattesMiUnfused() = default;
size_t MattesMiUnfused::DeviceBytes(int64_t n, int bins, bool with_gradient) {
  return size_t(with_gradient ? 4 : 2) * size_t(bins) * size_t(n) * sizeof(float);
}
void MattesMiUnfused::ReleaseTables() {}
absl::StatusOr<MattesMiResult> MattesMiUnfused::Run(const NDArray&, const NDArray&, const NDArray*,
                                                    const MattesMiOptions&, NDArray*) {
  return absl::FailedPreconditionError("MattesMiUnfused: built without CUDA");
}

}  // namespace registration
}  // namespace tessera
#endif
