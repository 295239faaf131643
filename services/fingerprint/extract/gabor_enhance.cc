#include "services/fingerprint/extract/gabor_enhance.h"

#include <algorithm>
#include <cmath>

namespace tessera {
namespace fingerprint {
namespace {

constexpr float kPi = 3.14159265358979f;

}  // namespace

GaborKernelBank MakeGaborKernelBank(const RidgeFieldOptions& fo, const GaborOptions& o) {
  GaborKernelBank bank;
  bank.directions = o.directions;
  bank.radius = o.radius;
  bank.min_wavelength = fo.min_wavelength;
  bank.step = o.wavelength_step;
  bank.wavelengths = static_cast<int>(std::floor((fo.max_wavelength - fo.min_wavelength) / o.wavelength_step)) + 1;
  const int side = bank.side();
  bank.taps.resize(static_cast<size_t>(bank.directions) * bank.wavelengths * side * side);
  for (int d = 0; d < bank.directions; ++d) {
    const float theta = kPi * d / bank.directions;  // ridge direction
    const float ux = std::cos(theta), uy = std::sin(theta);
    for (int w = 0; w < bank.wavelengths; ++w) {
      const float lambda = fo.min_wavelength + w * o.wavelength_step;
      const float sa = o.sigma_along * lambda, sn = o.sigma_across * lambda;
      float* k = const_cast<float*>(bank.kernel(d, w));
      double sum = 0, env_sum = 0;
      std::vector<float> env(side * side);
      for (int y = -o.radius; y <= o.radius; ++y) {
        for (int x = -o.radius; x <= o.radius; ++x) {
          const float a = x * ux + y * uy;    // along the ridge
          const float n = -x * uy + y * ux;   // across
          const float e = std::exp(-0.5f * (a * a / (sa * sa) + n * n / (sn * sn)));
          const int i = (y + o.radius) * side + (x + o.radius);
          env[i] = e;
          k[i] = e * std::cos(2 * kPi * n / lambda);
          sum += k[i];
          env_sum += e;
        }
      }
      // No response to a flat patch: take away the DC in the envelope's shape.
      const float dc = static_cast<float>(sum / env_sum);
      for (int i = 0; i < side * side; ++i) k[i] -= dc * env[i];
    }
  }
  return bank;
}

FloatImage GaborEnhance(const FloatImage& img, const RidgeField& field, const RidgeFieldOptions& fo,
                        const GaborOptions& o) {
  const GaborKernelBank bank = MakeGaborKernelBank(fo, o);
  FloatImage out(img.width, img.height, 0);
  const int r = bank.radius, side = bank.side();
  for (int y = 0; y < img.height; ++y) {
    const bool inner_y = y >= r && y < img.height - r;
    for (int x = 0; x < img.width; ++x) {
      const int b = field.BlockOf(x, y);
      if (!field.foreground[b]) continue;
      const float theta = field.OrientationAt(static_cast<float>(x), static_cast<float>(y));
      int d = static_cast<int>(std::lround(theta / kPi * bank.directions)) % bank.directions;
      int w = static_cast<int>(std::lround((field.wavelength[b] - bank.min_wavelength) / bank.step));
      w = std::min(std::max(w, 0), bank.wavelengths - 1);
      const float* k = bank.kernel(d, w);
      float acc = 0;
      if (inner_y && x >= r && x < img.width - r) {
        for (int dy = -r; dy <= r; ++dy) {
          const float* row = &img.v[static_cast<size_t>(y + dy) * img.width + (x - r)];
          const float* kr = k + (dy + r) * side;
          for (int i = 0; i < side; ++i) acc += kr[i] * row[i];
        }
      } else {
        for (int dy = -r; dy <= r; ++dy) {
          for (int dx = -r; dx <= r; ++dx) acc += k[(dy + r) * side + dx + r] * img.clamped(x + dx, y + dy);
        }
      }
      out.at(x, y) = acc;
    }
  }
  return out;
}

std::vector<uint8_t> BinarizeRidges(const FloatImage& response, const RidgeField& field) {
  std::vector<uint8_t> ridges(response.v.size(), 0);
  for (int y = 0; y < response.height; ++y) {
    for (int x = 0; x < response.width; ++x) {
      ridges[static_cast<size_t>(y) * response.width + x] = field.ForegroundAt(x, y) && response.at(x, y) < 0;
    }
  }
  return ridges;
}

}  // namespace fingerprint
}  // namespace tessera
