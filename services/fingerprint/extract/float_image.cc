#include "services/fingerprint/extract/float_image.h"

#include <cmath>

namespace tessera {
namespace fingerprint {

float FloatImage::Sample(float x, float y) const {
  const int x0 = static_cast<int>(std::floor(x));
  const int y0 = static_cast<int>(std::floor(y));
  const float fx = x - x0;
  const float fy = y - y0;
  const float a = clamped(x0, y0) * (1 - fx) + clamped(x0 + 1, y0) * fx;
  const float b = clamped(x0, y0 + 1) * (1 - fx) + clamped(x0 + 1, y0 + 1) * fx;
  return a * (1 - fy) + b * fy;
}

std::vector<float> GaussianKernel(float sigma) {
  if (sigma <= 0) return {1.0f};
  const int r = static_cast<int>(std::ceil(3 * sigma));
  std::vector<float> k(2 * r + 1);
  float sum = 0;
  for (int i = -r; i <= r; ++i) sum += k[i + r] = std::exp(-0.5f * i * i / (sigma * sigma));
  for (float& w : k) w /= sum;
  return k;
}

FloatImage GaussianBlur(const FloatImage& in, float sigma) {
  if (sigma <= 0 || in.width == 0 || in.height == 0) return in;
  const std::vector<float> k = GaussianKernel(sigma);
  const int r = static_cast<int>(k.size() / 2);
  FloatImage tmp(in.width, in.height);
  for (int y = 0; y < in.height; ++y) {
    for (int x = 0; x < in.width; ++x) {
      float acc = 0;
      for (int i = -r; i <= r; ++i) acc += k[i + r] * in.clamped(x + i, y);
      tmp.at(x, y) = acc;
    }
  }
  FloatImage out(in.width, in.height);
  for (int y = 0; y < in.height; ++y) {
    for (int x = 0; x < in.width; ++x) {
      float acc = 0;
      for (int i = -r; i <= r; ++i) acc += k[i + r] * tmp.clamped(x, y + i);
      out.at(x, y) = acc;
    }
  }
  return out;
}

}  // namespace fingerprint
}  // namespace tessera
