#include "services/reconstruction/phantoms/analytic_sinogram.h"

#include <algorithm>
#include <cmath>

#include "gtest/gtest.h"

namespace tessera::recon::phantoms {
namespace {

constexpr double kPi = 3.14159265358979323846;

float At(const NDArray& sino, const ProjectionGeometry& p, int64_t c, int64_t r, int64_t view) {
  return sino.data<float>()[c + p.det_cols * (r + p.det_rows * view)];
}

TEST(AnalyticSinogramTest, CentredDiscIsTheSameAtEveryAngle) {
  const Phantom disc = Disc(20, 1.5, true);
  for (bool fan : {false, true}) {
    CtGeometry g;
    g.volume = CenteredVolume(64, 64);
    g.projection = fan ? FanBeam2D(EvenAngles(36, 2 * kPi), 1.0, 81, 150, 100)
                       : ParallelBeam2D(EvenAngles(36, kPi), 0.75, 81);
    absl::StatusOr<NDArray> sino = AnalyticSinogram(disc, g, 2);
    ASSERT_TRUE(sino.ok()) << sino.status();
    ASSERT_EQ(sino->shape(), (Shape{81, 1, 36}));
    for (int64_t v = 1; v < 36; ++v) {
      for (int64_t c = 0; c < 81; ++c) ASSERT_NEAR(At(*sino, g.projection, c, 0, v), At(*sino, g.projection, c, 0, 0), 1e-4);
    }
    EXPECT_GT(At(*sino, g.projection, 40, 0, 0), 0.99 * 2 * 20 * 1.5);  // central ray: the diameter
    EXPECT_EQ(At(*sino, g.projection, 0, 0, 0), 0.0f);                  // misses the disc
  }
}

// Integral over a detector pixel [x0, x1] of the chord 2 sqrt(r^2 - x^2) of a disc.
double DiscChordIntegral(double r, double x0, double x1) {
  auto f = [r](double x) {
    x = std::clamp(x, -r, r);
    return x * std::sqrt(r * r - x * x) + r * r * std::asin(x / r);
  };
  return f(x1) - f(x0);
}

TEST(AnalyticSinogramTest, SupersamplingAveragesOverThePixel) {
  CtGeometry g;
  g.volume = CenteredVolume(32, 32);
  g.projection = ParallelBeam2D({0.3}, 2.0, 16);
  const double r = 9.3;
  absl::StatusOr<NDArray> sino = AnalyticSinogram(Disc(r, 1.0, true), g, 64);
  ASSERT_TRUE(sino.ok());
  for (int64_t c = 0; c < 16; ++c) {
    const double x0 = (c - 7.5 - 0.5) * 2.0;
    EXPECT_NEAR(At(*sino, g.projection, c, 0, 0), DiscChordIntegral(r, x0, x0 + 2.0) / 2.0, 2e-3) << c;
  }
}

TEST(AnalyticSinogramTest, ParallelViewsConserveTheSheppLoganMass) {
  const Phantom sl = SheppLogan2D(60);
  double mass = 0;
  for (const Ellipsoid& e : sl.ellipsoids) mass += e.value * kPi * e.semi_axes.x * e.semi_axes.y;
  CtGeometry g;
  g.volume = CenteredVolume(64, 64);
  g.projection = ParallelBeam2D(EvenAngles(12, kPi), 0.8, 100);
  absl::StatusOr<NDArray> sino = AnalyticSinogram(sl, g, 8);
  ASSERT_TRUE(sino.ok());
  for (int64_t v = 0; v < 12; ++v) {
    double sum = 0;
    for (int64_t c = 0; c < 100; ++c) sum += At(*sino, g.projection, c, 0, v);
    EXPECT_NEAR(sum * 0.8, mass, 2e-3 * mass) << v;
  }
}

TEST(AnalyticSinogramTest, FanAndConeRaysFollowAstraConventions) {
  // Fan, view 0: source (0, -DSO), detector through (0, DOD) along +x. A disc
  // whose centre projects onto the centre of column 30 gives its diameter there.
  const double dso = 200, dod = 100, w = 1.5;
  const double cy = 10, mag = (dso + dod) / (cy + dso);
  const int64_t cols = 41;
  const double cx = (30 - 20) * w / mag;
  CtGeometry fan;
  fan.volume = CenteredVolume(64, 64);
  fan.projection = FanBeam2D({0.0}, w, cols, dso, dod);
  absl::StatusOr<NDArray> sino = AnalyticSinogram(Disc(3, 1.0, true, {cx, cy, 0}), fan, 1);
  ASSERT_TRUE(sino.ok()) << sino.status();
  EXPECT_NEAR(At(*sino, fan.projection, 30, 0, 0), 6.0, 1e-5);
  EXPECT_LT(At(*sino, fan.projection, 30 - 8, 0, 0), 1e-6);

  // Cone, view 0: u along +x, v along +z; a ball projecting onto (col 8, row 3).
  const double cz = (3 - 5.5) * 1.25 / mag;
  CtGeometry cone;
  cone.volume = CenteredVolume(32, 32, 32);
  cone.projection = ConeBeam({0.0}, w, 1.25, 12, 17, dso, dod);
  const double bx = (8 - 8) * w / mag;
  // Row 3 centre sits at (3 - 5.5) v: the ball is put exactly on that ray.
  sino = AnalyticSinogram(Disc(2.5, 2.0, false, {bx, cy, cz}), cone, 1);
  ASSERT_TRUE(sino.ok()) << sino.status();
  EXPECT_NEAR(At(*sino, cone.projection, 8, 3, 0), 2 * 2.5 * 2.0, 1e-5);
  EXPECT_LT(At(*sino, cone.projection, 8, 11, 0), 1e-6);
}

TEST(AnalyticSinogramTest, RefusesMismatchedInput) {
  CtGeometry cone;
  cone.volume = CenteredVolume(8, 8, 8);
  cone.projection = ConeBeam({0.0}, 1, 1, 4, 4, 50, 50);
  EXPECT_EQ(AnalyticSinogram(Disc(2, 1, true), cone).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AnalyticSinogram(Disc(2, 1, false), cone, 0).status().code(), absl::StatusCode::kInvalidArgument);
  cone.projection.det_cols = 0;
  EXPECT_EQ(AnalyticSinogram(Disc(2, 1, false), cone).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::recon::phantoms
