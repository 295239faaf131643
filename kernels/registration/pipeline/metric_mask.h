// Issue 34: fixed and moving masks for every metric of a registration
// (RegistrationOptions::fixed_mask / moving_mask). A voxel x of a level's
// fixed grid counts when the fixed mask is set at x's physical point and the
// moving mask at its mapped point T(x + v(x)), both sampled nearest
// neighbour:
// - per level (once per stage), the fixed mask is resampled onto the level's
//   fixed grid (uint8) and the moving mask onto the level's moving grid
//   (int32), at each voxel's physical point;
// - per evaluation, the moving mask is sampled through the current
//   transform with the moving image's own sampler arguments
//   (GridSampleNearest: the same affine, displacement and grid jitter) and
//   combined with the fixed one (CombineMasks); the weight is a constant of
//   the gradient, as in ANTs and elastix.
// Only a fixed mask: no per-evaluation work. Memory when a moving mask is
// given: 1 B (fixed mask) + 4 B (the moving level's mask) + 5 B (sampled and
// combined) per voxel of the level.
// An empty combined mask is FAILED_PRECONDITION naming the level.
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_METRIC_MASK_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_METRIC_MASK_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "common/ndarray.h"
#include "common/volume.h"
#include "kernels/registration/grid_sampler.h"
#include "kernels/registration/pipeline/registrar.h"
#include "kernels/registration/pipeline/space.h"
#include "kernels/registration/types.h"
#include "kernels/registration/workspace.h"

namespace tessera::registration {

// True when `options` carry a fixed or a moving mask.
bool HasMasks(const RegistrationOptions& options);

// INVALID_ARGUMENT for masks that are not 3-D host volumes, or with a
// residency that does not support them yet (CheckMaskResidency): they are
// refused, never ignored.
absl::Status CheckMasks(const RegistrationOptions& options);
// INVALID_ARGUMENT when `options` (whatever their masks) run sharded (shards
// > 1, a process group) or forced out of core, which have no masks yet.
absl::Status CheckMaskResidency(const RegistrationOptions& options);

// "masks: fixed NxNxN (V voxels inside), moving NxNxN (V voxels inside); the
// metric counts a voxel inside both": the run's log line.
std::string MasksLogLine(const RegistrationOptions& options);

// `mask` (nonzero = inside; any dtype and grid) at the physical point of
// every voxel of `grid`, nearest neighbour (round half to even), 0 outside
// the mask's extent: a host array of `grid`'s shape, uint8 or int32 (1 inside).
absl::StatusOr<NDArray> ResampleMaskNearest(const Volume& mask, const GridSpace& grid, DType dtype);

class MetricMask {
 public:
  MetricMask(const Stream& stream, const RegistrationOptions& options);
  bool active() const { return fixed_ != nullptr || moving_ != nullptr; }

  // Enters a level: its masks are resampled on first use and kept.
  absl::Status SetLevel(int factor, const GridSpace& fixed_space, const GridSpace& moving_space);

  // The voxels that count at the current level for the moving image sampled
  // with `args` (its affine, displacement and jitter; image_dims the moving
  // level's); combined() holds them as a uint8 array.
  absl::StatusOr<VoxelMask> Update(const GridSampleArgs& args);
  const NDArray& combined() const;

  // The CPU backend's sampled linear iterations: `count` voxel indices drawn
  // (RandomVoxelSubset's rule) among the fixed-mask voxels of the level.
  absl::StatusOr<std::vector<int64_t>> DrawInsideFixedMask(int64_t count, uint64_t seed);
  // out[k] = 1 when the moving mask is set at the nearest moving-level voxel
  // of sample points[k] mapped by the sampler affine (host; 12 floats, null
  // = identity), else 0; returns the number of ones. Every point is inside
  // without a moving mask.
  int64_t SampleMovingMask(const float* affine, const std::vector<int64_t>& points, uint8_t* out) const;

 private:
  struct LevelMasks {
    int factor = 1;
    Dims3 fixed_dims, moving_dims;
    NDArray fixed;   // uint8 on the fixed level grid (stream memory); empty without a fixed mask
    NDArray moving;  // int32 on the moving level grid (stream memory); empty without a moving mask
    int64_t fixed_count = 0;
    std::vector<int64_t> inside;  // host indices inside the fixed mask (sampled iterations; lazy)
  };

  const Stream& stream_;
  std::shared_ptr<const Volume> fixed_, moving_;
  std::vector<std::unique_ptr<LevelMasks>> levels_;
  LevelMasks* level_ = nullptr;
  NDArray sampled_, combined_;  // per evaluation, the current level's size
  Workspace workspace_;
};

}  // namespace tessera::registration

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_METRIC_MASK_H_
