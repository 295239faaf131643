// Simulators: trajectory ranges and orderings, birdcage normalisation and its
// Fourier series, the exact ellipse k-space against direct sums over a fine
// pixel grid (single and multi-coil), and density weights integrating to the
// sampled disc's area.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <vector>

#include "kernels/reconstruction/mri/coil_maps.h"
#include "kernels/reconstruction/mri/density_compensation.h"
#include "kernels/reconstruction/mri/ellipse_phantom.h"
#include "kernels/reconstruction/mri/trajectory.h"

namespace tessera {
namespace recon {
namespace mri {
namespace {

constexpr double kPi = 3.14159265358979323846;

TEST(Trajectory, RadialCoversHalfOpenRangeWithDcAtCentre) {
  auto t = RadialTrajectory(64, 128, 16, RadialOrdering::kUniform);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 128 * 16);
  for (int64_t s = 0; s < 16; ++s) {
    EXPECT_FLOAT_EQ(t->kx[64 + 128 * s], 0);
    EXPECT_FLOAT_EQ(t->ky[64 + 128 * s], 0);
    EXPECT_NEAR(std::hypot(t->kx[128 * s], t->ky[128 * s]), 32.0, 1e-4);  // first sample at -N/2
  }
  // Spoke 1 of 16 uniform spokes is at pi / 16.
  EXPECT_NEAR(std::atan2(t->ky[127 + 128], t->kx[127 + 128]), kPi / 16, 1e-5);
  auto g = RadialTrajectory(64, 128, 3, RadialOrdering::kGoldenAngle);
  ASSERT_TRUE(g.ok());
  EXPECT_NEAR(std::atan2(g->ky[127 + 128], g->kx[127 + 128]), kPi / 1.6180339887, 1e-5);
  EXPECT_FALSE(RadialTrajectory(1, 128, 3, RadialOrdering::kUniform).ok());
  EXPECT_FALSE(RadialTrajectory(64, 128, 0, RadialOrdering::kUniform).ok());
}

TEST(Trajectory, SpiralStaysInsideAndNufftCoordinatesAreInPiRange) {
  auto t = SpiralTrajectory(64, 500, 8, 10);
  ASSERT_TRUE(t.ok()) << t.status();
  double kmax = 0;
  for (int64_t j = 0; j < t->size(); ++j) kmax = std::max<double>(kmax, std::hypot(t->kx[j], t->ky[j]));
  EXPECT_LT(kmax, 32.0);
  EXPECT_GT(kmax, 31.5);
  std::vector<float> x, y;
  ToNufftCoordinates(*t, 64, 32, &x, &y);
  for (size_t j = 0; j < x.size(); ++j) {
    EXPECT_NEAR(x[j], 2 * kPi * t->kx[j] / 64, 1e-5);
    EXPECT_NEAR(y[j], 2 * kPi * t->ky[j] / 32, 1e-5);
  }
  EXPECT_FALSE(SpiralTrajectory(64, 500, 8, 0).ok());
}

TEST(CoilMaps, BirdcageIsNormalisedAndDistinctPerCoil) {
  BirdcageOptions options;
  auto maps = BirdcageMaps(32, 24, options);
  ASSERT_TRUE(maps.ok()) << maps.status();
  for (int64_t p = 0; p < 32 * 24; ++p) {
    double sum = 0;
    for (int c = 0; c < 8; ++c) sum += std::norm((*maps)[p + 32 * 24 * c]);
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
  // Coil 0 sits at +x: stronger at the right edge than the left.
  EXPECT_GT(std::abs((*maps)[31 + 32 * 12]), 2 * std::abs((*maps)[0 + 32 * 12]));
  EXPECT_FALSE(BirdcageMaps(32, 24, {8, 1.0}).ok());
  EXPECT_FALSE(BirdcageMaps(32, 24, {0, 1.5}).ok());
}

TEST(CoilMaps, SeriesApproximatesTheMaps) {
  BirdcageOptions options;
  auto series = BirdcageSeries(options, 6);
  ASSERT_TRUE(series.ok()) << series.status();
  auto maps = BirdcageMaps(48, 48, options);
  const auto approx = EvaluateCoilSeries(*series, 48, 48);
  // Inside the disc the phantoms occupy (|r| < 0.45 FOV); the periodic
  // series rings at the FOV's edges, where the maps do not wrap around.
  double num = 0, den = 0;
  for (int c = 0; c < 8; ++c) {
    for (int j = 0; j < 48; ++j) {
      for (int i = 0; i < 48; ++i) {
        if (std::hypot(i - 24, j - 24) > 0.45 * 48) continue;
        const size_t p = i + 48 * (j + 48 * c);
        num += std::norm(approx[p] - (*maps)[p]);
        den += std::norm((*maps)[p]);
      }
    }
  }
  EXPECT_LT(std::sqrt(num / den), 0.05);
  EXPECT_FALSE(BirdcageSeries(options, 33).ok());
}

// Direct sum nx ny / g^2 sum_pixels f(r) S(r) exp(-2 pi i k r) over a g x g
// grid of pixel centres with 4 x 4 subsamples: the Riemann sum of the
// integral the analytic spectrum computes exactly.
std::complex<double> RiemannSpectrum(const std::vector<Ellipse>& phantom, const CoilMapSeries* series, int coil,
                                     double kx, double ky, int g) {
  std::complex<double> sum = 0;
  for (int j = 0; j < g; ++j) {
    for (int i = 0; i < g; ++i) {
      const double rx = (i + 0.5) / g - 0.5, ry = (j + 0.5) / g - 0.5;
      const double f = PhantomValueAt(phantom, rx, ry);
      if (f == 0) continue;
      const std::complex<double> s = series ? series->At(coil, rx, ry) : 1.0;
      sum += f * s * std::polar(1.0, -2 * kPi * (kx * rx + ky * ry));
    }
  }
  return sum / (static_cast<double>(g) * g);
}

TEST(EllipsePhantom, SpectrumMatchesRiemannSums) {
  const auto phantom = SheppLogan();
  // DC: sum of value x area.
  double area = 0;
  for (const Ellipse& e : phantom) area += e.value * kPi * e.ax * e.ay;
  EXPECT_NEAR(PhantomSpectrum(phantom, 0, 0).real(), area, 1e-12);
  for (const auto& k : std::vector<std::pair<double, double>>{{0, 0}, {3.5, -1.25}, {-7, 10}, {12.3, 4.1}}) {
    const auto exact = PhantomSpectrum(phantom, k.first, k.second);
    const auto riemann = RiemannSpectrum(phantom, nullptr, 0, k.first, k.second, 1024);
    EXPECT_LT(std::abs(exact - riemann), 2e-3 * std::abs(PhantomSpectrum(phantom, 0, 0)))
        << k.first << ", " << k.second;
  }
}

TEST(EllipsePhantom, CoilKspaceMatchesRiemannSums) {
  const auto phantom = SheppLogan(0.9);
  auto series = BirdcageSeries({4, 1.5}, 3);
  ASSERT_TRUE(series.ok());
  Trajectory2D t;
  t.samples = 3;
  t.spokes = 1;
  t.kx = {0.f, 2.5f, -9.f};
  t.ky = {0.f, -4.f, 6.5f};
  auto data = PhantomCoilKspace(phantom, *series, t, 32, 32);
  ASSERT_TRUE(data.ok()) << data.status();
  const double scale = 32.0 * 32.0, dc = std::abs(PhantomSpectrum(phantom, 0, 0)) * scale;
  for (int c = 0; c < 4; ++c) {
    for (int j = 0; j < 3; ++j) {
      const auto riemann = scale * RiemannSpectrum(phantom, &*series, c, t.kx[j], t.ky[j], 512);
      EXPECT_LT(std::abs(std::complex<double>((*data)[j + 3 * c]) - riemann), 3e-3 * dc) << c << " " << j;
    }
  }
  CoilMapSeries empty;
  EXPECT_FALSE(PhantomCoilKspace(phantom, empty, t, 32, 32).ok());
}

TEST(EllipsePhantom, RasterizedValuesAndSingleCoilScale) {
  const auto phantom = SheppLogan();
  const auto image = RasterizePhantom(phantom, 64, 64);
  EXPECT_NEAR(image[32 + 64 * 32], 0.2, 1e-6);  // brain at the centre... (1 - 0.8)
  EXPECT_EQ(image[0], 0.0f);                    // corner outside the skull
  Trajectory2D t{1, 1, {0.f}, {0.f}};
  const auto dc = PhantomKspace(phantom, t, 64, 64);
  double sum = 0;
  for (float v : image) sum += v;
  EXPECT_NEAR(dc[0].real(), sum, 2e-3 * sum);  // s(0) = sum of pixel values
}

TEST(Density, RampAndPipeMenonIntegrateToTheDiscArea) {
  // Fully sampled radial (spokes >= pi/2 N): the weights tile the disc |k| < N/2.
  const int64_t n = 32;
  auto t = RadialTrajectory(n, 2 * n, 64, RadialOrdering::kUniform);
  ASSERT_TRUE(t.ok());
  auto ramp = RadialRampDensity(*t);
  auto pipe = PipeMenonDensity(*t, {30, 1.5});
  ASSERT_TRUE(ramp.ok() && pipe.ok());
  const double disc = kPi * (n / 2.0) * (n / 2.0);
  double sum_ramp = 0, sum_pipe = 0;
  for (float w : *ramp) sum_ramp += w;
  for (float w : *pipe) sum_pipe += w;
  EXPECT_NEAR(sum_ramp, disc, 0.03 * disc);
  EXPECT_NEAR(sum_pipe, disc, 0.1 * disc);
  // Mid-radius samples: Pipe-Menon's weight within 15 % of the ramp's.
  for (int64_t s = 0; s < 64; s += 7) {
    const int64_t j = 2 * n * s + n + n / 2;  // radius n/4
    EXPECT_NEAR((*pipe)[j], (*ramp)[j], 0.15 * (*ramp)[j]) << j;
  }
  EXPECT_FALSE(PipeMenonDensity(*t, {0, 1.5}).ok());
  EXPECT_FALSE(RadialRampDensity(Trajectory2D{}).ok());
}

TEST(Density, RadialDiametersAreRecognised) {
  // Which trajectories the MRI engine gives the analytic ramp instead of Pipe-Menon.
  for (RadialOrdering ordering : {RadialOrdering::kUniform, RadialOrdering::kGoldenAngle}) {
    auto t = RadialTrajectory(64, 128, 21, ordering);
    ASSERT_TRUE(t.ok());
    EXPECT_TRUE(IsRadialDiameters(*t));
    Trajectory2D bent = *t;
    bent.kx[5 * 128 + 100] += 0.05f;  // one sample off its spoke's line
    EXPECT_FALSE(IsRadialDiameters(bent));
    Trajectory2D shifted = *t;  // a spoke not through k = 0
    for (int i = 0; i < 128; ++i) shifted.ky[3 * 128 + i] += 1.0f;
    EXPECT_FALSE(IsRadialDiameters(shifted));
  }
  auto spiral = SpiralTrajectory(64, 500, 8, 10);
  ASSERT_TRUE(spiral.ok());
  EXPECT_FALSE(IsRadialDiameters(*spiral));
  EXPECT_FALSE(IsRadialDiameters(Trajectory2D{}));
}

}  // namespace
}  // namespace mri
}  // namespace recon
}  // namespace tessera
