// Overlap and surface-distance metrics between two label maps (segmentation
// quality after registration): Dice per label and its mean; robust Hausdorff
// distances HD95 / HD90 (and the plain maximum, HD100) between label surfaces,
// in mm. CPU only (label_metrics.cc), threaded over labels.
//
// Definitions, per label l (labels present in either map; 0 skipped when
// ignore_background):
//   A, B        voxels labelled l in map a, map b
//   Dice        2 |A n B| / (|A| + |B|)
//   surface(S)  voxels of S with at least one of their 6 face neighbours not in
//               S; neighbours outside the volume count as not in S
//   d_AB        for each surface(A) voxel, the Euclidean distance in mm
//               (voxel offsets times spacing_mm) to the nearest surface(B) voxel
//   HDp         max(percentile_p(d_AB), percentile_p(d_BA)); percentiles
//               interpolate linearly between order statistics (numpy's default),
//               as MONAI's compute_hausdorff_distance(percentile=p) does.
//   A label missing from one map has Dice 0 and HD = +infinity.
// Distances come from exact squared Euclidean distance transforms of each
// surface (Felzenszwalb & Huttenlocher's separable lower-envelope algorithm,
// anisotropic spacing), computed on the bounding box of A u B only; exact, and
// O(box voxels) per label instead of O(|surface A| * |surface B|).
#ifndef TESSERA_KERNELS_REGISTRATION_LABEL_METRICS_H_
#define TESSERA_KERNELS_REGISTRATION_LABEL_METRICS_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/ndarray.h"

namespace tessera {
namespace registration {

struct LabelMetricsOptions {
  std::array<double, 3> spacing_mm = {1.0, 1.0, 1.0};  // voxel size along x, y, z (> 0)
  bool ignore_background = true;                       // skip label 0
  bool hausdorff = true;                               // false: Dice only (HD fields left NaN)
};

struct LabelScore {
  int64_t label = 0;
  int64_t voxels_a = 0;      // |A|
  int64_t voxels_b = 0;      // |B|
  int64_t intersection = 0;  // |A n B|
  double dice = 0;
  double hd95_mm = 0;        // +inf when the label is missing from one map
  double hd90_mm = 0;
  double hd100_mm = 0;       // classic (maximum) symmetric Hausdorff distance
};

struct LabelMetrics {
  std::vector<LabelScore> labels;  // ascending label value
  double mean_dice = 0;            // over `labels` (NaN when there are none)
  double mean_hd95_mm = 0;         // over labels present in both maps (NaN when none)
  double mean_hd90_mm = 0;
};

// ComputeLabelMetrics() compares label maps a and b: host arrays of rank 3,
// the same shape, any integer dtype (uint8, int8, uint16, int16, int32), not
// necessarily the same one. Errors: INVALID_ARGUMENT (shape, dtype, device
// memory, spacing).
absl::StatusOr<LabelMetrics> ComputeLabelMetrics(const NDArray& a, const NDArray& b,
                                                 const LabelMetricsOptions& options = {});

namespace label_metrics_internal {
// Exact squared Euclidean distance transform (mm^2) of a binary volume:
// out[v] = min over sites s (sites[s] != 0) of |v - s|^2 with per-axis spacing;
// +inf everywhere when there are no sites. Exposed for tests.
void SquaredEdt(const uint8_t* sites, int64_t nx, int64_t ny, int64_t nz, const std::array<double, 3>& spacing,
                double* out);
// Linear-interpolation percentile (p in [0, 100]) of unsorted values; sorts them.
double Percentile(std::vector<double>& values, double p);
}  // namespace label_metrics_internal

}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_LABEL_METRICS_H_
