#include "common/status.h"
#include "kernels/fingerprint/mcc.h"
namespace tessera {
namespace fingerprint {
namespace cuda {
absl::StatusOr<std::vector<MccTemplate>> BuildMccTemplates(const Stream&, const std::vector<std::vector<MinutiaPoint>>&,
                                                           const MccParams&) {
  return absl::UnimplementedError("todo");
}
}  // namespace cuda
}  // namespace fingerprint
}  // namespace tessera
