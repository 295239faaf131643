// The gigavoxel bench's label scoring in a bounded host footprint: labels are
// resampled and warped voxel by voxel with WarpLabels' exact arithmetic
// (sampler_math.h on the CPU, which the CUDA sampler matches bit for bit) and
// scored as per-label counts over z-slabs, so no whole int32 map, no u = L v
// copy of the field and no fixed label map is ever held: at 1800^3 the scoring
// adds the moving labels on the grid (1 B/voxel) to the caller's field.
#ifndef TESSERA_BENCH_GIGAVOXEL_LABEL_SCORING_H_
#define TESSERA_BENCH_GIGAVOXEL_LABEL_SCORING_H_

#include <array>
#include <cstdint>

#include "absl/status/statusor.h"
#include "common/ndarray.h"
#include "common/volume.h"
#include "kernels/registration/sampler_math.h"
#include "kernels/registration/pipeline/label_dice.h"
#include "kernels/registration/pipeline/space.h"

namespace tessera::registration {

// Nearest-neighbour sample of a host label map at output voxel (i, j, k) of
// `out`: labels(T(x + v(x))) with zeros padding, computed as WarpLabels
// (registrar.cc) computes it for the whole grid. `labels` (uint8 or int32) and
// `displacement_ras` (planar (nx, ny, nz, 3) float32 on `out`, may be null)
// must outlive the sampler.
class NearestLabelSampler {
 public:
  static absl::StatusOr<NearestLabelSampler> Make(const Volume& labels, const GridSpace& out, const Mat4& affine_ras,
                                                  const NDArray* displacement_ras);
  int32_t At(int64_t i, int64_t j, int64_t k) const;

 private:
  NearestLabelSampler() = default;
  SamplerGeometry<float> geometry_{};
  float affine_[12] = {};
  Mat3 l_{};  // RAS mm -> normalized label-grid displacement
  const float* v_ = nullptr;
  int64_t out_voxels_ = 0;
  const uint8_t* u8_ = nullptr;
  const int32_t* i32_ = nullptr;
};

// `source` resampled onto `grid` (nearest: WarpLabels with the identity) as
// uint8, filled by z-slabs; INVALID_ARGUMENT naming a label outside 0..255.
// `source` must be uint8 or int32.
absl::StatusOr<NDArray> ResampleLabelsUint8(const Volume& source, const GridSpace& grid);

struct LabelScores {
  DiceMeans before, after;  // identity vs `affine_ras` + `displacement_ras`
};

// ComputeDiceMeans(fixed labels, WarpLabels(moving_labels, ...)) for the
// identity and for the registration's transform, by z-slabs: the fixed labels
// come from `source_fixed_labels` resampled on `fixed_grid` voxel by voxel.
// moving_labels: uint8 or int32 on any grid. Equal to the whole-volume path
// exactly (bench/gigavoxel_label_scoring_test.cc).
absl::StatusOr<LabelScores> ScoreLabelsBySlab(const Volume& source_fixed_labels, const Volume& moving_labels,
                                              const GridSpace& fixed_grid, const Mat4& affine_ras,
                                              const NDArray* displacement_ras);

}  // namespace tessera::registration

#endif  // TESSERA_BENCH_GIGAVOXEL_LABEL_SCORING_H_
