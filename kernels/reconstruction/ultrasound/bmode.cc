#include "kernels/reconstruction/ultrasound/bmode.h"

#include <algorithm>
#include <cmath>

namespace tessera {
namespace recon {
namespace ultrasound {

std::vector<float> LogCompress(const std::vector<std::complex<float>>& image, double dynamic_range_db) {
  double peak = 0;
  for (const auto& v : image) peak = std::max(peak, static_cast<double>(std::abs(v)));
  const float floor_db = static_cast<float>(-std::abs(dynamic_range_db));
  std::vector<float> out(image.size(), floor_db);
  if (!(peak > 0) || !std::isfinite(peak)) return out;
  for (size_t i = 0; i < image.size(); ++i) {
    const double a = std::abs(image[i]) / peak;
    const double db = a > 0 ? 20 * std::log10(a) : floor_db;
    out[i] = static_cast<float>(std::clamp<double>(std::isfinite(db) ? db : floor_db, floor_db, 0.0));
  }
  return out;
}

}  // namespace ultrasound
}  // namespace recon
}  // namespace tessera
