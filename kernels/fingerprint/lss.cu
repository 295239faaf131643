#include "common/status.h"
#include "kernels/fingerprint/lss.h"
namespace tessera {
namespace fingerprint {
namespace cuda {
absl::Status ScoreGalleryAsync(const Stream&, const LssProbe&, const MccDeviceGallery&, MccScore, const LssConstants&,
                               float*) {
  return absl::UnimplementedError("todo");
}
}  // namespace cuda
}  // namespace fingerprint
}  // namespace tessera
