// From a CtGeometry to the per-view constants of FBP/FDK (fbp_math.h).
//
// Scale, derived from Kak & Slaney ch. 3 and checked by the analytic tests
// (a uniform disc of value 1 reconstructs to ~1 in its centre):
//   parallel:  f(x) = sum_p dtheta_p Q_p(x),  Q = (p * h) filtered with the
//              pixel width tau_p perpendicular to the rays; dtheta_p is the
//              view's share of [0, pi): half the angular gap to its two
//              neighbours, ray directions taken modulo pi (so pi / num_views
//              for even angles over [0, pi), and a 2 pi scan counts each
//              direction twice at half weight).
//   fan, cone: f(x) = 1/2 sum_p dbeta_p DSO_p DSD_p / L_p(x)^2 Q_p(x),  Q the
//              ramp-filtered cosine-weighted projection on the physical
//              detector (tau = |u|); L the voxel's distance from the source
//              along the detector normal; DSO the source's distance from the
//              rotation axis (world z through the origin, as ASTRA's cone
//              and cone_vec assume); dbeta_p as above over [0, 2 pi) (2 pi /
//              num_views for a full even scan). The 1/2: a full scan measures
//              every line twice. This is FDK's weighting, written in terms of
//              the view vectors so detector offsets and any DSO/DSD work.
// Short scans and offset detectors: redundancy_weights.h (Parker / Wang
// weights per view and detector column, applied with the pre-weight).
// Requirements: at least pi (parallel) or pi + fan angle (fan, cone) covered; for fan and cone
// the detector should face the source (u perpendicular to the central ray);
// every voxel must lie in front of the source.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_FBP_FBP_SETUP_H_
#define TESSERA_KERNELS_RECONSTRUCTION_FBP_FBP_SETUP_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/reconstruction/fbp/fbp_math.h"
#include "kernels/reconstruction/geometry.h"

namespace tessera {
namespace recon {
namespace fbp {

struct FbpSetup {
  std::vector<PreWeightView> pre;      // one per view
  std::vector<BackprojectView> back;   // one per view
  // views x det_cols redundancy weights multiplied with the pre-weight;
  // empty: none (full scan, centred detector, or weights off).
  std::vector<float> column_weights;
  // Derivative short-scan method (short_scan_derivative.h): one entry per
  // view, and views x det_cols weights multiplied in after the filter (`pre`
  // is then unused). Empty for the ramp (FDK) method.
  std::vector<DerivativeView> derivative;
  std::vector<float> post_weights;
  std::string redundancy;              // what was applied (RedundancyWeights::description)
  // The geometry the filter and back projection work on: the input's, or
  // for an offset detector its detector widened by zero columns
  // (redundancy_weights.h); the input's column c is column col0 + c here.
  CtGeometry geometry;
  int64_t input_cols = 0;
  int64_t col0 = 0;
};

// Validates the geometry (Validate), that the volume lies in front of every
// source, and that the scan is not limited-angle; INVALID_ARGUMENT naming
// the view or the gap otherwise. `redundancy_weights` false: no Parker or
// offset-detector weights (MakeRedundancyWeights' `enabled`).
absl::StatusOr<FbpSetup> MakeFbpSetup(const CtGeometry& geometry, bool redundancy_weights = true);

// The per-view constants `pre` and `back` of setup->geometry (its volume and
// views; `shares` one per view): INVALID_ARGUMENT when a volume corner lies
// behind a source.
absl::Status ComputeViewConstants(const std::vector<double>& shares, FbpSetup* setup);

// Each view's share of the angular period (pi for parallel beams, 2 pi for
// fan and cone), from the angles `angles` (radians, any order): half the gap
// to the previous plus half the gap to the next angle around the circle.
std::vector<double> AngularWeights(const std::vector<double>& angles, double period);

}  // namespace fbp
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_FBP_FBP_SETUP_H_
