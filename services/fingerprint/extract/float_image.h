// The float image every extraction stage passes on, and the few image
// operations they share (separable Gaussian blur, bilinear sampling). Plain
// loops: the CUDA path (kernels/fingerprint/extract_*) mirrors each stage.
#ifndef TESSERA_SERVICES_FINGERPRINT_EXTRACT_FLOAT_IMAGE_H_
#define TESSERA_SERVICES_FINGERPRINT_EXTRACT_FLOAT_IMAGE_H_

#include <cstddef>
#include <vector>

namespace tessera {
namespace fingerprint {

struct FloatImage {
  int width = 0;
  int height = 0;
  std::vector<float> v;  // row-major

  FloatImage() = default;
  FloatImage(int w, int h, float fill = 0) : width(w), height(h), v(static_cast<size_t>(w) * h, fill) {}
  float& at(int x, int y) { return v[static_cast<size_t>(y) * width + x]; }
  float at(int x, int y) const { return v[static_cast<size_t>(y) * width + x]; }
  // Clamped to the border.
  float clamped(int x, int y) const {
    x = x < 0 ? 0 : (x >= width ? width - 1 : x);
    y = y < 0 ? 0 : (y >= height ? height - 1 : y);
    return at(x, y);
  }
  // Bilinear, clamped to the border.
  float Sample(float x, float y) const;
};

// Separable Gaussian blur with standard deviation `sigma` (pixels), kernel
// radius ceil(3 sigma), border clamped. sigma <= 0 returns the input.
FloatImage GaussianBlur(const FloatImage& in, float sigma);

// GaussianBlur's taps: 2 ceil(3 sigma) + 1 weights summing to 1 ({1} for sigma <= 0).
std::vector<float> GaussianKernel(float sigma);

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_EXTRACT_FLOAT_IMAGE_H_
