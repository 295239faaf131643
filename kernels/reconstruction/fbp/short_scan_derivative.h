// The derivative + Hilbert filtering of fan and cone beams with the
// redundancy weight applied after the filter (FbpOptions::short_scan =
// kDerivative, issue 36).
//
// Parker's weights multiply the projections before the ramp filter, so
// each conjugate pair must be weighted along whole detector rows, which a
// cone beam's tilted rows do not allow: a short-scan FDK loses the full
// scan's cancellation of the cone-beam error (bench/results/
// 2026-12-07-cpu-ct-short-scan.md). Splitting the ramp into a derivative
// along the orbit and a Hilbert filter moves the weight after the filter,
// where it may depend on the ray through each voxel:
//   f(x) = 1 / (2 pi) integral dlambda w(lambda, u*) / L(x)
//          (1 / pi) p.v. integral du' (D / r(u')) g_D(lambda, u', v*) / (u* - u')
// Noo, Defrise, Clackdoyle & Kudo, "Image reconstruction from fan-beam
// projections on less than a short scan", Phys. Med. Biol. 47:2525 (2002)
// (exact in 2-D for any w with w(ray) + w(conjugate ray) = 1), extended to
// the circular cone beam FDK-style (rows filtered as detector rows) by Noo &
// Heuscher, Proc. SPIE 4684 (2002) and Yu & Wang, "Feldkamp-type VOI
// reconstruction from super-short-scan cone-beam data", Med. Phys. 31:1357
// (2004). g_D: fbp_math.h DerivativeSample (the flat-detector chain rule of
// Noo, Pack & Heuscher, Phys. Med. Biol. 48:3787 (2003)); (u*, v*) the
// voxel's detector position, L its distance from the source along the
// detector normal, D the source-detector distance, r the ray's length to
// its pixel. Back projection weight 1 / L (FDK: 1 / L^2).
//
// Discretisation: on the input's views and pixels (fbp_math.h
// DerivativeTerms): dg/dlambda by centred differences of neighbouring views
// (one-sided at a short scan's ends), and the dominant du dg/du part through
// the ramp filter (H d/du = 2 pi Ramp), so edges are filtered as sharply as
// by FDK. (Noo et al.'s 2 x 2 differences at half samples, tried first, cost
// 1.4x the ramp FBP's NRMSE on a 2-D full scan.) The integral over lambda
// is the view-share sum of redundancy_weights.h.
// Weight (of the form Noo et al. 2002 propose): w(b, gamma) = c(b) / (c(b) + c(b_c)),
// b the arc position, gamma the ray's fan angle in the xy plane (as
// redundancy_weights.h), b_c = b + pi + 2 gamma (or b - pi + 2 gamma) its
// conjugate's position, c(b) a window over the arc rising as sin^2 from 0
// over `smoothing` at each end (c = 0 off the arc, so a ray whose
// conjugate was not measured gets w = 1). Full scans (and redundancy
// weights "none"): w = 1/2.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_FBP_SHORT_SCAN_DERIVATIVE_H_
#define TESSERA_KERNELS_RECONSTRUCTION_FBP_SHORT_SCAN_DERIVATIVE_H_

#include "absl/status/statusor.h"
#include "kernels/reconstruction/fbp/fbp_setup.h"
#include "kernels/reconstruction/geometry.h"

namespace tessera {
namespace recon {
namespace fbp {

// The setup of the derivative method for a fan or cone geometry: the ramp
// path's (MakeFbpSetup without redundancy weights) plus `derivative` and
// `post_weights` (views x det_cols). INVALID_ARGUMENT for a parallel beam, a
// limited-angle scan, an offset detector, or views that are not a circular
// orbit about z (each view the previous one rotated about z).
absl::StatusOr<FbpSetup> MakeDerivativeFbpSetup(const CtGeometry& geometry, bool redundancy_weights,
                                                double smoothing_deg);

// Noo's window c(b) on the arc [0, arc] with sin^2 ramps of width
// `smoothing` (radians; at most arc / 4).
double NooArcWindow(double b, double arc, double smoothing);

// The weight of the ray at arc position b with fan angle gamma on an arc
// [0, arc] (< 2 pi): c(b) / (c(b) + c(b + pi + 2 gamma) + c(b - pi + 2 gamma)).
double NooWeight(double b, double gamma, double arc, double smoothing);

}  // namespace fbp
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_FBP_SHORT_SCAN_DERIVATIVE_H_
