// Test-only: exact line integrals of ellipsoids (ellipses in 2-D) for any
// ray, so FBP and the solvers are checked against data that no projector of
// ours made (no inverse crime). The full Shepp-Logan library lives in
// services/reconstruction/phantoms; this stays tiny on purpose.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_FBP_ANALYTIC_PHANTOM_H_
#define TESSERA_KERNELS_RECONSTRUCTION_FBP_ANALYTIC_PHANTOM_H_

#include <vector>

#include "kernels/reconstruction/geometry.h"

namespace tessera {
namespace recon {
namespace testing {

// Points with ((R^T (x - center)) / semi_axes)^2 summed <= 1 hold `value`
// (added where ellipsoids overlap); R rotates by `angle` about z. In 2-D
// (rays in z = 0) the z semi-axis only needs to be positive.
struct Ellipsoid {
  Vec3 center;
  Vec3 semi_axes{1, 1, 1};
  double angle = 0;  // radians, about z
  double value = 1;
};

// Integral of the phantom along the line p0 + t dir, t over all reals
// (dir need not be unit; the result is per unit length).
double LineIntegral(const std::vector<Ellipsoid>& phantom, const Vec3& p0, const Vec3& dir);

// The sinogram of `phantom` (geometry.h layout): one ray per detector pixel
// centre, through it along the ray direction (parallel) or from the source.
std::vector<float> AnalyticSinogram(const ProjectionGeometry& projection, const std::vector<Ellipsoid>& phantom);

// The phantom's value at each voxel centre.
std::vector<float> PhantomVolume(const VolumeGeometry& volume, const std::vector<Ellipsoid>& phantom);

// RMSE of `image` against `truth` over the voxels where `mask` is true.
double MaskedRmse(const std::vector<float>& image, const std::vector<float>& truth, const std::vector<bool>& mask);

// MaskedRmse divided by the RMS of `truth` over the mask.
double MaskedNrmse(const std::vector<float>& image, const std::vector<float>& truth, const std::vector<bool>& mask);

// Voxels at least `margin` mm inside the first ellipsoid and `margin` away
// from every other edge (approximately: semi-axes shrunk and grown by it),
// where a reconstruction is not blurred by an edge.
std::vector<bool> InteriorMask(const VolumeGeometry& volume, const std::vector<Ellipsoid>& phantom, double margin);

// View angles (radians) start, start + dir * step, ... covering `arc_deg`
// degrees, the last view one step short of it: a scan's orbit for the tests
// and benches of short and full scans.
std::vector<double> ArcAngles(double arc_deg, double step_deg, double start_deg = 0, double direction = 1);

}  // namespace testing
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_FBP_ANALYTIC_PHANTOM_H_
