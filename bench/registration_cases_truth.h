// Ground truth for bench/registration_cases (issue 17): where the synthetic
// generator put each fixed point, so that a registration's map can be scored
// in millimetres against it, and label maps per label size.
//
// The generator (kernels/registration/pipeline/synthetic.h) samples the fixed image
// at pos(p) for each voxel p of the moving grid (before its crop and
// reorientation, which keep world positions, that grid is the fixed grid).
// So the true registration map sends the fixed point W q to W p with
// pos(p) = q (W: the fixed grid's index -> RAS mm). pos is recovered exactly
// by running the generator on coordinate images (index + 1 along each axis,
// plus a constant one that marks where all 8 trilinear corners are inside)
// with the invertible gamma intensity map and no acquisition effects; the
// seed draws the same motion and deformation whatever those settings.
#ifndef TESSERA_BENCH_REGISTRATION_CASES_TRUTH_H_
#define TESSERA_BENCH_REGISTRATION_CASES_TRUTH_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/ndarray.h"
#include "common/volume.h"
#include "kernels/registration/pipeline/synthetic.h"

namespace tessera::registration {

// The true map on the fixed grid: for each fixed voxel q, the moving point
// (RAS mm) it corresponds to, as a displacement x -> x + d(x): planar
// (nx, ny, nz, 3) float32 RAS mm; NaN where the generator saw outside.
absl::StatusOr<NDArray> TrueDisplacement(const Volume& fixed, const SyntheticOptions& synth);

// A registration's map on the fixed grid, R(x) = A(x + v(x)) (ANTs order),
// minus x: planar float32 RAS mm. `affine_ras` identity for elastix's
// deformation field (which already holds the whole transform).
absl::StatusOr<NDArray> MapDisplacement(const Geometry& fixed, const Mat4& affine_ras, const NDArray& v_ras);

// Error of `estimate` against `truth` (both from the functions above) over
// voxels labelled > 0 in `fixed_labels` where the truth is known: the mean
// vector (a systematic offset shows here), rms, and the rms split by the size
// of the voxel's label (< min_voxels: "small").
struct MapError {
  double mean_ras[3] = {0, 0, 0};
  double rms = 0, rms_small = 0, rms_large = 0;
  double p95 = 0;
  int64_t voxels = 0, voxels_small = 0;
  // rms over the voxels of labels of 1-29, 30-99, 100-299, 300-999 and
  // >= 1000 voxels (0 for an empty bin).
  double rms_by_size[5] = {0, 0, 0, 0, 0};
};
absl::StatusOr<MapError> CompareMaps(const NDArray& estimate, const NDArray& truth, const NDArray& fixed_labels,
                                     int64_t min_voxels);

// Mean Dice of several label maps against `fixed_labels` (same grid) per
// fixed-label size bin, as markdown rows: "| bin | labels | Dice ... |".
absl::StatusOr<std::string> DiceBySize(const NDArray& fixed_labels, const std::vector<NDArray>& maps,
                                       const std::vector<std::string>& names, const Geometry& geometry);

}  // namespace tessera::registration

#endif  // TESSERA_BENCH_REGISTRATION_CASES_TRUTH_H_
