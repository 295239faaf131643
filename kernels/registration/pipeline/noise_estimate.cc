#include "kernels/registration/pipeline/noise_estimate.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace tessera::registration {

double EstimateNoiseSigma(const NDArray& image, int64_t max_blocks) {
  const int64_t nx = image.dim(0), ny = image.dim(1), nz = image.dim(2);
  // Blocks span 2 voxels along each axis longer than 1 (2x2x2 in 3-D, 2x2 in
  // a 2-D image stored as (nx, ny, 1)); the coefficient is the product of the
  // axes' Haar high-pass filters.
  const int64_t sx = nx > 1 ? 2 : 1, sy = ny > 1 ? 2 : 1, sz = nz > 1 ? 2 : 1;
  const int corners = static_cast<int>(sx * sy * sz);
  if (corners < 4) return 0;  // a line or a point: no diagonal detail
  const int64_t bx = nx / sx, by = ny / sy, bz = nz / sz;
  const int64_t blocks = bx * by * bz;
  if (blocks == 0) return 0;
  const int64_t stride = std::max<int64_t>(1, (blocks + max_blocks - 1) / max_blocks);
  const float* p = image.data<float>();
  std::vector<float> coefficients;
  coefficients.reserve(static_cast<size_t>(blocks / stride + 1));
  const double norm = std::sqrt(static_cast<double>(corners));
  for (int64_t b = 0; b < blocks; b += stride) {
    const int64_t i = sx * (b % bx), j = sy * ((b / bx) % by), k = sz * (b / (bx * by));
    float v[8];
    int sign[8];
    int c = 0;
    for (int64_t dk = 0; dk < sz; ++dk) {
      for (int64_t dj = 0; dj < sy; ++dj) {
        for (int64_t di = 0; di < sx; ++di, ++c) {
          v[c] = p[(i + di) + nx * ((j + dj) + ny * (k + dk))];
          sign[c] = ((di + dj + dk) & 1) ? -1 : 1;
        }
      }
    }
    if (std::all_of(v + 1, v + corners, [&](float x) { return x == v[0]; })) continue;
    double d = 0;
    for (int q = 0; q < corners; ++q) d += sign[q] * static_cast<double>(v[q]);
    coefficients.push_back(static_cast<float>(std::fabs(d) / norm));
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
