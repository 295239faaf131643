// Analytic 2-D ellipse phantoms (Shepp-Logan) and their exact k-space: the
// Fourier transform of a uniform ellipse is a jinc, so simulated
// non-Cartesian data are exact at every trajectory point and never made by
// our own NUFFT (no inverse crime).
//
// Units: positions r in fields of view (FOV = 1; pixel (i, j) of an nx x ny
// image at ((i - nx/2) / nx, (j - ny/2) / ny), coil_maps.h), k in cycles per
// FOV (trajectory.h). Signals are scaled to the discrete model the
// reconstructions invert: an nx x ny image f of pixel values gives
//   s(k) = sum_n f[n] exp(-2 pi i k . r_n)  ~=  nx ny * integral f(r) exp(-2 pi i k . r) dr,
// so a reconstruction returns pixel values on the phantom's scale.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_MRI_ELLIPSE_PHANTOM_H_
#define TESSERA_KERNELS_RECONSTRUCTION_MRI_ELLIPSE_PHANTOM_H_

#include <complex>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/reconstruction/mri/coil_maps.h"
#include "kernels/reconstruction/mri/trajectory.h"

namespace tessera {
namespace recon {
namespace mri {

struct Ellipse {
  double value = 1;           // added inside (overlaps add up)
  double cx = 0, cy = 0;      // centre, FOV units
  double ax = 0.1, ay = 0.1;  // semi-axes along the ellipse's own axes, FOV units
  double angle = 0;           // radians, counterclockwise
};

// Toft's modified Shepp-Logan head (MATLAB phantom('Modified Shepp-Logan')):
// its [-1, 1]^2 square mapped onto `scale` x the FOV (scale 1: the skull's
// long axis spans 92 % of the FOV). Values 0..1, brain 0.2-0.3.
std::vector<Ellipse> SheppLogan(double scale = 1.0);

// The phantom's value at position r (boundaries included).
double PhantomValueAt(const std::vector<Ellipse>& phantom, double rx, double ry);

// The continuous Fourier transform integral f(r) exp(-2 pi i k . r) dr.
std::complex<double> PhantomSpectrum(const std::vector<Ellipse>& phantom, double kx, double ky);

// Single-coil signal at every trajectory point (nx ny x the spectrum).
std::vector<std::complex<float>> PhantomKspace(const std::vector<Ellipse>& phantom, const Trajectory2D& trajectory,
                                               int64_t nx, int64_t ny);

// Multi-coil signal (coil-major: coils x points) of phantom x coil map, exact
// for the band-limited maps of `series`: s_c(k) = nx ny sum_q a_cq F(k - q).
// Cost: points x (2 order + 1)^2 x ellipses jinc evaluations, on all CPU
// threads (order 4, 10 ellipses: about a second per 10^5 points on 2 cores).
// INVALID_ARGUMENT for an empty series.
absl::StatusOr<std::vector<std::complex<float>>> PhantomCoilKspace(const std::vector<Ellipse>& phantom,
                                                                   const CoilMapSeries& series,
                                                                   const Trajectory2D& trajectory, int64_t nx,
                                                                   int64_t ny);

// The phantom averaged over each pixel (supersample x supersample points per
// pixel): the reference image reconstructions are compared against.
std::vector<float> RasterizePhantom(const std::vector<Ellipse>& phantom, int64_t nx, int64_t ny, int supersample = 4);

}  // namespace mri
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_MRI_ELLIPSE_PHANTOM_H_
