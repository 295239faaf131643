// PET geometry: the CT geometry (kernels/reconstruction/geometry.h, ASTRA
// vector form) plus time of flight (TOF).
//
// Lines of response (LORs). Sinogram bin (col c, row r, view p) is the line
//   - fan / cone: from the view's source position to the centre of detector
//     pixel (c, r);
//   - parallel: through the pixel centre along the view's ray direction;
// oriented from the source (or the ray's origin side) towards the pixel. PET
// has no source, but a pair of detectors; the vector form is only a way to
// name lines, so any coincidence geometry that the CT builders can express
// (or a list of vectors) works.
//
// TOF. The TOF coordinate t of a point on an LOR is its signed distance (mm)
// from the point of the line closest to the volume centre, positive towards
// the pixel. K = num_tof_bins bins of width w = tof_bin_mm tile the line
// symmetrically: bin k (0 <= k < K) covers
//   [(k - K/2) w, (k - K/2 + 1) w)        (K/2 as a real number),
// so for odd K the centre bin k = (K - 1) / 2 straddles t = 0. An emission at
// t is detected in bin k with probability
//   integral over bin k of the Gaussian of FWHM tof_fwhm_mm centred on t,
// truncated at +-3 sigma (exactly zero further away; the weights of one point
// sum to erf(3 / sqrt 2) = 0.9973 when all its bins exist). K = 1 is non-TOF:
// weight 1 everywhere, tof_bin_mm and tof_fwhm_mm unused.
//
// Sinogram layout (host and device): element (c, r, k, p) is at
//   c + cols * (r + rows * (k + K * p)),
// detector column fastest, then row, then TOF bin, and the view slowest, so
// recon::LinearOperator's view blocks (cols * rows * K floats each) stay
// contiguous and ordered subsets are whole views. With K = 1 this is the CT
// layout. Volumes are x-fastest as in geometry.h.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_PET_PET_GEOMETRY_H_
#define TESSERA_KERNELS_RECONSTRUCTION_PET_PET_GEOMETRY_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "kernels/reconstruction/geometry.h"

namespace tessera {
namespace recon {
namespace pet {

struct TofSpec {
  int num_bins = 1;  // K; 1 = no TOF
  double bin_mm = 0;
  double fwhm_mm = 0;

  bool enabled() const { return num_bins > 1; }
  double sigma_mm() const { return fwhm_mm / 2.3548200450309493; }  // 2 sqrt(2 ln 2)
};

// Most TOF bins accepted (scanners use 7 to 33).
constexpr int kMaxTofBins = 1024;

struct PetGeometry {
  CtGeometry ct;
  TofSpec tof;

  int64_t cols() const { return ct.projection.det_cols; }
  int64_t rows() const { return ct.projection.det_rows; }
  int64_t num_views() const { return ct.projection.num_views(); }
  // Floats per view: cols * rows * K.
  int64_t elements_per_view() const { return cols() * rows() * tof.num_bins; }
  // cols * rows * K * views.
  int64_t sinogram_size() const { return elements_per_view() * num_views(); }
  // LORs (non-TOF bins): cols * rows * views; the size of attenuation factors.
  int64_t num_lors() const { return cols() * rows() * num_views(); }
};

// recon::Validate(ct) plus the TOF fields: 1 <= tof.num_bins <= kMaxTofBins,
// and with TOF a finite positive bin width and FWHM. Errors name the field
// ("tof.fwhm_mm must be finite and > 0, got -1").
absl::Status Validate(const PetGeometry& geometry);

// "fan 2-D, 180 views x 96 cols; volume 64x64x1 of 1x1x1 mm; TOF 13 bins of 46.8 mm, FWHM 83 mm".
std::string Describe(const PetGeometry& geometry);

}  // namespace pet
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_PET_PET_GEOMETRY_H_
