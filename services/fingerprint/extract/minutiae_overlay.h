// What an examiner looks at to check an extraction: the enhanced image
// (ridges dark, outside the print dimmed) enlarged, with each minutia drawn
// where it is: ridge endings as red rings, bifurcations as green rings, each
// with a tail along its direction. Encoded as PNG by the caller
// (common/png_io.h EncodePngBytes or WritePng). Its pieces (the gray image,
// the marks) are exposed for other pictures, e.g. match_chart.h.
#ifndef TESSERA_SERVICES_FINGERPRINT_EXTRACT_MINUTIAE_OVERLAY_H_
#define TESSERA_SERVICES_FINGERPRINT_EXTRACT_MINUTIAE_OVERLAY_H_

#include "common/png_io.h"
#include "services/fingerprint/extract/canvas_draw.h"
#include "services/fingerprint/extract/extractor.h"
#include "services/fingerprint/formats/template.h"

namespace tessera {
namespace fingerprint {

// RGB, (width * scale) x (height * scale) of the extraction's image; scale
// is clamped to 1-4.
Image8 DrawMinutiaeOverlay(const Extraction& extraction, int scale = 2);

// The pieces of the overlay, for other pictures (match_chart.h):

// The enhanced image as the overlay shows it: gray (1 channel), the
// extraction's image size, ridges dark, outside the print dimmed.
Image8 EnhancedImageGray(const Extraction& extraction);

// `gray` (1 channel) enlarged `scale` times into `canvas` (RGB) with its
// top-left corner at (x0, y0).
void DrawGrayInto(const Image8& gray, int scale, int x0, int y0, Image8& canvas);

// The overlay's colour of a minutia type: red ridge endings, green others.
Rgb MinutiaColour(MinutiaType type);

// A minutia's mark: a ring of `radius` image pixels around it and a tail
// from 3 to 12 pixels along its direction (ISO: counterclockwise with y
// down). Image pixel (x, y) is canvas pixel (x0 + x * scale, y0 + y * scale).
void DrawMinutiaMark(const Minutia& m, Rgb colour, int scale, int x0, int y0, Image8& canvas, double radius = 3);

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_EXTRACT_MINUTIAE_OVERLAY_H_
