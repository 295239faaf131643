#include "kernels/reconstruction/mri/ellipsoid_phantom.h"

#include <array>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"

namespace tessera {
namespace recon {
namespace mri {
namespace {

constexpr double kPi = 3.14159265358979323846;

// integral over the unit ball of exp(-2 pi i q . u) du.
double UnitBallSpectrum(double q) {
  const double x = 2 * kPi * q;
  // Below x = 1e-2 the series (4 pi / 3)(1 - x^2 / 10) is exact to ~1e-10.
  if (x < 1e-2) return 4 * kPi / 3 * (1 - x * x / 10);
  return (std::sin(x) - x * std::cos(x)) / (2 * kPi * kPi * q * q * q);
}

// phantom3d's matrix alpha (rows: the ellipsoid's axes in volume coordinates).
std::array<double, 9> Rotation(const Ellipsoid& e) {
  const double cf = std::cos(e.phi), sf = std::sin(e.phi), ct = std::cos(e.theta), st = std::sin(e.theta);
  const double cp = std::cos(e.psi), sp = std::sin(e.psi);
  return {cp * cf - ct * sf * sp,  cp * sf + ct * cf * sp,  sp * st,
          -sp * cf - ct * sf * cp, -sp * sf + ct * cf * cp, cp * st,
          st * sf,                 -st * cf,                ct};
}

// F(k) of each ellipsoid summed, its matrix alpha precomputed (rotations[i]
// belongs to phantom[i]).
std::complex<double> Spectrum(const std::vector<Ellipsoid>& phantom, const std::vector<std::array<double, 9>>& rotations,
                              double kx, double ky, double kz) {
  // r = c + alpha^T D u maps the unit ball onto the ellipsoid (dr = ax ay az du),
  // so F(k) = value ax ay az exp(-2 pi i k . c) B(|D alpha k|).
  std::complex<double> sum = 0;
  for (size_t i = 0; i < phantom.size(); ++i) {
    const Ellipsoid& e = phantom[i];
    const std::array<double, 9>& a = rotations[i];
    const double qx = e.ax * (a[0] * kx + a[1] * ky + a[2] * kz);
    const double qy = e.ay * (a[3] * kx + a[4] * ky + a[5] * kz);
    const double qz = e.az * (a[6] * kx + a[7] * ky + a[8] * kz);
    const double ball = UnitBallSpectrum(std::sqrt(qx * qx + qy * qy + qz * qz));
    sum += std::polar(e.value * e.ax * e.ay * e.az * ball, -2 * kPi * (kx * e.cx + ky * e.cy + kz * e.cz));
  }
  return sum;
}

std::vector<std::array<double, 9>> Rotations(const std::vector<Ellipsoid>& phantom) {
  std::vector<std::array<double, 9>> r;
  for (const Ellipsoid& e : phantom) r.push_back(Rotation(e));
  return r;
}

}  // namespace

std::vector<Ellipsoid> SheppLogan3D(double scale) {
  // value, a, b, c, x0, y0, z0, phi, theta, psi (degrees) on [-1, 1]^3.
  static constexpr double kTable[10][10] = {
      {1.0, 0.69, 0.92, 0.81, 0, 0, 0, 0, 0, 0},
      {-0.8, 0.6624, 0.874, 0.78, 0, -0.0184, 0, 0, 0, 0},
      {-0.2, 0.11, 0.31, 0.22, 0.22, 0, 0, -18, 0, 10},
      {-0.2, 0.16, 0.41, 0.28, -0.22, 0, 0, 18, 0, 10},
      {0.1, 0.21, 0.25, 0.41, 0, 0.35, -0.15, 0, 0, 0},
      {0.1, 0.046, 0.046, 0.05, 0, 0.1, 0.25, 0, 0, 0},
      {0.1, 0.046, 0.046, 0.05, 0, -0.1, 0.25, 0, 0, 0},
      {0.1, 0.046, 0.023, 0.05, -0.08, -0.605, 0, 0, 0, 0},
      {0.1, 0.023, 0.023, 0.02, 0, -0.606, 0, 0, 0, 0},
      {0.1, 0.023, 0.046, 0.02, 0.06, -0.605, 0, 0, 0, 0},
  };
  const double s = 0.5 * scale, deg = kPi / 180;
  std::vector<Ellipsoid> phantom;
  for (const auto& r : kTable) {
    phantom.push_back({r[0], s * r[4], s * r[5], s * r[6], s * r[1], s * r[2], s * r[3], r[7] * deg, r[8] * deg,
                       r[9] * deg});
  }
  return phantom;
}

double PhantomValueAt3D(const std::vector<Ellipsoid>& phantom, double rx, double ry, double rz) {
  double value = 0;
  for (const Ellipsoid& e : phantom) {
    const std::array<double, 9> a = Rotation(e);
    const double dx = rx - e.cx, dy = ry - e.cy, dz = rz - e.cz;
    const double u = (a[0] * dx + a[1] * dy + a[2] * dz) / e.ax;
    const double v = (a[3] * dx + a[4] * dy + a[5] * dz) / e.ay;
    const double w = (a[6] * dx + a[7] * dy + a[8] * dz) / e.az;
    if (u * u + v * v + w * w <= 1) value += e.value;
  }
  return value;
}

std::complex<double> PhantomSpectrum3D(const std::vector<Ellipsoid>& phantom, double kx, double ky, double kz) {
  return Spectrum(phantom, Rotations(phantom), kx, ky, kz);
}

std::vector<float> RasterizePhantom3D(const std::vector<Ellipsoid>& phantom, int64_t nx, int64_t ny, int64_t nz,
                                      int supersample) {
  const int s = std::max(1, supersample);
  std::vector<float> volume(nx * ny * nz);
  ParallelFor(nz, [&](int64_t begin, int64_t end, int) {
    for (int64_t l = begin; l < end; ++l) {
      for (int64_t j = 0; j < ny; ++j) {
        for (int64_t i = 0; i < nx; ++i) {
          double sum = 0;
          for (int c = 0; c < s; ++c) {
            for (int b = 0; b < s; ++b) {
              for (int a = 0; a < s; ++a) {
                sum += PhantomValueAt3D(phantom, (i - nx / 2 + (a + 0.5) / s - 0.5) / nx,
                                        (j - ny / 2 + (b + 0.5) / s - 0.5) / ny,
                                        (l - nz / 2 + (c + 0.5) / s - 0.5) / nz);
              }
            }
          }
          volume[i + nx * (j + ny * l)] = static_cast<float>(sum / (s * s * s));
        }
      }
    }
  }, 1);
  return volume;
}

std::complex<double> CoilMapSeries3D::At(int coil, double rx, double ry, double rz) const {
  const int n = side();
  const std::complex<double>* a = coefficients.data() + static_cast<size_t>(coil) * terms_per_coil();
  std::complex<double> sum = 0;
  for (int qz = 0; qz < n; ++qz) {
    for (int qy = 0; qy < n; ++qy) {
      for (int qx = 0; qx < n; ++qx) {
        const double phase = 2 * kPi * ((qx - order) * rx + (qy - order) * ry + (qz - order) * rz);
        sum += a[qx + n * (qy + n * qz)] * std::polar(1.0, phase);
      }
    }
  }
  return sum;
}

absl::StatusOr<CoilMapSeries3D> SmoothCoilSeries3D(int coils, int order) {
  if (coils < 1) return absl::InvalidArgumentError(absl::StrCat("3-D coil maps: coils = ", coils, " < 1"));
  if (order < 0 || order > 4) return absl::InvalidArgumentError(absl::StrCat("3-D coil maps: order = ", order));
  constexpr int kGrid = 16;
  constexpr double kRadius = 0.75;  // 1.5 half-FOVs
  // Normalised maps on a kGrid^3 grid over the FOV.
  const int64_t cells = int64_t{kGrid} * kGrid * kGrid;
  std::vector<std::complex<double>> maps(cells * coils);
  for (int64_t p = 0; p < cells; ++p) {
    const double r[3] = {(p % kGrid - kGrid / 2) / double{kGrid}, ((p / kGrid) % kGrid - kGrid / 2) / double{kGrid},
                         (p / (kGrid * kGrid) - kGrid / 2) / double{kGrid}};
    double norm = 0;
    for (int c = 0; c < coils; ++c) {
      const double theta = 2 * kPi * c / coils;
      const double d[3] = {r[0] - kRadius * std::cos(theta), r[1] - kRadius * std::sin(theta),
                           r[2] - (c % 2 == 0 ? -0.25 : 0.25)};
      const double dist = std::sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
      maps[p + cells * c] = std::polar(1 / dist, theta);
      norm += 1 / (dist * dist);
    }
    for (int c = 0; c < coils; ++c) maps[p + cells * c] /= std::sqrt(norm);
  }
  CoilMapSeries3D series;
  series.coils = coils;
  series.order = order;
  const int n = series.side();
  series.coefficients.assign(static_cast<size_t>(coils) * series.terms_per_coil(), 0);
  for (int c = 0; c < coils; ++c) {
    for (int t = 0; t < series.terms_per_coil(); ++t) {
      const int q[3] = {t % n - order, (t / n) % n - order, t / (n * n) - order};
      std::complex<double> sum = 0;
      for (int64_t p = 0; p < cells; ++p) {
        const double r[3] = {(p % kGrid - kGrid / 2) / double{kGrid},
                             ((p / kGrid) % kGrid - kGrid / 2) / double{kGrid},
                             (p / (kGrid * kGrid) - kGrid / 2) / double{kGrid}};
        sum += maps[p + cells * c] * std::polar(1.0, -2 * kPi * (q[0] * r[0] + q[1] * r[1] + q[2] * r[2]));
      }
      series.coefficients[static_cast<size_t>(c) * series.terms_per_coil() + t] = sum / static_cast<double>(cells);
    }
  }
  return series;
}

std::vector<std::complex<float>> EvaluateCoilSeries3D(const CoilMapSeries3D& series, int64_t nx, int64_t ny,
                                                      int64_t nz) {
  const int64_t npix = nx * ny * nz;
  std::vector<std::complex<float>> maps(npix * series.coils);
  ParallelFor(npix, [&](int64_t begin, int64_t end, int) {
    for (int64_t p = begin; p < end; ++p) {
      const double rx = (p % nx - nx / 2) / static_cast<double>(nx);
      const double ry = ((p / nx) % ny - ny / 2) / static_cast<double>(ny);
      const double rz = (p / (nx * ny) - nz / 2) / static_cast<double>(nz);
      for (int c = 0; c < series.coils; ++c) maps[p + npix * c] = std::complex<float>(series.At(c, rx, ry, rz));
    }
  }, 256);
  return maps;
}

absl::StatusOr<std::vector<std::complex<float>>> PhantomCoilKspace3D(const std::vector<Ellipsoid>& phantom,
                                                                     const CoilMapSeries3D& series, int64_t points,
                                                                     const float* kx, const float* ky, const float* kz,
                                                                     int64_t nx, int64_t ny, int64_t nz) {
  if (series.coils < 1 ||
      series.coefficients.size() != static_cast<size_t>(series.coils) * series.terms_per_coil()) {
    return absl::InvalidArgumentError("phantom 3-D coil k-space: the coil map series is empty or inconsistent");
  }
  if (points > 0 && (kx == nullptr || ky == nullptr || kz == nullptr)) {
    return absl::InvalidArgumentError("phantom 3-D coil k-space: a coordinate array is null");
  }
  const int n = series.side(), terms = series.terms_per_coil();
  std::vector<std::complex<float>> out(points * series.coils);
  const double scale = static_cast<double>(nx) * ny * nz;
  const std::vector<std::array<double, 9>> rotations = Rotations(phantom);
  ParallelFor(points, [&](int64_t begin, int64_t end, int) {
    std::vector<std::complex<double>> shifted(terms);
    for (int64_t j = begin; j < end; ++j) {
      for (int t = 0; t < terms; ++t) {
        shifted[t] = Spectrum(phantom, rotations, kx[j] - (t % n - series.order),
                              ky[j] - ((t / n) % n - series.order), kz[j] - (t / (n * n) - series.order));
      }
      for (int c = 0; c < series.coils; ++c) {
        const std::complex<double>* a = series.coefficients.data() + static_cast<size_t>(c) * terms;
        std::complex<double> sum = 0;
        for (int t = 0; t < terms; ++t) sum += a[t] * shifted[t];
        out[j + points * c] = std::complex<float>(scale * sum);
      }
    }
  }, 64);
  return out;
}

absl::StatusOr<std::vector<std::complex<float>>> PhantomCartesianKspace3D(const std::vector<Ellipsoid>& phantom,
                                                                          const CoilMapSeries3D& series, int64_t nx,
                                                                          int64_t ny, int64_t nz) {
  const int64_t npix = nx * ny * nz;
  std::vector<float> kx(npix), ky(npix), kz(npix);
  for (int64_t p = 0; p < npix; ++p) {
    kx[p] = static_cast<float>(p % nx - nx / 2);
    ky[p] = static_cast<float>((p / nx) % ny - ny / 2);
    kz[p] = static_cast<float>(p / (nx * ny) - nz / 2);
  }
  return PhantomCoilKspace3D(phantom, series, npix, kx.data(), ky.data(), kz.data(), nx, ny, nz);
}

}  // namespace mri
}  // namespace recon
}  // namespace tessera
