// A synthetic fingerprint for tests of everything that takes images: gently
// curved ridges of period ~9 px (500 ppi) inside an elliptical print on a
// light background, with phase dislocations (one ridge ending or
// bifurcation each) at places drawn from `finger`. The same finger with
// another `impression` differs in noise and by a small shift, as two
// impressions of one finger do. Test-only.
#ifndef TESSERA_SERVICES_FINGERPRINT_EXTRACT_SYNTHETIC_PRINT_H_
#define TESSERA_SERVICES_FINGERPRINT_EXTRACT_SYNTHETIC_PRINT_H_

#include <cstdint>

#include "services/fingerprint/image/gray_image.h"

namespace tessera {
namespace fingerprint {

struct SyntheticPrintOptions {
  int width = 300;
  int height = 360;
  uint32_t finger = 1;      // where the minutiae are and how the ridges curve
  uint32_t impression = 0;  // noise and a shift of up to 4 px
  int minutiae = 18;
  double noise = 8;  // standard deviation of the pixel noise (gray levels)
};

GrayImage SyntheticPrint(const SyntheticPrintOptions& options = {});

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_EXTRACT_SYNTHETIC_PRINT_H_
