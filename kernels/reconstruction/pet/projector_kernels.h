// Backend kernels of the PET projector (PetProjector calls them; list-mode
// reuses them). All pointers, those inside ProjectorParams included, are in
// the backend's memory: host for cpu::, device for cuda::. Ranges and layouts
// are those of lor_math.h: y is the compact range of `range` (cols * rows * K
// floats per view, views in range order).
#ifndef TESSERA_KERNELS_RECONSTRUCTION_PET_PROJECTOR_KERNELS_H_
#define TESSERA_KERNELS_RECONSTRUCTION_PET_PROJECTOR_KERNELS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "common/device.h"
#include "kernels/reconstruction/pet/lor_math.h"

namespace tessera {
namespace recon {
namespace pet {

inline int64_t RangeSize(const ProjectorParams& p, const ViewRange& r) {
  return static_cast<int64_t>(p.cols) * p.rows * p.tof.bins * r.count;
}
inline int64_t GridSize(const GridParams& g) { return static_cast<int64_t>(g.n[0]) * g.n[1] * g.n[2]; }

namespace cpu {
// y = A x (times the attenuation factors), threaded over sinogram elements.
void Forward(const ProjectorParams& p, const ViewRange& range, const float* image, float* y);
// image = A^T y, ray-driven: each thread walks a contiguous share of the LORs
// into its own volume, the shares summed in thread order (deterministic for a
// given thread count).
void BackScatter(const ProjectorParams& p, const ViewRange& range, const float* y, float* image);
// image = A^T y, voxel-driven (GatherVoxel): independent of the thread count.
void BackGather(const ProjectorParams& p, const ViewRange& range, const float* y, float* image);
}  // namespace cpu

namespace cuda {
absl::Status Forward(const Stream& stream, const ProjectorParams& p, const ViewRange& range, const float* image,
                     float* y);
// One thread per LOR, atomicAdd into the volume (order varies run to run).
absl::Status BackScatter(const Stream& stream, const ProjectorParams& p, const ViewRange& range, const float* y,
                         float* image);
// One thread per voxel, fixed order: bit-identical run to run.
absl::Status BackGather(const Stream& stream, const ProjectorParams& p, const ViewRange& range, const float* y,
                        float* image);
}  // namespace cuda

}  // namespace pet
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_PET_PROJECTOR_KERNELS_H_
