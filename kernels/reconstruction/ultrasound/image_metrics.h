// Image-quality measures on beamformed images (the grid of acquisition.h):
// where a point target's peak lies, its lateral -6 dB width, and the
// contrast of an anechoic cyst. Used by tests, benches and the demo.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_ULTRASOUND_IMAGE_METRICS_H_
#define TESSERA_KERNELS_RECONSTRUCTION_ULTRASOUND_IMAGE_METRICS_H_

#include <complex>
#include <vector>

#include "kernels/reconstruction/ultrasound/acquisition.h"

namespace tessera {
namespace recon {
namespace ultrasound {

struct Peak {
  int ix = -1, iz = -1;
  double x = 0, z = 0;     // m
  double magnitude = 0;
};

// The brightest pixel within `radius` (m) of (x, z); ix = -1 when the
// window holds no pixel.
Peak FindPeak(const std::vector<std::complex<float>>& image, const ImageGrid& grid, double x, double z,
              double radius);

// Lateral full width at half maximum (-6 dB) through a peak: along the
// peak's row, the distance between the two -6 dB crossings (linearly
// interpolated). Infinity when a crossing lies outside the image.
double LateralFwhm(const std::vector<std::complex<float>>& image, const ImageGrid& grid, const Peak& peak);

// Contrast of a cyst (dB): 10 log10(mean |y|^2 inside radius r_in of the
// centre / mean |y|^2 in the ring [r_out_lo, r_out_hi]). Negative for a
// dark cyst; NaN when a region holds no pixel.
double CystContrastDb(const std::vector<std::complex<float>>& image, const ImageGrid& grid, double x, double z,
                      double r_in, double r_out_lo, double r_out_hi);

}  // namespace ultrasound
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_ULTRASOUND_IMAGE_METRICS_H_
