#include "services/fingerprint/extract/image_quality.h"

#include <algorithm>
#include <cmath>

namespace tessera {
namespace fingerprint {
namespace {

double Clamp01(double v) { return std::min(1.0, std::max(0.0, v)); }

}  // namespace

ImageQuality AssessImageQuality(const Extraction& ex) {
  ImageQuality q;
  const RidgeField& f = ex.field;
  int blocks = 0;
  double certainty = 0, clarity = 0;
  for (size_t b = 0; b < f.foreground.size(); ++b) {
    if (!f.foreground[b]) continue;
    ++blocks;
    certainty += f.coherence[b];
    clarity += f.ridge_power[b];
  }
  // 500 ppi: a pixel is 0.0508 mm on a side.
  constexpr double kMm2PerPixel = 0.0508 * 0.0508;
  q.area_mm2 = blocks * f.block * f.block * kMm2PerPixel;
  if (blocks > 0) {
    q.certainty = certainty / blocks;
    q.clarity = clarity / blocks;
  }
  for (const Minutia& m : ex.view.minutiae) q.reliable_minutiae += m.quality >= 40;
  const double area = Clamp01(q.area_mm2 / 120);
  const double cert = Clamp01((q.certainty - 0.3) / 0.5);
  const double clar = Clamp01(q.clarity / 0.35);
  const double mins = Clamp01(q.reliable_minutiae / 30.0);
  q.score = static_cast<int>(std::lround(100 * std::sqrt(area) * (0.35 * cert + 0.4 * clar + 0.25 * mins)));
  return q;
}

}  // namespace fingerprint
}  // namespace tessera
