#include "kernels/reconstruction/mri/ellipse_phantom.h"

#include <cmath>

#include "common/parallel.h"

namespace tessera {
namespace recon {
namespace mri {
namespace {

constexpr double kPi = 3.14159265358979323846;

// integral over the unit disc of exp(-2 pi i q . u) du = J1(2 pi |q|) / |q|.
double UnitDiscSpectrum(double q) {
  const double x = 2 * kPi * q;
  // Below x = 1e-3 the series pi (1 - x^2 / 8) is exact to double precision.
  if (x < 1e-3) return kPi * (1 - x * x / 8);
  return std::cyl_bessel_j(1.0, x) / q;
}

}  // namespace

std::vector<Ellipse> SheppLogan(double scale) {
  // value, a, b, x0, y0, angle (degrees) on [-1, 1]^2.
  static constexpr double kTable[10][6] = {
      {1.0, 0.69, 0.92, 0, 0, 0},          {-0.8, 0.6624, 0.874, 0, -0.0184, 0},
      {-0.2, 0.11, 0.31, 0.22, 0, -18},    {-0.2, 0.16, 0.41, -0.22, 0, 18},
      {0.1, 0.21, 0.25, 0, 0.35, 0},       {0.1, 0.046, 0.046, 0, 0.1, 0},
      {0.1, 0.046, 0.046, 0, -0.1, 0},     {0.1, 0.046, 0.023, -0.08, -0.605, 0},
      {0.1, 0.023, 0.023, 0, -0.606, 0},   {0.1, 0.023, 0.046, 0.06, -0.605, 0},
  };
  const double s = 0.5 * scale;  // [-1, 1] -> scale x [-1/2, 1/2]
  std::vector<Ellipse> phantom;
  for (const auto& row : kTable) {
    phantom.push_back({row[0], s * row[3], s * row[4], s * row[1], s * row[2], row[5] * kPi / 180});
  }
  return phantom;
}

double PhantomValueAt(const std::vector<Ellipse>& phantom, double rx, double ry) {
  double value = 0;
  for (const Ellipse& e : phantom) {
    const double c = std::cos(e.angle), s = std::sin(e.angle);
    const double dx = rx - e.cx, dy = ry - e.cy;
    const double u = (c * dx + s * dy) / e.ax, v = (-s * dx + c * dy) / e.ay;
    if (u * u + v * v <= 1) value += e.value;
  }
  return value;
}

std::complex<double> PhantomSpectrum(const std::vector<Ellipse>& phantom, double kx, double ky) {
  // r = c + R D u maps the unit disc onto the ellipse (dr = ax ay du), so
  // F(k) = value ax ay exp(-2 pi i k . c) J1(2 pi |D R^T k|) / |D R^T k|.
  std::complex<double> sum = 0;
  for (const Ellipse& e : phantom) {
    const double c = std::cos(e.angle), s = std::sin(e.angle);
    const double qx = e.ax * (c * kx + s * ky), qy = e.ay * (-s * kx + c * ky);
    const double disc = UnitDiscSpectrum(std::hypot(qx, qy));
    sum += std::polar(e.value * e.ax * e.ay * disc, -2 * kPi * (kx * e.cx + ky * e.cy));
  }
  return sum;
}

std::vector<std::complex<float>> PhantomKspace(const std::vector<Ellipse>& phantom, const Trajectory2D& trajectory,
                                               int64_t nx, int64_t ny) {
  const int64_t m = trajectory.size();
  std::vector<std::complex<float>> out(m);
  const double scale = static_cast<double>(nx) * ny;
  ParallelFor(m, [&](int64_t begin, int64_t end, int) {
    for (int64_t j = begin; j < end; ++j) {
      out[j] = std::complex<float>(scale * PhantomSpectrum(phantom, trajectory.kx[j], trajectory.ky[j]));
    }
  }, 256);
  return out;
}

absl::StatusOr<std::vector<std::complex<float>>> PhantomCoilKspace(const std::vector<Ellipse>& phantom,
                                                                   const CoilMapSeries& series,
                                                                   const Trajectory2D& trajectory, int64_t nx,
                                                                   int64_t ny) {
  if (series.coils < 1 || series.coefficients.size() != static_cast<size_t>(series.coils) * series.terms_per_coil()) {
    return absl::InvalidArgumentError("phantom coil k-space: the coil map series is empty or inconsistent");
  }
  const int64_t m = trajectory.size();
  const int side = 2 * series.order + 1, terms = series.terms_per_coil();
  std::vector<std::complex<float>> out(m * series.coils);
  const double scale = static_cast<double>(nx) * ny;
  ParallelFor(m, [&](int64_t begin, int64_t end, int) {
    std::vector<std::complex<double>> shifted(terms);
    for (int64_t j = begin; j < end; ++j) {
      for (int qy = 0; qy < side; ++qy) {
        for (int qx = 0; qx < side; ++qx) {
          shifted[qx + side * qy] = PhantomSpectrum(phantom, trajectory.kx[j] - (qx - series.order),
                                                    trajectory.ky[j] - (qy - series.order));
        }
      }
      for (int c = 0; c < series.coils; ++c) {
        const std::complex<double>* a = series.coefficients.data() + static_cast<size_t>(c) * terms;
        std::complex<double> sum = 0;
        for (int t = 0; t < terms; ++t) sum += a[t] * shifted[t];
        out[j + m * c] = std::complex<float>(scale * sum);
      }
    }
  }, 64);
  return out;
}

std::vector<float> RasterizePhantom(const std::vector<Ellipse>& phantom, int64_t nx, int64_t ny, int supersample) {
  const int s = std::max(1, supersample);
  std::vector<float> image(nx * ny);
  for (int64_t j = 0; j < ny; ++j) {
    for (int64_t i = 0; i < nx; ++i) {
      double sum = 0;
      for (int b = 0; b < s; ++b) {
        for (int a = 0; a < s; ++a) {
          const double rx = (i - nx / 2 + (a + 0.5) / s - 0.5) / nx;
          const double ry = (j - ny / 2 + (b + 0.5) / s - 0.5) / ny;
          sum += PhantomValueAt(phantom, rx, ry);
        }
      }
      image[i + nx * j] = static_cast<float>(sum / (s * s));
    }
  }
  return image;
}

}  // namespace mri
}  // namespace recon
}  // namespace tessera
