// ESPIRiT on exact (analytic) 8-coil k-space of the Shepp-Logan phantom with
// birdcage maps (coil_maps.h, ellipse_phantom.h): the maps are unit-norm
// over coils inside the object, 0 away from it (crop 0.8), and parallel to
// the true maps (|<S_espirit, S_true>| ~ 1); CG-SENSE of radial data with
// maps estimated from that data (gridded centre) reaches an NRMSE close to
// CG-SENSE with the true maps; reruns bit-identical; argument errors.
#include "kernels/reconstruction/mri/espirit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdio>
#include <vector>

#include "common/device.h"
#include "kernels/reconstruction/mri/cg_sense.h"
#include "kernels/reconstruction/mri/coil_maps.h"
#include "kernels/reconstruction/mri/ellipse_phantom.h"
#include "kernels/reconstruction/mri/espirit_gridding.h"
#include "kernels/reconstruction/mri/trajectory.h"

namespace tessera {
namespace recon {
namespace mri {
namespace {

using Complex = std::complex<float>;

constexpr int kCoils = 8;

Trajectory2D CartesianGrid(int64_t n) {
  Trajectory2D t;
  t.samples = n;
  t.spokes = n;
  for (int64_t v = 0; v < n; ++v) {
    for (int64_t u = 0; u < n; ++u) {
      t.kx.push_back(static_cast<float>(u - n / 2));
      t.ky.push_back(static_cast<float>(v - n / 2));
    }
  }
  return t;
}

struct Phantom {
  int64_t n = 0;
  std::vector<Complex> true_maps;
  std::vector<float> truth;
  CoilMapSeries series;
  std::vector<Ellipse> ellipses = SheppLogan(0.9);
};

const Phantom& MakePhantom(int64_t n) {
  static Phantom* p64 = nullptr;
  static Phantom* p96 = nullptr;
  Phantom*& p = n == 64 ? p64 : p96;
  if (p == nullptr) {
    p = new Phantom;
    p->n = n;
    p->series = *BirdcageSeries({kCoils, 1.5}, 4);
    p->true_maps = EvaluateCoilSeries(p->series, n, n);
    p->truth = RasterizePhantom(p->ellipses, n, n);
  }
  return *p;
}

const std::vector<Complex>& CartesianKspace96() {
  static const std::vector<Complex>* k = [] {
    const Phantom& p = MakePhantom(96);
    return new std::vector<Complex>(*PhantomCoilKspace(p.ellipses, p.series, CartesianGrid(96), 96, 96));
  }();
  return *k;
}

// The skull's outer ellipse (SheppLogan(0.9): semi-axes 0.9 x (0.69, 0.92) / 2 FOV) grown by `grow`.
bool InsideSkull(int64_t i, int64_t j, int64_t n, double grow) {
  const double rx = (i - n / 2) / static_cast<double>(n), ry = (j - n / 2) / static_cast<double>(n);
  const double ax = 0.5 * 0.9 * 0.69 * grow, ay = 0.5 * 0.9 * 0.92 * grow;
  return (rx / ax) * (rx / ax) + (ry / ay) * (ry / ay) <= 1;
}

TEST(Espirit, CartesianMapsAreUnitNormInsideZeroOutsideAndMatchTheTrueMaps) {
  const Phantom& p = MakePhantom(96);
  const int64_t n = p.n, pixels = n * n;
  auto maps = EspiritCartesian(CartesianKspace96().data(), n, n, kCoils);
  ASSERT_TRUE(maps.ok()) << maps.status();
  EXPECT_EQ(maps->calibration_x, 24);
  EXPECT_EQ(maps->calibration_y, 24);
  EXPECT_GT(maps->kernels, 0);
  EXPECT_LT(maps->kernels, 6 * 6 * kCoils);

  int64_t inside = 0, inside_unit = 0, far = 0, far_zero = 0;
  double worst_norm_error = 0, min_match = 1, mean_match = 0;
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t at = i + n * j;
      double norm = 0;
      std::complex<double> dot = 0;
      for (int c = 0; c < kCoils; ++c) {
        const std::complex<double> s(maps->maps[c * pixels + at]), t(p.true_maps[c * pixels + at]);
        norm += std::norm(s);
        dot += std::conj(s) * t;
      }
      double true_norm = 0;
      for (int c = 0; c < kCoils; ++c) true_norm += std::norm(std::complex<double>(p.true_maps[c * pixels + at]));
      if (InsideSkull(i, j, n, 0.9)) {  // well inside the object
        ++inside;
        worst_norm_error = std::max(worst_norm_error, std::abs(norm - 1));
        if (std::abs(norm - 1) < 1e-3) ++inside_unit;
        const double match = std::abs(dot) / std::sqrt(true_norm);
        min_match = std::min(min_match, match);
        mean_match += match;
      } else if (!InsideSkull(i, j, n, 1.3)) {  // well outside
        ++far;
        if (norm == 0) ++far_zero;
      }
    }
  }
  mean_match /= inside;
  std::printf("ESPIRiT 96^2, %d kernels: unit-norm inside %lld / %lld (worst |norm - 1| %.2e), zero outside %lld / %lld, "
              "|<S, S_true>| mean %.5f min %.5f\n",
              maps->kernels, static_cast<long long>(inside_unit), static_cast<long long>(inside), worst_norm_error,
              static_cast<long long>(far_zero), static_cast<long long>(far), mean_match, min_match);
  EXPECT_EQ(inside_unit, inside);
  EXPECT_GT(far_zero, 0.95 * far);
  EXPECT_GT(mean_match, 0.99);
  EXPECT_GT(min_match, 0.95);
  // The eigenvalue is ~1 inside and the crop keeps exactly the pixels above 0.8.
  for (int64_t at = 0; at < pixels; ++at) {
    const bool kept = maps->maps[at] != Complex(0, 0) || maps->maps[pixels + at] != Complex(0, 0);
    EXPECT_EQ(kept, maps->eigenvalues[at] > 0.8f) << "pixel " << at;
  }
}

// Every step has a fixed order (FFTW_ESTIMATE plans, per-entry / per-pixel sums on one
// thread each, single-threaded reference LAPACK), so reruns are bit-identical.
TEST(Espirit, RerunsAreBitIdentical) {
  auto a = EspiritCartesian(CartesianKspace96().data(), 96, 96, kCoils);
  auto b = EspiritCartesian(CartesianKspace96().data(), 96, 96, kCoils);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(a->maps == b->maps);
  EXPECT_TRUE(a->eigenvalues == b->eigenvalues);
}

double MagnitudeNrmse(const std::vector<Complex>& image, const std::vector<float>& truth) {
  double num = 0, den = 0;
  for (size_t i = 0; i < truth.size(); ++i) {
    const double d = std::abs(image[i]) - truth[i];
    num += d * d;
    den += double{truth[i]} * truth[i];
  }
  return std::sqrt(num / den);
}

TEST(Espirit, CgSenseWithRadialEspiritMapsIsCloseToTrueMaps) {
  const Phantom& p = MakePhantom(64);
  const int64_t n = p.n;
  const Trajectory2D traj = *RadialTrajectory(n, 2 * n, 64, RadialOrdering::kGoldenAngle);
  const std::vector<Complex> kspace = *PhantomCoilKspace(p.ellipses, p.series, traj, n, n);
  auto maps = EspiritNonCartesian(traj, kspace.data(), kCoils, n, n);
  ASSERT_TRUE(maps.ok()) << maps.status();

  const Stream cpu = Stream::Cpu();
  CgSenseOptions options;
  options.iterations = 20;
  options.lambda = 1e-4;
  auto solve = [&](const std::vector<Complex>& m) {
    std::vector<Complex> image(n * n, Complex(NAN, NAN));
    SenseGeometry g{n, n, kCoils, traj.size(), traj.kx.data(), traj.ky.data(), m.data(), nullptr};
    auto r = CgSense(cpu, g, kspace.data(), options, image.data());
    EXPECT_TRUE(r.ok()) << r.status();
    return MagnitudeNrmse(image, p.truth);
  };
  const double with_true = solve(p.true_maps), with_espirit = solve(maps->maps);
  std::printf("CG-SENSE 64^2 radial 64 spokes, 20 iterations: NRMSE true maps %.4f, ESPIRiT maps %.4f (%d kernels)\n",
              with_true, with_espirit, maps->kernels);
  EXPECT_LT(with_espirit, 1.03 * with_true);
}

TEST(Espirit, GriddedCalibrationMatchesTheCartesianCentre) {
  // Radial data gridded to 24 x 24 vs the exact Cartesian k-space of the same centre.
  const Phantom& p = MakePhantom(64);
  const Trajectory2D traj = *RadialTrajectory(64, 128, 96, RadialOrdering::kGoldenAngle);
  const std::vector<Complex> radial = *PhantomCoilKspace(p.ellipses, p.series, traj, 64, 64);
  auto gridded = GriddedCalibration(traj, radial.data(), kCoils, 24);
  ASSERT_TRUE(gridded.ok()) << gridded.status();
  const std::vector<Complex> exact = *PhantomCoilKspace(p.ellipses, p.series, CartesianGrid(24), 64, 64);
  // Same scale (the least-squares image on the coarse grid reproduces the samples); measured
  // relative L2 0.006 with 10 CG iterations.
  const double scale = 1.0;
  double num = 0, den = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    num += std::norm(std::complex<double>((*gridded)[i]) - scale * std::complex<double>(exact[i]));
    den += std::norm(scale * std::complex<double>(exact[i]));
  }
  std::printf("gridded 24^2 calibration vs exact: relative L2 %.4f\n", std::sqrt(num / den));
  EXPECT_LT(std::sqrt(num / den), 0.02);
}

TEST(Espirit, Errors) {
  const int64_t n = 32;
  std::vector<Complex> kspace(n * n * 2, Complex(1, 0));
  EspiritOptions bad;
  bad.crop = 1.0;
  EXPECT_EQ(EspiritCartesian(kspace.data(), n, n, 2, bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = {};
  bad.threshold = 0;
  EXPECT_EQ(EspiritCartesian(kspace.data(), n, n, 2, bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = {};
  bad.calibration_size = 4;
  EXPECT_EQ(EspiritCartesian(kspace.data(), n, n, 2, bad).status().code(), absl::StatusCode::kInvalidArgument);
  // An unsampled centre line (every other phase-encoding line missing): no fully sampled region.
  std::vector<Complex> undersampled = kspace;
  for (int c = 0; c < 2; ++c) {
    for (int64_t v = 1; v < n; v += 2) {
      for (int64_t u = 0; u < n; ++u) undersampled[c * n * n + v * n + u] = 0;
    }
  }
  auto r = EspiritCartesian(undersampled.data(), n, n, 2);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("fully sampled"), std::string::npos) << r.status();
  // No signal.
  std::vector<Complex> zeros(24 * 24 * 2, Complex(0, 0));
  EXPECT_EQ(EspiritFromCalibration(zeros, 24, 24, 2, n, n).status().code(), absl::StatusCode::kInvalidArgument);
  // Image smaller than the calibration region, wrong data size.
  EXPECT_EQ(EspiritFromCalibration(std::vector<Complex>(24 * 24 * 2, 1), 24, 24, 2, 16, 16).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EspiritFromCalibration(std::vector<Complex>(10, 1), 24, 24, 2, n, n).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mri
}  // namespace recon
}  // namespace tessera
