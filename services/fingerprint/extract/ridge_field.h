// The ridge field of a fingerprint image on a grid of square blocks: where
// the print is (foreground), the ridge direction and how clear it is
// (coherence of the gradient structure tensor), and the ridge wavelength.
// Every later stage reads it: enhancement tunes its Gabor filters by it,
// minutiae take their direction and quality from it, image quality sums it.
#ifndef TESSERA_SERVICES_FINGERPRINT_EXTRACT_RIDGE_FIELD_H_
#define TESSERA_SERVICES_FINGERPRINT_EXTRACT_RIDGE_FIELD_H_

#include <cstdint>
#include <vector>

#include "services/fingerprint/extract/float_image.h"

namespace tessera {
namespace fingerprint {

struct RidgeFieldOptions {
  int block = 8;                      // pixels per block side
  float tensor_sigma_blocks = 1.0f;   // smoothing of the structure tensor
  float angle_sigma_blocks = 1.5f;    // smoothing of the doubled-angle field
  // Foreground: a block whose local contrast (std of the normalized image in
  // a 3x3-block window) exceeds this share of the image's 90th percentile.
  float contrast_share = 0.3f;
  float min_wavelength = 5.0f;        // pixels at 500 ppi
  float max_wavelength = 15.0f;
  float default_wavelength = 9.0f;    // where no block gives one
  // A block's wavelength more than this factor from the print's median is
  // noise and is filled from its neighbours instead.
  float wavelength_spread = 1.3f;
};

struct RidgeField {
  int block = 0;
  int cols = 0;  // blocks across
  int rows = 0;  // blocks down
  // Per block, row-major. Angles in radians in [0, pi) in image coordinates
  // (x right, y down): the direction along the ridges.
  std::vector<float> orientation;
  std::vector<float> coherence;   // 0 (no direction) .. 1 (clean parallel ridges)
  std::vector<float> contrast;    // local std of the normalized image
  std::vector<float> wavelength;  // ridge period in pixels
  // How clearly one period stands out across the ridges (0 .. 0.5, a clean
  // sinusoid 0.5); 0 where none was measured.
  std::vector<float> ridge_power;
  std::vector<uint8_t> foreground;

  int index(int bx, int by) const { return by * cols + bx; }
  // The block of pixel (x, y), clamped.
  int BlockOf(int x, int y) const;
  // Orientation at a pixel, interpolated between block centres (doubled angle).
  float OrientationAt(float x, float y) const;
  bool ForegroundAt(int x, int y) const { return foreground[BlockOf(x, y)] != 0; }
};

// `normalized`: zero mean, unit variance over the image (NormalizeImage).
RidgeField EstimateRidgeField(const FloatImage& normalized, const RidgeFieldOptions& options = {});

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_EXTRACT_RIDGE_FIELD_H_
