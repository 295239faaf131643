// Simulated receive-coil sensitivity maps: the analytic "birdcage" model used
// by BART's and SigPy's simulators (coils on a circle outside the field of
// view, each map exp(i phi) / distance with the azimuthal phase of a
// rotating field), normalised so that sum_c |S_c|^2 = 1 at every pixel.
//
// Two forms: maps sampled on the image grid (SENSE unfolding, CG-SENSE), and
// a band-limited Fourier series of the same maps (CoilMapSeries). The series
// lets ellipse_kspace.h compute *exact* multi-coil k-space of an analytic
// phantom (the spectrum of phantom x coil is a sum of shifted ellipse spectra),
// so coil data need no rasterised phantom (no inverse crime); the series
// evaluated on the grid is then the true coil map of that data.
//
// Positions: pixel (i, j) of an nx x ny image sits at r = ((i - nx/2) / nx,
// (j - ny/2) / ny) in units of the field of view (FOV = 1, r in [-1/2, 1/2)),
// the NUFFT's centred-mode convention. Maps are coil-major: element
// i + nx (j + ny c).
#ifndef TESSERA_KERNELS_RECONSTRUCTION_MRI_COIL_MAPS_H_
#define TESSERA_KERNELS_RECONSTRUCTION_MRI_COIL_MAPS_H_

#include <complex>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera {
namespace recon {
namespace mri {

struct BirdcageOptions {
  int coils = 8;
  // Distance of the coil centres from the centre, in half-FOVs (1 = the edge
  // of the field of view); > 1 keeps every map finite inside the FOV.
  double coil_radius = 1.5;
};

// The normalised birdcage maps at FOV position (rx, ry): `coils` values.
std::vector<std::complex<double>> BirdcageAt(const BirdcageOptions& options, double rx, double ry);

// Maps on the nx x ny grid. INVALID_ARGUMENT for nx, ny < 1, coils < 1 or
// coil_radius <= 1.
absl::StatusOr<std::vector<std::complex<float>>> BirdcageMaps(int64_t nx, int64_t ny, const BirdcageOptions& options);

// S_c(r) = sum_{qx, qy in [-order, order]} coefficient[c][qx][qy] exp(2 pi i q . r)
// (q in cycles per FOV).
struct CoilMapSeries {
  int coils = 0;
  int order = 0;
  // coils x (2 order + 1)^2, qx fastest (index qx + order + (2 order + 1) (qy + order)).
  std::vector<std::complex<double>> coefficients;
  int terms_per_coil() const { return (2 * order + 1) * (2 * order + 1); }
  std::complex<double> At(int coil, double rx, double ry) const;
};

// The Fourier coefficients of the birdcage maps up to |qx|, |qy| <= order,
// from a 4x-finer-than-needed DFT on the FOV. Truncation leaves
// sum_c |S_c|^2 within a few percent of 1 over the FOV for order >= 4.
// INVALID_ARGUMENT as BirdcageMaps, or order outside [0, 32].
absl::StatusOr<CoilMapSeries> BirdcageSeries(const BirdcageOptions& options, int order);

// The series at the pixel positions of an nx x ny grid (coil-major).
std::vector<std::complex<float>> EvaluateCoilSeries(const CoilMapSeries& series, int64_t nx, int64_t ny);

}  // namespace mri
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_MRI_COIL_MAPS_H_
