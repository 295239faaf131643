#include "services/fingerprint/search/tps.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace tessera {
namespace fingerprint {
namespace {

std::vector<Point2> RandomPoints(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 400);
  std::vector<Point2> p(n);
  for (auto& q : p) q = {u(rng), u(rng)};
  return p;
}

Point2 Smooth(const Point2& p) {
  return {p.x + 8 * std::sin(p.y / 90.0) + 0.02 * p.x, p.y + 6 * std::cos(p.x / 110.0) - 0.01 * p.y};
}

TEST(TpsTest, InterpolatesItsControlPointsExactly) {
  const auto from = RandomPoints(25, 1);
  std::vector<Point2> to;
  for (const auto& p : from) to.push_back(Smooth(p));
  auto tps = ThinPlateSpline::Fit(from, to, 0.0);
  ASSERT_TRUE(tps.ok()) << tps.status();
  for (size_t i = 0; i < from.size(); ++i) {
    const Point2 q = tps->Apply(from[i]);
    EXPECT_NEAR(q.x, to[i].x, 1e-7);
    EXPECT_NEAR(q.y, to[i].y, 1e-7);
  }
  // Between the control points it follows the smooth map closely.
  double worst = 0;
  for (const auto& p : RandomPoints(200, 2)) {
    if (p.x < 60 || p.x > 340 || p.y < 60 || p.y > 340) continue;
    const Point2 q = tps->Apply(p), r = Smooth(p);
    worst = std::max(worst, std::hypot(q.x - r.x, q.y - r.y));
  }
  EXPECT_LT(worst, 3.0);
  EXPECT_GT(tps->BendingEnergy(), 0.0);
}

TEST(TpsTest, ReproducesAffineMapsForAnyLambda) {
  const auto from = RandomPoints(12, 3);
  auto affine = [](const Point2& p) { return Point2{3 + 1.1 * p.x - 0.3 * p.y, -7 + 0.2 * p.x + 0.9 * p.y}; };
  std::vector<Point2> to;
  for (const auto& p : from) to.push_back(affine(p));
  for (double lambda : {0.0, 0.1, 10.0}) {
    auto tps = ThinPlateSpline::Fit(from, to, lambda);
    ASSERT_TRUE(tps.ok());
    for (const auto& p : RandomPoints(50, 4)) {
      const Point2 q = tps->Apply(p), r = affine(p);
      EXPECT_NEAR(q.x, r.x, 1e-6);
      EXPECT_NEAR(q.y, r.y, 1e-6);
      double j[2][2];
      tps->Jacobian(p, j);
      EXPECT_NEAR(j[0][0], 1.1, 1e-8);
      EXPECT_NEAR(j[0][1], -0.3, 1e-8);
      EXPECT_NEAR(j[1][0], 0.2, 1e-8);
      EXPECT_NEAR(j[1][1], 0.9, 1e-8);
    }
    EXPECT_NEAR(tps->BendingEnergy(), 0.0, 1e-6);
  }
}

TEST(TpsTest, JacobianMatchesFiniteDifferences) {
  const auto from = RandomPoints(15, 5);
  std::vector<Point2> to;
  for (const auto& p : from) to.push_back(Smooth(p));
  auto tps = ThinPlateSpline::Fit(from, to, 0.01);
  ASSERT_TRUE(tps.ok());
  const Point2 p{171.3, 222.9};
  double j[2][2];
  tps->Jacobian(p, j);
  const double h = 1e-4;
  const Point2 px1 = tps->Apply({p.x + h, p.y}), px0 = tps->Apply({p.x - h, p.y});
  const Point2 py1 = tps->Apply({p.x, p.y + h}), py0 = tps->Apply({p.x, p.y - h});
  EXPECT_NEAR(j[0][0], (px1.x - px0.x) / (2 * h), 1e-5);
  EXPECT_NEAR(j[1][0], (px1.y - px0.y) / (2 * h), 1e-5);
  EXPECT_NEAR(j[0][1], (py1.x - py0.x) / (2 * h), 1e-5);
  EXPECT_NEAR(j[1][1], (py1.y - py0.y) / (2 * h), 1e-5);
}

TEST(TpsTest, SmoothingPullsTowardsAffine) {
  const auto from = RandomPoints(20, 6);
  std::vector<Point2> to;
  for (const auto& p : from) to.push_back(Smooth(p));
  auto exact = ThinPlateSpline::Fit(from, to, 0.0);
  auto smooth = ThinPlateSpline::Fit(from, to, 1.0);
  ASSERT_TRUE(exact.ok() && smooth.ok());
  EXPECT_LT(smooth->BendingEnergy(), exact->BendingEnergy());
}

TEST(TpsTest, RejectsBadInput) {
  EXPECT_EQ(ThinPlateSpline::Fit({{0, 0}, {1, 1}}, {{0, 0}, {1, 1}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ThinPlateSpline::Fit({{0, 0}, {1, 1}, {2, 2}}, {{0, 0}, {1, 1}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ThinPlateSpline::Fit({{0, 0}, {1, NAN}, {2, 5}}, {{0, 0}, {1, 1}, {2, 2}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ThinPlateSpline::Fit({{0, 0}, {1, 2}, {2, 5}}, {{0, 0}, {1, 1}, {2, 2}}, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Collinear control points leave the affine part undetermined.
  EXPECT_EQ(ThinPlateSpline::Fit({{0, 0}, {1, 1}, {2, 2}, {3, 3}}, {{0, 0}, {1, 1}, {2, 2}, {3, 3}}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(TpsTest, RigidFitRecoversRotationAndTranslation) {
  const auto from = RandomPoints(10, 7);
  RigidTransform truth;
  truth.angle = 0.4;
  truth.tx = 12;
  truth.ty = -30;
  std::vector<Point2> to;
  for (const auto& p : from) to.push_back(truth.Apply(p));
  auto fit = FitRigid(from, to);
  ASSERT_TRUE(fit.ok());
  EXPECT_NEAR(fit->angle, 0.4, 1e-9);
  EXPECT_NEAR(fit->tx, 12, 1e-7);
  EXPECT_NEAR(fit->ty, -30, 1e-7);
  // The rotation convention of template.h: direction theta -> theta + angle.
  const Point2 o = truth.Apply({0, 0}), d = truth.Apply({std::cos(1.0), -std::sin(1.0)});
  EXPECT_NEAR(std::atan2(-(d.y - o.y), d.x - o.x), 1.4, 1e-9);
  EXPECT_FALSE(FitRigid({}, {}).ok());
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
