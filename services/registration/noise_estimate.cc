#include "services/registration/noise_estimate.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace tessera::registration {

double EstimateNoiseSigma(const NDArray& image, int64_t max_blocks) {
  const int64_t nx = image.dim(0), ny = image.dim(1), nz = image.dim(2);
  const int64_t bx = nx / 2, by = ny / 2, bz = nz / 2;
  const int64_t blocks = bx * by * bz;
  if (blocks == 0) return 0;
  const int64_t stride = std::max<int64_t>(1, (blocks + max_blocks - 1) / max_blocks);
  const float* p = image.data<float>();
  std::vector<float> coefficients;
  coefficients.reserve(static_cast<size_t>(blocks / stride + 1));
  for (int64_t b = 0; b < blocks; b += stride) {
    const int64_t i = 2 * (b % bx), j = 2 * ((b / bx) % by), k = 2 * (b / (bx * by));
    float v[8];
    for (int c = 0; c < 8; ++c) {
      v[c] = p[(i + (c & 1)) + nx * ((j + ((c >> 1) & 1)) + ny * (k + (c >> 2)))];
    }
    if (std::all_of(v + 1, v + 8, [&](float x) { return x == v[0]; })) continue;
    // HHH: the sign of each corner is the product of its three axis signs.
    double d = 0;
    for (int c = 0; c < 8; ++c) d += ((__builtin_popcount(c) & 1) ? -1.0 : 1.0) * v[c];
    coefficients.push_back(static_cast<float>(std::fabs(d) / std::sqrt(8.0)));
  }
  if (coefficients.empty()) return 0;
  const size_t mid = coefficients.size() / 2;
  std::nth_element(coefficients.begin(), coefficients.begin() + static_cast<std::ptrdiff_t>(mid), coefficients.end());
  return coefficients[mid] / 0.6745;
}

double AutoWarpSigma(double noise_sigma) {
  return std::min(kMaxAutoWarpSigma, kWarpSigmaPerNoise * std::max(0.0, noise_sigma));
}

}  // namespace tessera::registration
