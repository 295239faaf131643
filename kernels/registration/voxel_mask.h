// The per-voxel weight of a masked registration metric (issue 34): a fixed
// grid voxel counts when it is inside the fixed mask and its mapped point is
// inside the moving mask (the moving mask sampled nearest neighbour through
// the current transform, GridSampleNearest). The registrar recomputes it when
// the transform changes and hands it to the metrics as a VoxelMask (types.h).
#ifndef TESSERA_KERNELS_REGISTRATION_VOXEL_MASK_H_
#define TESSERA_KERNELS_REGISTRATION_VOXEL_MASK_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "kernels/registration/types.h"
#include "kernels/registration/workspace.h"

namespace tessera {
namespace registration {

// out[v] = 1 when (fixed == nullptr or fixed[v] != 0) and (moving == nullptr
// or moving[v] != 0), else 0, for v in [0, n); returns the number of ones
// (copied to the host: the call synchronises the stream). Pointers in the
// stream's memory; out must not alias the inputs.
absl::StatusOr<int64_t> CombineMasks(const Stream& stream, const uint8_t* fixed, const int32_t* moving, int64_t n,
                                     uint8_t* out, Workspace* workspace = nullptr);

namespace cpu {
int64_t CombineMasks(const uint8_t* fixed, const int32_t* moving, int64_t n, uint8_t* out);
}  // namespace cpu

namespace cuda {
absl::StatusOr<int64_t> CombineMasks(const Stream& stream, const uint8_t* fixed, const int32_t* moving, int64_t n,
                                     uint8_t* out, Workspace* workspace);
}  // namespace cuda

}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_VOXEL_MASK_H_
