#include "kernels/registration/pipeline/space.h"

#include <gtest/gtest.h>

#include <random>

namespace tessera::registration {
namespace {

GridSpace RandomGrid(std::mt19937& rng) {
  std::uniform_real_distribution<double> u(-1, 1);
  GridSpace g;
  g.dims = {20 + static_cast<int64_t>(rng() % 30), 15 + static_cast<int64_t>(rng() % 30), 10 + static_cast<int64_t>(rng() % 30)};
  Mat4 affine{};
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 3; ++c) affine[r * 4 + c] = (r == c ? 1.5 : 0.0) + 0.3 * u(rng);
    affine[r * 4 + 3] = 50 * u(rng);
  }
  affine[15] = 1;
  g.geometry = Geometry::FromAffine(affine).value();
  return g;
}

std::array<double, 4> Apply(const Mat4& m, std::array<double, 4> p) {
  std::array<double, 4> r{};
  for (int i = 0; i < 4; ++i) {
    for (int k = 0; k < 4; ++k) r[i] += m[i * 4 + k] * p[k];
  }
  return r;
}

TEST(Space, NormalizedCornersAreVoxelCentres) {
  GridSpace g;
  g.dims = {11, 21, 5};
  g.geometry.spacing = {2, 1, 3};
  g.geometry.origin = {-10, 5, 7};
  Mat4 n = NormalizedToWorld(g);
  auto lo = Apply(n, {-1, -1, -1, 1});
  auto hi = Apply(n, {1, 1, 1, 1});
  EXPECT_NEAR(lo[0], -10, 1e-12);
  EXPECT_NEAR(lo[1], 5, 1e-12);
  EXPECT_NEAR(lo[2], 7, 1e-12);
  EXPECT_NEAR(hi[0], -10 + 2 * 10, 1e-12);
  EXPECT_NEAR(hi[1], 5 + 20, 1e-12);
  EXPECT_NEAR(hi[2], 7 + 3 * 4, 1e-12);
}

TEST(Space, SamplerAffineMapsLikeThePhysicalPath) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int trial = 0; trial < 20; ++trial) {
    GridSpace fixed = RandomGrid(rng), moving = RandomGrid(rng);
    Mat4 t{};
    for (int r = 0; r < 3; ++r) {
      for (int c = 0; c < 3; ++c) t[r * 4 + c] = (r == c ? 1.0 : 0.0) + 0.2 * u(rng);
      t[r * 4 + 3] = 10 * u(rng);
    }
    t[15] = 1;
    Affine12 a = SamplerAffineFromPhysical(t, fixed, moving).value();
    std::array<double, 4> xn = {u(rng), u(rng), u(rng), 1};
    auto via_sampler = Apply(FromAffine12(a), xn);
    auto world_fixed = Apply(NormalizedToWorld(fixed), xn);
    auto world_moving = Apply(t, world_fixed);
    auto expected = Apply(InvertAffine(NormalizedToWorld(moving)).value(), world_moving);
    for (int d = 0; d < 3; ++d) EXPECT_NEAR(via_sampler[d], expected[d], 1e-9);
    Mat4 back = PhysicalFromSamplerAffine(a, fixed, moving).value();
    for (int i = 0; i < 16; ++i) EXPECT_NEAR(back[i], t[i], 1e-9);

    // u = L v: a physical displacement before T moves the sampler point by L v.
    Mat3 l = PhysicalToNormalizedDisplacement(t, moving).value();
    std::array<double, 4> v = {u(rng) * 3, u(rng) * 3, u(rng) * 3, 0};
    std::array<double, 4> displaced = {world_fixed[0] + v[0], world_fixed[1] + v[1], world_fixed[2] + v[2], 1};
    auto moved = Apply(InvertAffine(NormalizedToWorld(moving)).value(), Apply(t, displaced));
    for (int d = 0; d < 3; ++d) {
      double lv = l[d * 3] * v[0] + l[d * 3 + 1] * v[1] + l[d * 3 + 2] * v[2];
      EXPECT_NEAR(moved[d], via_sampler[d] + lv, 1e-9);
    }
  }
}

TEST(Space, RasToLpsFlipsXY) {
  Mat4 translate_right{1, 0, 0, 5, 0, 1, 0, 0, 0, 0, 1, 2, 0, 0, 0, 1};
  Mat4 lps = RasToLps(translate_right);
  EXPECT_EQ(lps[3], -5);
  EXPECT_EQ(lps[11], 2);
  EXPECT_EQ(LpsToRas(lps), translate_right);
}

}  // namespace
}  // namespace tessera::registration

namespace tessera::registration {
namespace {

TEST(Space, PhysicalGradientMatchesFiniteDifferences) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<double> u(-1, 1);
  GridSpace fixed = RandomGrid(rng), moving = RandomGrid(rng);
  Affine12 g{};
  for (double& x : g) x = u(rng);
  Mat4 t{1, 0.1, 0, 5, 0, 0.9, 0.1, -3, 0.05, 0, 1.1, 2, 0, 0, 0, 1};
  // L(T) = <G, A(T)> is linear in A, so dL/dT is exact.
  auto loss = [&](const Mat4& m) {
    Affine12 a = SamplerAffineFromPhysical(m, fixed, moving).value();
    double s = 0;
    for (int i = 0; i < 12; ++i) s += g[i] * a[i];
    return s;
  };
  Mat4 grad = PhysicalGradientFromSampler(g, fixed, moving).value();
  for (int i = 0; i < 12; ++i) {
    Mat4 tp = t, tm = t;
    tp[i] += 1e-5;
    tm[i] -= 1e-5;
    const double numeric = (loss(tp) - loss(tm)) / 2e-5;
    EXPECT_NEAR(grad[i], numeric, 1e-6 * std::max(1.0, std::abs(numeric))) << i;
  }
}

}  // namespace
}  // namespace tessera::registration
