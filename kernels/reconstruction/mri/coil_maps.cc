#include "kernels/reconstruction/mri/coil_maps.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace tessera {
namespace recon {
namespace mri {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr int kMaxSeriesOrder = 32;

absl::Status CheckOptions(const BirdcageOptions& options) {
  if (options.coils < 1) return absl::InvalidArgumentError(absl::StrCat("birdcage: coils = ", options.coils, " < 1"));
  if (!(options.coil_radius > 1) || !std::isfinite(options.coil_radius)) {
    return absl::InvalidArgumentError(
        absl::StrCat("birdcage: coil_radius = ", options.coil_radius, " must be > 1 (coils outside the FOV)"));
  }
  return absl::OkStatus();
}

double PixelPosition(int64_t i, int64_t n) { return (static_cast<double>(i) - static_cast<double>(n / 2)) / n; }

}  // namespace

std::vector<std::complex<double>> BirdcageAt(const BirdcageOptions& options, double rx, double ry) {
  std::vector<std::complex<double>> s(options.coils);
  // In half-FOV units, as the birdcage formula is usually written.
  const double u = 2 * rx, v = 2 * ry;
  double sum_sq = 0;
  for (int c = 0; c < options.coils; ++c) {
    const double theta = 2 * kPi * c / options.coils;
    const double dx = u - options.coil_radius * std::cos(theta);
    const double dy = v - options.coil_radius * std::sin(theta);
    const double distance = std::hypot(dx, dy);
    const double phase = std::atan2(dx, -dy) - theta;
    s[c] = std::polar(1.0 / distance, phase);
    sum_sq += std::norm(s[c]);
  }
  const double inv_rss = 1.0 / std::sqrt(sum_sq);
  for (auto& value : s) value *= inv_rss;
  return s;
}

absl::StatusOr<std::vector<std::complex<float>>> BirdcageMaps(int64_t nx, int64_t ny, const BirdcageOptions& options) {
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  if (nx < 1 || ny < 1) return absl::InvalidArgumentError(absl::StrCat("birdcage: image ", nx, " x ", ny));
  std::vector<std::complex<float>> maps(nx * ny * options.coils);
  for (int64_t j = 0; j < ny; ++j) {
    for (int64_t i = 0; i < nx; ++i) {
      const auto s = BirdcageAt(options, PixelPosition(i, nx), PixelPosition(j, ny));
      for (int c = 0; c < options.coils; ++c) maps[i + nx * (j + ny * c)] = std::complex<float>(s[c]);
    }
  }
  return maps;
}

std::complex<double> CoilMapSeries::At(int coil, double rx, double ry) const {
  const int side = 2 * order + 1;
  const std::complex<double>* a = coefficients.data() + static_cast<size_t>(coil) * terms_per_coil();
  // exp(2 pi i q r) by recurrence from q = -order.
  const std::complex<double> step_x = std::polar(1.0, 2 * kPi * rx), step_y = std::polar(1.0, 2 * kPi * ry);
  std::complex<double> ey = std::polar(1.0, -2 * kPi * order * ry), sum = 0;
  for (int qy = 0; qy < side; ++qy, ey *= step_y) {
    std::complex<double> ex = std::polar(1.0, -2 * kPi * order * rx), row = 0;
    for (int qx = 0; qx < side; ++qx, ex *= step_x) row += a[qx + side * qy] * ex;
    sum += row * ey;
  }
  return sum;
}

absl::StatusOr<CoilMapSeries> BirdcageSeries(const BirdcageOptions& options, int order) {
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  if (order < 0 || order > kMaxSeriesOrder) {
    return absl::InvalidArgumentError(absl::StrCat("birdcage series: order = ", order, " is not in [0, 32]"));
  }
  // Sample the maps on a grid fine enough that aliasing of the (smooth, but
  // not band-limited) maps into the kept coefficients is negligible.
  const int side = 2 * order + 1;
  const int grid = std::max(64, 4 * side);
  std::vector<std::complex<double>> samples(static_cast<size_t>(grid) * grid * options.coils);
  for (int j = 0; j < grid; ++j) {
    for (int i = 0; i < grid; ++i) {
      const auto s = BirdcageAt(options, PixelPosition(i, grid), PixelPosition(j, grid));
      for (int c = 0; c < options.coils; ++c) samples[i + grid * (j + static_cast<size_t>(grid) * c)] = s[c];
    }
  }
  CoilMapSeries series;
  series.coils = options.coils;
  series.order = order;
  series.coefficients.assign(static_cast<size_t>(options.coils) * side * side, 0);
  // Separable DFT: first along x for each kept qx, then along y.
  std::vector<std::complex<double>> ex(static_cast<size_t>(side) * grid), ey(static_cast<size_t>(side) * grid);
  for (int q = 0; q < side; ++q) {
    for (int g = 0; g < grid; ++g) {
      ex[q + side * g] = std::polar(1.0, -2 * kPi * (q - order) * PixelPosition(g, grid));
    }
  }
  ey = ex;
  std::vector<std::complex<double>> partial(static_cast<size_t>(side) * grid);
  for (int c = 0; c < options.coils; ++c) {
    const std::complex<double>* img = samples.data() + static_cast<size_t>(grid) * grid * c;
    for (int j = 0; j < grid; ++j) {
      for (int q = 0; q < side; ++q) {
        std::complex<double> sum = 0;
        for (int i = 0; i < grid; ++i) sum += img[i + grid * j] * ex[q + side * i];
        partial[q + side * j] = sum;
      }
    }
    std::complex<double>* a = series.coefficients.data() + static_cast<size_t>(c) * side * side;
    for (int qy = 0; qy < side; ++qy) {
      for (int qx = 0; qx < side; ++qx) {
        std::complex<double> sum = 0;
        for (int j = 0; j < grid; ++j) sum += partial[qx + side * j] * ey[qy + side * j];
        a[qx + side * qy] = sum / (static_cast<double>(grid) * grid);
      }
    }
  }
  return series;
}

std::vector<std::complex<float>> EvaluateCoilSeries(const CoilMapSeries& series, int64_t nx, int64_t ny) {
  std::vector<std::complex<float>> maps(nx * ny * series.coils);
  for (int c = 0; c < series.coils; ++c) {
    for (int64_t j = 0; j < ny; ++j) {
      for (int64_t i = 0; i < nx; ++i) {
        maps[i + nx * (j + ny * c)] = std::complex<float>(series.At(c, PixelPosition(i, nx), PixelPosition(j, ny)));
      }
    }
  }
  return maps;
}

}  // namespace mri
}  // namespace recon
}  // namespace tessera
