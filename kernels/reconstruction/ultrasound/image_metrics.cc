#include "kernels/reconstruction/ultrasound/image_metrics.h"

#include <cmath>
#include <limits>

namespace tessera {
namespace recon {
namespace ultrasound {

Peak FindPeak(const std::vector<std::complex<float>>& image, const ImageGrid& grid, double x, double z,
              double radius) {
  Peak best;
  for (int iz = 0; iz < grid.nz; ++iz) {
    for (int ix = 0; ix < grid.nx; ++ix) {
      const double px = grid.x(ix), pz = grid.z(iz);
      if ((px - x) * (px - x) + (pz - z) * (pz - z) > radius * radius) continue;
      const double m = std::abs(image[ix + static_cast<size_t>(grid.nx) * iz]);
      if (best.ix < 0 || m > best.magnitude) best = {ix, iz, px, pz, m};
    }
  }
  return best;
}

double LateralFwhm(const std::vector<std::complex<float>>& image, const ImageGrid& grid, const Peak& peak) {
  const double inf = std::numeric_limits<double>::infinity();
  if (peak.ix < 0 || !(peak.magnitude > 0)) return inf;
  const double half = 0.5 * peak.magnitude;
  auto at = [&](int ix) { return static_cast<double>(std::abs(image[ix + static_cast<size_t>(grid.nx) * peak.iz])); };
  double left = -inf, right = inf;
  for (int ix = peak.ix; ix > 0; --ix) {
    if (at(ix - 1) < half) {
      left = grid.x(ix - 1) + (half - at(ix - 1)) / (at(ix) - at(ix - 1)) * grid.dx;
      break;
    }
  }
  for (int ix = peak.ix; ix + 1 < grid.nx; ++ix) {
    if (at(ix + 1) < half) {
      right = grid.x(ix) + (at(ix) - half) / (at(ix) - at(ix + 1)) * grid.dx;
      break;
    }
  }
  return right - left;
}

double CystContrastDb(const std::vector<std::complex<float>>& image, const ImageGrid& grid, double x, double z,
                      double r_in, double r_out_lo, double r_out_hi) {
  double in = 0, out = 0;
  long n_in = 0, n_out = 0;
  for (int iz = 0; iz < grid.nz; ++iz) {
    for (int ix = 0; ix < grid.nx; ++ix) {
      const double r = std::hypot(grid.x(ix) - x, grid.z(iz) - z);
      const double p = std::norm(image[ix + static_cast<size_t>(grid.nx) * iz]);
      if (r < r_in) {
        in += p;
        ++n_in;
      } else if (r >= r_out_lo && r <= r_out_hi) {
        out += p;
        ++n_out;
      }
    }
  }
  if (n_in == 0 || n_out == 0) return std::numeric_limits<double>::quiet_NaN();
  return 10 * std::log10((in / n_in) / (out / n_out));
}

}  // namespace ultrasound
}  // namespace recon
}  // namespace tessera
