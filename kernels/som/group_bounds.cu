// CUDA group-bounded BMU search (group_bounds.h). Work in progress.
#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "kernels/som/group_bounds.h"

namespace tessera {
namespace som {
namespace cuda {

absl::Status FindBmusGroupBounded(const Stream&, const DocumentSet&, const CodebookView&, const BmuOutput&,
                                  const GroupBoundsView&, const GroupDriftView*, SomWorkspace&, const BmuHints&,
                                  GroupSearchStats*) {
  return absl::UnimplementedError("FindBmusGroupBounded: no CUDA version yet");
}

absl::Status GroupNormChange(const Stream&, const float*, const float*, int64_t, const GroupDriftView&) {
  return absl::UnimplementedError("GroupNormChange: no CUDA version yet");
}

}  // namespace cuda
}  // namespace som
}  // namespace tessera
