// Which rays a scan measures more than once, and how FBP/FDK weights them so
// that every line counts once (issue 36): per view its share of the angular
// integral, and for fan and cone beams per (view, detector column) a weight
// multiplied into the projection before filtering.
//
// Fan and cone beams (source angle beta about the z axis, fan angle gamma of
// a column measured counter-clockwise from the source->axis direction in the
// xy plane; the ray (beta, gamma) is measured again at
// (beta + pi + 2 gamma, -gamma)):
//   - full scan (no angular gap over 3x the mean step), centred detector:
//     no weights (FBP's 1/2 accounts for every line being seen twice);
//   - full scan, offset detector (the detector reaches further from the axis
//     on one side, rho_short < rho_long, rho = R sin gamma the ray's distance
//     from the axis): Wang's (2002) smooth weighting over the overlap,
//     w = sin^2(pi/4 (1 + s rho / rho_short)) for |rho| < rho_short, 1 beyond it
//     on the long side (rays seen once), with s = +-1 the long side; times 2.
//     w(rho) + w(-rho) = 1, and a conjugate ray has -rho whatever the source
//     radius, so each line sums to 2 (the full scan's count). The detector
//     is widened with zero columns on the short side until it is symmetric
//     (as RTK's DisplacedDetectorImageFilter does): the ramp-filtered
//     projection reaches past the measured edge, and voxels beyond the
//     short side's reach project there (cutting it off biases them);
//   - short scan: the views cover an arc B (first to last view plus one mean
//     step) with pi + 2 delta <= B < 2 pi, delta the half fan angle of the
//     detector: Parker's (1982) weights, with delta' = (B - pi) / 2 >= delta
//     so an over-scan keeps smooth weights (b = beta - start of the arc):
//       sin^2(pi/4 b / (delta' - gamma))               0 <= b < 2 delta' - 2 gamma
//       1                                              ... <= pi - 2 gamma
//       sin^2(pi/4 (pi + 2 delta' - b) / (delta' + gamma))  ... <= pi + 2 delta'
//     times 2 (as TIGRE and ASTRA), so a short scan's image has the full
//     scan's scale; B < pi + 2 delta is a limited-angle scan: refused (FBP
//     cannot fill the missing lines; use an iterative method).
//   - an offset detector on a short scan is refused.
// Parallel beams: directions modulo pi; a scan over [0, pi) is complete,
// over (pi, 2 pi) the redundant views (the same lines seen from the other
// side) share their directions' weight (each view gets half the gap to its
// neighbours among all directions folded onto [0, pi), so a doubled
// direction counts half each); under pi is limited angle: refused. No column
// weights.
// `enabled` false ("none") keeps the per-view shares of the scanned arc but
// no Parker or offset-detector weights: the unweighted result.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_FBP_REDUNDANCY_WEIGHTS_H_
#define TESSERA_KERNELS_RECONSTRUCTION_FBP_REDUNDANCY_WEIGHTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/reconstruction/geometry.h"

namespace tessera {
namespace recon {
namespace fbp {

struct RedundancyWeights {
  // Each view's share of the angular integral (radians): over pi for
  // parallel beams, over 2 pi for fan and cone (a short scan's views share
  // its arc, not the missing part).
  std::vector<double> shares;
  // views x (det_cols + pad_columns) (view-major), multiplied into every
  // detector row of the view before filtering; empty when no ray needs
  // weighting.
  std::vector<float> column_weights;
  // Offset detector: zero columns added on the short side (before column 0
  // when pad_low, after the last otherwise); column_weights cover them.
  int64_t pad_columns = 0;
  bool pad_low = false;
  // What was applied, for the result's geometry text, e.g.
  // "short scan 220 deg (fan 18.3 deg): Parker weights".
  std::string description;
};

// INVALID_ARGUMENT for a limited-angle scan or an offset detector on a short
// scan. `projection` is assumed valid (geometry.h Validate).
absl::StatusOr<RedundancyWeights> MakeRedundancyWeights(const ProjectionGeometry& projection, bool enabled);

// Parker's weight (without the factor 2) of the ray at arc position b with
// fan angle gamma, for an arc of pi + 2 delta (see above).
double ParkerWeight(double b, double gamma, double delta);

// Wang's offset-detector weight (without the factor 2) of the ray at signed
// distance rho from the axis; overlap half-width rho_short, long side `side`
// (+1 or -1).
double OffsetDetectorWeight(double rho, double rho_short, int side);

}  // namespace fbp
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_FBP_REDUNDANCY_WEIGHTS_H_
