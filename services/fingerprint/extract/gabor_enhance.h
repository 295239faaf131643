// Contextual enhancement: each foreground pixel filtered with an even Gabor
// kernel tuned to the local ridge direction and wavelength (RidgeField), so
// ridges are reconnected along their flow and noise across it is cut. The
// kernels come from a bank quantized in direction and wavelength, built once
// per call. Ridges (dark) give negative responses.
#ifndef TESSERA_SERVICES_FINGERPRINT_EXTRACT_GABOR_ENHANCE_H_
#define TESSERA_SERVICES_FINGERPRINT_EXTRACT_GABOR_ENHANCE_H_

#include <cstdint>
#include <vector>

#include "services/fingerprint/extract/float_image.h"
#include "services/fingerprint/extract/ridge_field.h"

namespace tessera {
namespace fingerprint {

struct GaborOptions {
  // Kernel bank: directions over a half turn. 24 (7.5 degrees apart; was 16):
  // each pixel's kernel is within 3.75 degrees of the local ridge direction,
  // so curved ridges are followed more closely (FVC2002 results file).
  int directions = 24;
  float wavelength_step = 0.5f;   // and wavelengths min..max of RidgeFieldOptions in this step
  int radius = 7;                 // kernel (2 radius + 1)^2
  float sigma_across = 0.4f;      // times the wavelength
  float sigma_along = 0.55f;      // times the wavelength
};

// The kernel bank GaborEnhance filters with (the CUDA path uploads it).
struct GaborKernelBank {
  int directions = 0;
  int wavelengths = 0;
  int radius = 0;
  float min_wavelength = 0;
  float step = 0;
  std::vector<float> taps;  // [direction][wavelength][(2r+1)^2]

  int side() const { return 2 * radius + 1; }
  const float* kernel(int d, int w) const {
    return &taps[(static_cast<size_t>(d) * wavelengths + w) * side() * side()];
  }
};
GaborKernelBank MakeGaborKernelBank(const RidgeFieldOptions& field_options, const GaborOptions& options);

// The filter response (background pixels 0).
FloatImage GaborEnhance(const FloatImage& normalized, const RidgeField& field, const RidgeFieldOptions& field_options,
                        const GaborOptions& options = {});

// Ridge pixels: foreground with a negative response (1) else 0.
std::vector<uint8_t> BinarizeRidges(const FloatImage& response, const RidgeField& field);

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_EXTRACT_GABOR_ENHANCE_H_
