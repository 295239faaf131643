#include "services/reconstruction/phantoms/phantom.h"

#include <cmath>
#include <random>

#include "gtest/gtest.h"
#include "services/reconstruction/phantoms/rasterize.h"

namespace tessera::recon::phantoms {
namespace {

constexpr double kPi = 3.14159265358979323846;

TEST(ChordTest, UnitCircleAtOffsetD) {
  const Ellipsoid circle = RotatedAboutZ(1.0, {0, 0, 0}, {1, 1, 1}, 0);
  for (double d : {0.0, 0.3, 0.6, 0.9, 0.999}) {
    // Any origin on the line, any non-unit direction, in 2-D and (as a sphere) in 3-D.
    EXPECT_NEAR(ChordLength(circle, true, {-1000, d, 0}, {2.5, 0, 0}), 2 * std::sqrt(1 - d * d), 1e-12) << d;
    EXPECT_NEAR(ChordLength(circle, true, {d, 7, 0}, {0, -0.1, 0}), 2 * std::sqrt(1 - d * d), 1e-12) << d;
    EXPECT_NEAR(ChordLength(circle, false, {0, d / std::sqrt(2), d / std::sqrt(2)}, {1, 0, 0}),
                2 * std::sqrt(1 - d * d), 1e-12)
        << d;
  }
  EXPECT_EQ(ChordLength(circle, true, {0, 1.2, 0}, {1, 0, 0}), 0.0);
  EXPECT_EQ(ChordLength(circle, false, {0, 0, 1.01}, {1, 1, 0}), 0.0);
  // 2-D ignores z of points and directions.
  EXPECT_NEAR(ChordLength(circle, true, {0, 0.6, 5}, {1, 0, 3}), 1.6, 1e-12);
}

// Line integral by marching along the line in small steps and asking
// ValueAt, the brute-force reference.
double NumericLineIntegral(const Phantom& phantom, Vec3 origin, Vec3 direction, double half_length, double step) {
  const double n = std::sqrt(direction.x * direction.x + direction.y * direction.y + direction.z * direction.z);
  direction = {direction.x / n, direction.y / n, direction.z / n};
  double sum = 0;
  for (double t = -half_length + 0.5 * step; t < half_length; t += step) {
    sum += ValueAt(phantom, {origin.x + t * direction.x, origin.y + t * direction.y, origin.z + t * direction.z});
  }
  return sum * step;
}

TEST(ChordTest, RotatedEllipseMatchesNumericIntegration) {
  Phantom p;
  p.is_2d = true;
  p.ellipsoids.push_back(RotatedAboutZ(1.5, {0.5, -0.3, 0}, {3, 1.2, 1}, 0.7));
  p.ellipsoids.push_back(RotatedAboutZ(-0.5, {1.0, 0.0, 0}, {0.8, 0.5, 1}, -1.1));
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int trial = 0; trial < 20; ++trial) {
    const double a = kPi * u(rng);
    const Vec3 origin{2 * u(rng), 2 * u(rng), 0};
    const Vec3 dir{std::cos(a), std::sin(a), 0};
    const double exact = LineIntegral(p, origin, dir);
    EXPECT_NEAR(exact, NumericLineIntegral(p, origin, dir, 8, 1e-4), 1e-3) << trial;
  }
}

TEST(ChordTest, RotatedEllipsoidMatchesNumericIntegration) {
  Ellipsoid e;
  e.value = 2.0;
  e.center = {0.3, -0.2, 0.4};
  e.semi_axes = {2.0, 1.0, 0.6};
  // R = Rz(0.5) Rx(0.8): a rotation no single axis describes.
  const double cz = std::cos(0.5), sz = std::sin(0.5), cx = std::cos(0.8), sx = std::sin(0.8);
  e.rotation = {cz, -sz * cx, sz * sx, sz, cz * cx, -cz * sx, 0, sx, cx};
  Phantom p;
  p.is_2d = false;
  p.ellipsoids.push_back(e);
  std::mt19937_64 rng(4);
  std::uniform_real_distribution<double> u(-1, 1);
  int hits = 0;
  for (int trial = 0; trial < 20; ++trial) {
    const Vec3 origin{0.8 * u(rng), 0.8 * u(rng), 0.8 * u(rng)};
    const Vec3 dir{u(rng), u(rng), u(rng)};
    const double exact = LineIntegral(p, origin, dir);
    hits += exact > 0;
    EXPECT_NEAR(exact, NumericLineIntegral(p, origin, dir, 6, 1e-4), 1e-3) << trial;
  }
  EXPECT_GT(hits, 15);
}

TEST(SheppLoganTest, ValuesAtKnownPoints) {
  const double r = 50;  // fov 100 mm
  const Phantom p2 = SheppLogan2D(100);
  EXPECT_DOUBLE_EQ(ValueAt(p2, {0, 0, 0}), 0.2);             // brain
  EXPECT_DOUBLE_EQ(ValueAt(p2, {0, 0.9 * r, 0}), 1.0);       // skull
  EXPECT_DOUBLE_EQ(ValueAt(p2, {0, 0.95 * r, 0}), 0.0);      // air
  EXPECT_DOUBLE_EQ(ValueAt(p2, {0, 0.35 * r, 0}), 0.3);      // ellipse 5
  EXPECT_NEAR(ValueAt(p2, {0.22 * r, 0, 0}), 0.0, 1e-15);    // ventricle
  EXPECT_DOUBLE_EQ(ValueAt(p2, {0, -0.1 * r, 0}), 0.3);      // ellipse 7
  // Centred elsewhere: the same picture shifted.
  EXPECT_DOUBLE_EQ(ValueAt(SheppLogan2D(100, {10, -5, 0}), {10, 0.35 * r - 5, 0}), 0.3);
  const Phantom p3 = SheppLogan3D(100, 80);
  EXPECT_DOUBLE_EQ(ValueAt(p3, {0, 0, 0}), 0.2);
  EXPECT_DOUBLE_EQ(ValueAt(p3, {0, 0.35 * r, 0}), 0.3);
  EXPECT_DOUBLE_EQ(ValueAt(p3, {0, 0.1 * r, 0.25 * 40}), 0.3);  // ellipsoid 6 sits at z = 0.25
  EXPECT_DOUBLE_EQ(ValueAt(p3, {0, 0, 0.85 * 40}), 0.0);        // above the skull (c = 0.81)
}

TEST(RasterizeTest, SheppLoganVoxelsAndDiscArea) {
  const VolumeGeometry grid = CenteredVolume(64, 64);  // 1 mm voxels, fov 64 mm
  absl::StatusOr<NDArray> img = Rasterize(SheppLogan2D(64), grid, 4);
  ASSERT_TRUE(img.ok()) << img.status();
  const float* v = img->data<float>();
  EXPECT_FLOAT_EQ(v[31 + 64 * 31], 0.2f);  // centre (-0.5, -0.5) mm: brain
  EXPECT_FLOAT_EQ(v[31 + 64 * 60], 1.0f);  // centre (-0.5, 28.5) mm: skull
  EXPECT_FLOAT_EQ(v[0], 0.0f);             // corner: air
  for (int64_t i = 0; i < img->num_elements(); ++i) ASSERT_GE(v[i], 0.0f) << i;  // no -1.5e-8 from 1 - 0.8 - 0.2
  // The skull's outer edge crosses column 31 near y = 29.44: a partial voxel.
  EXPECT_GT(v[31 + 64 * 61], 0.05f);
  EXPECT_LT(v[31 + 64 * 61], 0.95f);

  absl::StatusOr<NDArray> disc = Rasterize(Disc(10.3, 2.0, true, {1.2, -0.7, 0}), grid, 8);
  ASSERT_TRUE(disc.ok());
  double sum = 0;
  for (int64_t i = 0; i < disc->num_elements(); ++i) sum += disc->data<float>()[i];
  EXPECT_NEAR(sum, 2.0 * kPi * 10.3 * 10.3, 0.002 * 2.0 * kPi * 10.3 * 10.3);  // voxel area 1 mm^2
}

TEST(RasterizeTest, ThreeDAndWindowedGrids) {
  VolumeGeometry grid = CenteredVolume(24, 24, 20);
  grid.min_z = -12;  // 1.2 mm slices
  grid.max_z = 12;
  absl::StatusOr<NDArray> vol = Rasterize(SheppLogan3D(24, 24), grid, 2);
  ASSERT_TRUE(vol.ok()) << vol.status();
  EXPECT_FLOAT_EQ(vol->data<float>()[16 + 24 * (7 + 24 * 9)], 0.2f);  // (4.5, -4.5, -0.6) mm: brain
  double sum = 0;
  for (int64_t i = 0; i < vol->num_elements(); ++i) sum += vol->data<float>()[i];
  // sum x voxel volume = sum of value x 4/3 pi abc over the ellipsoids (all inside the grid).
  double exact = 0;
  for (const Ellipsoid& e : SheppLogan3D(24, 24).ellipsoids) {
    exact += e.value * 4.0 / 3.0 * kPi * e.semi_axes.x * e.semi_axes.y * e.semi_axes.z;
  }
  EXPECT_NEAR(sum * 1.2, exact, 0.03 * std::fabs(exact));
}

TEST(RasterizeTest, RefusesBadInput) {
  EXPECT_EQ(Rasterize(SheppLogan2D(10), CenteredVolume(8, 8, 3)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Rasterize(SheppLogan2D(10), CenteredVolume(8, 8), 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Rasterize(SheppLogan2D(10), CenteredVolume(0, 8)).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::recon::phantoms
