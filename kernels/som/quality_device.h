// The SOM quality measures (quality.h) from BMU results in device memory, so
// training on CUDA needs no per-epoch download of three values per document
// (issue 37: 360 MB a pass at 29.9 M documents).
#ifndef TESSERA_KERNELS_SOM_QUALITY_DEVICE_H_
#define TESSERA_KERNELS_SOM_QUALITY_DEVICE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "kernels/som/quality.h"
#include "kernels/som/types.h"
#include "kernels/som/workspace.h"

namespace tessera {
namespace som {
namespace cuda {

// Same per-document terms as ComputeQuality (double), summed per block and
// then over blocks in a fixed order: deterministic, equal to the host's sums
// up to their order (~1e-15 relative); the topographic error and dead units
// are exact counts. Arguments as ComputeQuality's, in device memory; uses
// workspace slots 18 and 19. FAILED_PRECONDITION without CUDA.
absl::StatusOr<QualityMetrics> ComputeQuality(const Stream& stream, const int64_t* offsets, int64_t docs,
                                              const int32_t* bmu, const int32_t* second, const float* score,
                                              const float* sq_norms, const GridShape& grid, Adjacency adjacency,
                                              SomWorkspace& ws);

}  // namespace cuda
}  // namespace som
}  // namespace tessera

#endif  // TESSERA_KERNELS_SOM_QUALITY_DEVICE_H_
