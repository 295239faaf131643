#include "kernels/reconstruction/mri/espirit3d_test_data.h"

#include <cmath>

namespace tessera {
namespace recon {
namespace mri {
namespace {

constexpr double kPi = 3.14159265358979323846;
using Complex64 = std::complex<double>;

constexpr double kOuter[3] = {0.36, 0.30, 0.33};  // semi-axes, FOV units

double Position(int64_t i, int64_t n) { return n == 1 ? 0.0 : (i - n / 2) / static_cast<double>(n); }

double EllipsoidValue(double x, double y, double z, const double axes[3]) {
  return (x / axes[0]) * (x / axes[0]) + (y / axes[1]) * (y / axes[1]) + (z / axes[2]) * (z / axes[2]);
}

// In-place centred forward DFT along one axis of a dims grid (exponent -1).
void CentredDftAxis(std::vector<Complex64>* grid, const std::array<int64_t, 3>& dims, int axis) {
  const int64_t n = dims[axis];
  if (n == 1) return;
  const int64_t stride = axis == 0 ? 1 : (axis == 1 ? dims[0] : dims[0] * dims[1]);
  std::vector<Complex64> twiddle(n * n), line(n);
  for (int64_t k = 0; k < n; ++k) {
    for (int64_t r = 0; r < n; ++r) twiddle[k * n + r] = std::polar(1.0, -2 * kPi * (k - n / 2) * (r - n / 2) / n);
  }
  const int64_t total = dims[0] * dims[1] * dims[2];
  for (int64_t start = 0; start < total; ++start) {
    if ((start / stride) % n != 0) continue;  // one line per start at axis index 0
    for (int64_t r = 0; r < n; ++r) line[r] = (*grid)[start + r * stride];
    for (int64_t k = 0; k < n; ++k) {
      Complex64 s = 0;
      for (int64_t r = 0; r < n; ++r) s += twiddle[k * n + r] * line[r];
      (*grid)[start + k * stride] = s;
    }
  }
}

}  // namespace

bool Espirit3dProblem::Inside(int64_t i, int64_t j, int64_t k, double scale) const {
  const double axes[3] = {kOuter[0] * scale, kOuter[1] * scale, kOuter[2] * scale};
  return EllipsoidValue(Position(i, dims[0]), Position(j, dims[1]), Position(k, dims[2]), axes) <= 1;
}

Espirit3dProblem MakeEspirit3dProblem(std::array<int64_t, 3> dims, int coils) {
  Espirit3dProblem p;
  p.dims = dims;
  p.coils = coils;
  const int64_t voxels = dims[0] * dims[1] * dims[2];
  p.maps.resize(static_cast<size_t>(coils) * voxels);
  p.kspace.resize(p.maps.size());
  const double inner[3] = {0.15, 0.12, 0.14};
  std::vector<Complex64> object(voxels), product(voxels);
  std::vector<Complex64> s(coils);
  for (int64_t k = 0; k < dims[2]; ++k) {
    for (int64_t j = 0; j < dims[1]; ++j) {
      for (int64_t i = 0; i < dims[0]; ++i) {
        const double x = Position(i, dims[0]), y = Position(j, dims[1]), z = Position(k, dims[2]);
        const int64_t at = i + dims[0] * (j + dims[1] * k);
        double value = EllipsoidValue(x, y, z, kOuter) <= 1 ? 1.0 + 0.5 * x - 0.3 * z : 0.0;
        if (EllipsoidValue(x - 0.05, y + 0.04, z, inner) <= 1) value += 0.8;
        object[at] = value;
        double norm = 0;
        for (int c = 0; c < coils; ++c) {
          const double angle = 2 * kPi * c / coils;
          const double cx = 0.8 * std::cos(angle), cy = 0.8 * std::sin(angle), cz = c % 2 == 0 ? 0.25 : -0.25;
          const double distance = std::sqrt((x - cx) * (x - cx) + (y - cy) * (y - cy) + (z - cz) * (z - cz));
          s[c] = std::polar(1.0 / distance, angle + kPi * (0.6 * x * std::cos(angle) + 0.4 * y - 0.5 * z));
          norm += std::norm(s[c]);
        }
        for (int c = 0; c < coils; ++c) p.maps[c * voxels + at] = std::complex<float>(s[c] / std::sqrt(norm));
      }
    }
  }
  for (int c = 0; c < coils; ++c) {
    for (int64_t at = 0; at < voxels; ++at) product[at] = object[at] * Complex64(p.maps[c * voxels + at]);
    for (int axis = 0; axis < 3; ++axis) CentredDftAxis(&product, dims, axis);
    for (int64_t at = 0; at < voxels; ++at) p.kspace[c * voxels + at] = std::complex<float>(product[at]);
  }
  return p;
}

}  // namespace mri
}  // namespace recon
}  // namespace tessera
