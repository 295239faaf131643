// What an examiner looks at to check an extraction: the enhanced image
// (ridges dark, outside the print dimmed) enlarged, with each minutia drawn
// where it is: ridge endings as red rings, bifurcations as green rings, each
// with a tail along its direction. Encoded as PNG by the caller
// (common/png_io.h EncodePngBytes or WritePng).
#ifndef TESSERA_SERVICES_FINGERPRINT_EXTRACT_MINUTIAE_OVERLAY_H_
#define TESSERA_SERVICES_FINGERPRINT_EXTRACT_MINUTIAE_OVERLAY_H_

#include "common/png_io.h"
#include "services/fingerprint/extract/extractor.h"

namespace tessera {
namespace fingerprint {

// RGB, (width * scale) x (height * scale) of the extraction's image; scale
// is clamped to 1-4.
Image8 DrawMinutiaeOverlay(const Extraction& extraction, int scale = 2);

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_EXTRACT_MINUTIAE_OVERLAY_H_
