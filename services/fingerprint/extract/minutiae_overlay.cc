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

Image8 DrawMinutiaeOverlay(const Extraction& ex, int scale) {
  scale = std::max(1, std::min(4, scale));
  const int w = ex.enhanced.width, h = ex.enhanced.height;
  Image8 img = Image8::Make(w * scale, h * scale, 3);
  const double unit = ResponseScale(ex);
  for (int y = 0; y < h * scale; ++y) {
    for (int x = 0; x < w * scale; ++x) {
      const int px = x / scale, py = y / scale;
      // Ridges (negative response) dark, valleys light.
      double v = 160 + 70 * ex.enhanced.at(px, py) / unit;
      v = std::max(0.0, std::min(255.0, v));
      if (!ex.field.ForegroundAt(px, py)) v = 40 + v / 4;
      const uint8_t g = static_cast<uint8_t>(v);
      img.at(x, y, 0) = g, img.at(x, y, 1) = g, img.at(x, y, 2) = g;
    }
  }
  const auto put = [&](double fx, double fy, uint8_t r, uint8_t g, uint8_t b) {
    const int x = static_cast<int>(std::lround(fx * scale)), y = static_cast<int>(std::lround(fy * scale));
    if (x < 0 || y < 0 || x >= w * scale || y >= h * scale) return;
    img.at(x, y, 0) = r, img.at(x, y, 1) = g, img.at(x, y, 2) = b;
  };
  const double step = 0.5 / scale;
  for (const Minutia& m : ex.view.minutiae) {
    const bool ending = m.type == MinutiaType::kEnding;
    const uint8_t r = ending ? 230 : 0, g = ending ? 0 : 200, b = ending ? 0 : 40;
    for (double t = 0; t < 2 * kPi; t += step / 3) put(m.x + 3 * std::cos(t), m.y + 3 * std::sin(t), r, g, b);
    // ISO angles are counter-clockwise with y down in the image.
    for (double t = 3; t < 12; t += step) put(m.x + t * std::cos(m.angle), m.y - t * std::sin(m.angle), r, g, b);
  }
  return img;
}

}  // namespace fingerprint
}  // namespace tessera
