#include "services/fingerprint/extract/synthetic_print.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace tessera {
namespace fingerprint {

GrayImage SyntheticPrint(const SyntheticPrintOptions& o) {
  constexpr double kPi = 3.14159265358979323846;
  std::mt19937 finger(o.finger * 7919u + 17u);
  std::uniform_real_distribution<double> unit(0, 1);
  const double cx = o.width / 2.0, cy = o.height / 2.0;
  const double ax = o.width * 0.42, ay = o.height * 0.44;  // the print's ellipse
  // Ridges: a tilted wave whose direction turns slowly across the print.
  const double tilt = (unit(finger) - 0.5) * 1.2, bend = (unit(finger) - 0.5) * 0.006;
  // Dislocations at least 34 px apart and well inside the ellipse.
  struct Point {
    double x, y, sign;
  };
  std::vector<Point> points;
  for (int tries = 0; tries < 5000 && static_cast<int>(points.size()) < o.minutiae; ++tries) {
    const double x = cx + (unit(finger) * 2 - 1) * ax * 0.75, y = cy + (unit(finger) * 2 - 1) * ay * 0.75;
    if ((x - cx) * (x - cx) / (ax * ax) + (y - cy) * (y - cy) / (ay * ay) > 0.55) continue;
    bool apart = true;
    for (const Point& p : points) apart = apart && std::hypot(p.x - x, p.y - y) >= 34;
    if (apart) points.push_back({x, y, unit(finger) < 0.5 ? -1.0 : 1.0});
  }
  std::mt19937 imp(o.impression * 104729u + o.finger);
  const double dx = std::round((unit(imp) * 2 - 1) * 4), dy = std::round((unit(imp) * 2 - 1) * 4);
  std::normal_distribution<double> noise(0, o.noise);
  GrayImage img;
  img.width = o.width;
  img.height = o.height;
  img.ppi = 500;
  img.pixels.resize(static_cast<size_t>(o.width) * o.height);
  for (int py = 0; py < o.height; ++py) {
    for (int px = 0; px < o.width; ++px) {
      const double x = px - dx, y = py - dy;  // finger coordinates
      const double e = (x - cx) * (x - cx) / (ax * ax) + (y - cy) * (y - cy) / (ay * ay);
      double v = 215;
      if (e < 1) {
        const double u = (x - cx) * std::cos(tilt) + (y - cy) * std::sin(tilt);
        double phase = 2 * kPi * (u + bend * (y - cy) * (y - cy)) / 9.0;
        for (const Point& p : points) phase += p.sign * std::atan2(y - p.y, x - p.x);
        // Contrast fades towards the print's edge, as pressure does.
        const double contrast = 85 * std::min(1.0, 4 * (1 - e));
        v = 130 + contrast * std::cos(phase);
      }
      v += noise(imp);
      img.pixels[static_cast<size_t>(py) * o.width + px] = static_cast<uint8_t>(std::max(0.0, std::min(255.0, v)));
    }
  }
  return img;
}

}  // namespace fingerprint
}  // namespace tessera
