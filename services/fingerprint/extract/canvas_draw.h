// Drawing on an RGB canvas (common/png_io.h Image8 with 3 channels) for the
// pictures examiners look at (minutiae_overlay.h, match_chart.h): pixels,
// lines, filled boxes and text in a 5 x 7 pixel font (digits, capital
// letters and a little punctuation; lower case is drawn as capitals,
// anything else as '?'; our own glyphs, no font library). Everything is
// clipped to the canvas.
#ifndef TESSERA_SERVICES_FINGERPRINT_EXTRACT_CANVAS_DRAW_H_
#define TESSERA_SERVICES_FINGERPRINT_EXTRACT_CANVAS_DRAW_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "common/png_io.h"

namespace tessera {
namespace fingerprint {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
};

// Sets pixel (x, y) when it lies on the canvas.
inline void PutPixel(int x, int y, Rgb c, Image8& canvas) {
  if (x < 0 || y < 0 || x >= canvas.width || y >= canvas.height) return;
  canvas.at(x, y, 0) = c.r, canvas.at(x, y, 1) = c.g, canvas.at(x, y, 2) = c.b;
}

// The segment (x0, y0) - (x1, y1), `width` pixels wide (1-8).
void DrawLine(double x0, double y0, double x1, double y1, int width, Rgb colour, Image8& canvas);

// The box [x, x + w) x [y, y + h).
void FillRect(int x, int y, int w, int h, Rgb colour, Image8& canvas);

// Glyph cell in font pixels: the 5 x 7 glyph plus one column of spacing.
inline constexpr int kFontAdvance = 6;
inline constexpr int kFontHeight = 7;

// Width in canvas pixels of `text` drawn at `size` (each font pixel a
// size x size square), without the trailing spacing column.
int TextWidth(absl::string_view text, int size);

// Draws `text` with its top-left corner at (x, y), font pixels size x size,
// in `colour`; the pixels between the strokes are left as they are.
void DrawText(absl::string_view text, int x, int y, int size, Rgb colour, Image8& canvas);

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_EXTRACT_CANVAS_DRAW_H_
