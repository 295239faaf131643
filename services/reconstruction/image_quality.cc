#include "services/reconstruction/image_quality.h"

#include <cmath>
#include <vector>

namespace tessera::reconstruction {
namespace {

constexpr int kRadius = 5;  // 11-pixel window
constexpr double kSigma = 1.5;

std::vector<double> GaussianWeights() {
  std::vector<double> w(2 * kRadius + 1);
  double sum = 0;
  for (int i = -kRadius; i <= kRadius; ++i) sum += w[i + kRadius] = std::exp(-0.5 * i * i / (kSigma * kSigma));
  for (double& v : w) v /= sum;
  return w;
}

// Separable valid-mode filtering of one (nx, ny) slice: out is (nx - 2r, ny - 2r).
std::vector<double> Filter(const std::vector<double>& in, int64_t nx, int64_t ny, const std::vector<double>& w) {
  const int64_t ox = nx - 2 * kRadius, oy = ny - 2 * kRadius;
  std::vector<double> rows(ox * ny), out(ox * oy);
  for (int64_t y = 0; y < ny; ++y) {
    for (int64_t x = 0; x < ox; ++x) {
      double s = 0;
      for (int k = 0; k <= 2 * kRadius; ++k) s += w[k] * in[(x + k) + nx * y];
      rows[x + ox * y] = s;
    }
  }
  for (int64_t y = 0; y < oy; ++y) {
    for (int64_t x = 0; x < ox; ++x) {
      double s = 0;
      for (int k = 0; k <= 2 * kRadius; ++k) s += w[k] * rows[x + ox * (y + k)];
      out[x + ox * y] = s;
    }
  }
  return out;
}

}  // namespace

double Rmse(const float* image, const float* truth, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(image[i]) - truth[i];
    sum += d * d;
  }
  return n > 0 ? std::sqrt(sum / static_cast<double>(n)) : 0.0;
}

double Ssim(const float* image, const float* truth, int64_t nx, int64_t ny, int64_t nz, double data_range) {
  if (nx <= 2 * kRadius || ny <= 2 * kRadius || nz <= 0) return NAN;
  const std::vector<double> w = GaussianWeights();
  const double c1 = std::pow(0.01 * data_range, 2), c2 = std::pow(0.03 * data_range, 2);
  const int64_t plane = nx * ny;
  double total = 0;
  int64_t count = 0;
  for (int64_t z = 0; z < nz; ++z) {
    std::vector<double> a(plane), b(plane), aa(plane), bb(plane), ab(plane);
    for (int64_t i = 0; i < plane; ++i) {
      a[i] = image[z * plane + i];
      b[i] = truth[z * plane + i];
      aa[i] = a[i] * a[i];
      bb[i] = b[i] * b[i];
      ab[i] = a[i] * b[i];
    }
    const std::vector<double> ma = Filter(a, nx, ny, w), mb = Filter(b, nx, ny, w);
    const std::vector<double> saa = Filter(aa, nx, ny, w), sbb = Filter(bb, nx, ny, w), sab = Filter(ab, nx, ny, w);
    for (size_t i = 0; i < ma.size(); ++i) {
      const double va = saa[i] - ma[i] * ma[i], vb = sbb[i] - mb[i] * mb[i], cov = sab[i] - ma[i] * mb[i];
      total += ((2 * ma[i] * mb[i] + c1) * (2 * cov + c2)) /
               ((ma[i] * ma[i] + mb[i] * mb[i] + c1) * (va + vb + c2));
      ++count;
    }
  }
  return total / static_cast<double>(count);
}

}  // namespace tessera::reconstruction
