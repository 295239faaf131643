#include "services/fingerprint/extract/minutiae_overlay.h"

#include <algorithm>
#include <cmath>

namespace tessera {
namespace fingerprint {
namespace {

constexpr double kPi = 3.14159265358979323846;

// The mean |response| over the print: the Gabor response's scale varies with
// the image's contrast, the drawing should not.
double ResponseScale(const Extraction& ex) {
  double sum = 0;
  long n = 0;
  const FloatImage& e = ex.enhanced;
  for (int y = 0; y < e.height; ++y) {
    for (int x = 0; x < e.width; ++x) {
      if (!ex.field.ForegroundAt(x, y)) continue;
      sum += std::fabs(e.at(x, y));
      ++n;
    }
  }
  return n > 0 && sum > 0 ? sum / n : 1.0;
}

}  // namespace

Image8 EnhancedImageGray(const Extraction& ex) {
  const int w = ex.enhanced.width, h = ex.enhanced.height;
  Image8 img = Image8::Make(w, h, 1);
  const double unit = ResponseScale(ex);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      // Ridges (negative response) dark, valleys light.
      double v = 160 + 70 * ex.enhanced.at(x, y) / unit;
      v = std::max(0.0, std::min(255.0, v));
      if (!ex.field.ForegroundAt(x, y)) v = 40 + v / 4;
      img.at(x, y) = static_cast<uint8_t>(v);
    }
  }
  return img;
}

void DrawGrayInto(const Image8& gray, int scale, int x0, int y0, Image8& canvas) {
  for (int y = 0; y < gray.height * scale; ++y) {
    for (int x = 0; x < gray.width * scale; ++x) {
      const uint8_t g = gray.at(x / scale, y / scale);
      PutPixel(x0 + x, y0 + y, {g, g, g}, canvas);
    }
  }
}

Rgb MinutiaColour(MinutiaType type) {
  return type == MinutiaType::kEnding ? Rgb{230, 0, 0} : Rgb{0, 200, 40};
}

void DrawMinutiaMark(const Minutia& m, Rgb colour, int scale, int x0, int y0, Image8& canvas, double radius) {
  const auto put = [&](double fx, double fy) {
    PutPixel(x0 + static_cast<int>(std::lround(fx * scale)), y0 + static_cast<int>(std::lround(fy * scale)), colour,
             canvas);
  };
  const double step = 0.5 / scale;
  for (double t = 0; t < 2 * kPi; t += step / radius) put(m.x + radius * std::cos(t), m.y + radius * std::sin(t));
  // ISO angles are counter-clockwise with y down in the image.
  for (double t = 3; t < 12; t += step) put(m.x + t * std::cos(m.angle), m.y - t * std::sin(m.angle));
}

Image8 DrawMinutiaeOverlay(const Extraction& ex, int scale) {
  scale = std::max(1, std::min(4, scale));
  const Image8 gray = EnhancedImageGray(ex);
  Image8 img = Image8::Make(gray.width * scale, gray.height * scale, 3);
  DrawGrayInto(gray, scale, 0, 0, img);
  for (const Minutia& m : ex.view.minutiae) DrawMinutiaMark(m, MinutiaColour(m.type), scale, 0, 0, img);
  return img;
}

}  // namespace fingerprint
}  // namespace tessera
