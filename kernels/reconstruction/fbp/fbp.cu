// CUDA backend of FBP/FDK (placeholder until the kernels land).
#include "kernels/reconstruction/fbp/fbp_backend.h"

namespace tessera {
namespace recon {
namespace fbp {
namespace cuda {

absl::StatusOr<std::unique_ptr<FbpBackend>> MakeBackend(FbpBackendConfig) {
  return absl::UnimplementedError("fbp: CUDA backend not built yet");
}

}  // namespace cuda
}  // namespace fbp
}  // namespace recon
}  // namespace tessera
