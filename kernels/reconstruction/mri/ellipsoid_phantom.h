// Analytic 3-D ellipsoid phantoms (Shepp-Logan) and their exact k-space, the
// 3-D counterpart of ellipse_phantom.h (issue 36): the Fourier transform of a
// uniform ball is (sin x - x cos x) / (2 pi^2 q^3), x = 2 pi q, so simulated
// non-Cartesian or Cartesian 3-D data are exact at every k (no inverse crime).
//
// Units as ellipse_phantom.h: positions in fields of view (voxel (i, j, l) of
// an nx x ny x nz volume at ((i - nx/2) / nx, (j - ny/2) / ny, (l - nz/2) / nz)),
// k in cycles per FOV, signals scaled to the discrete model
//   s(k) = sum_n f[n] exp(-2 pi i k . r_n)  ~=  nx ny nz * integral f(r) exp(-2 pi i k . r) dr.
// Coil maps are a band-limited 3-D Fourier series (CoilMapSeries3D), so
// multi-coil data are exact too and the series on the grid is the true map.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_MRI_ELLIPSOID_PHANTOM_H_
#define TESSERA_KERNELS_RECONSTRUCTION_MRI_ELLIPSOID_PHANTOM_H_

#include <complex>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/reconstruction/mri/trajectory.h"

namespace tessera {
namespace recon {
namespace mri {

struct Ellipsoid {
  double value = 1;                  // added inside (overlaps add up)
  double cx = 0, cy = 0, cz = 0;     // centre, FOV units
  double ax = 0.1, ay = 0.1, az = 0.1;  // semi-axes along the ellipsoid's own axes
  // Euler angles (z-x-z, radians) of MATLAB phantom3d: the ellipsoid's axes are
  // the rows of its matrix alpha (phi alone: counterclockwise about z, as the
  // 2-D Ellipse::angle). Rotation is about the ellipsoid's own centre.
  double phi = 0, theta = 0, psi = 0;
};

// The modified 3-D Shepp-Logan head (Yu, Ye and Wang / Koay et al.; MATLAB
// phantom3d 'Modified Shepp-Logan'), its [-1, 1]^3 cube mapped onto `scale` x
// the FOV. Values 0..1.
std::vector<Ellipsoid> SheppLogan3D(double scale = 1.0);

double PhantomValueAt3D(const std::vector<Ellipsoid>& phantom, double rx, double ry, double rz);

// integral f(r) exp(-2 pi i k . r) dr.
std::complex<double> PhantomSpectrum3D(const std::vector<Ellipsoid>& phantom, double kx, double ky, double kz);

// The phantom averaged over each voxel (supersample^3 points per voxel):
// the reference volume, nx x ny x nz, x fastest.
std::vector<float> RasterizePhantom3D(const std::vector<Ellipsoid>& phantom, int64_t nx, int64_t ny, int64_t nz,
                                      int supersample = 2);

// S_c(r) = sum_{q in [-order, order]^3} coefficient[c][q] exp(2 pi i q . r).
struct CoilMapSeries3D {
  int coils = 0;
  int order = 0;
  // coils x (2 order + 1)^3, qx fastest.
  std::vector<std::complex<double>> coefficients;
  int side() const { return 2 * order + 1; }
  int terms_per_coil() const { return side() * side() * side(); }
  std::complex<double> At(int coil, double rx, double ry, double rz) const;
};

// Smooth synthetic 3-D coil maps: `coils` loops on a cylinder around the FOV
// (radius 1.5 half-FOVs, alternately at z = -1/4 and +1/4 FOV), each
// exp(i theta_c) / distance normalised to sum_c |S_c|^2 = 1, truncated to
// their Fourier coefficients up to |q| <= order per axis (a 16^3 DFT over the
// FOV). INVALID_ARGUMENT for coils < 1 or order outside [0, 4].
absl::StatusOr<CoilMapSeries3D> SmoothCoilSeries3D(int coils, int order = 1);

// The series on the voxel grid: coils x nz x ny x nx.
std::vector<std::complex<float>> EvaluateCoilSeries3D(const CoilMapSeries3D& series, int64_t nx, int64_t ny,
                                                      int64_t nz);

// Multi-coil signal at `points` k-space points (coils x points, coil-major):
// s_c(k) = nx ny nz sum_q a_cq F(k - q), on all CPU threads. INVALID_ARGUMENT
// for an inconsistent series or a null coordinate.
absl::StatusOr<std::vector<std::complex<float>>> PhantomCoilKspace3D(const std::vector<Ellipsoid>& phantom,
                                                                     const CoilMapSeries3D& series, int64_t points,
                                                                     const float* kx, const float* ky, const float* kz,
                                                                     int64_t nx, int64_t ny, int64_t nz);

// Fully sampled Cartesian k-space of the same (k = index - n/2 per axis):
// nx x ny x nz x coils, BART's layout.
absl::StatusOr<std::vector<std::complex<float>>> PhantomCartesianKspace3D(const std::vector<Ellipsoid>& phantom,
                                                                          const CoilMapSeries3D& series, int64_t nx,
                                                                          int64_t ny, int64_t nz);

}  // namespace mri
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_MRI_ELLIPSOID_PHANTOM_H_
