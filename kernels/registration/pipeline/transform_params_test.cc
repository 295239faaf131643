#include "kernels/registration/pipeline/transform_params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace tessera::registration {
namespace {

// A smooth loss of the physical transform: L(T) = sum W_ij T_ij + 0.5 sum T_ij^2.
double Loss(const Mat4& t, const Mat4& w) {
  double s = 0;
  for (int i = 0; i < 12; ++i) s += w[i] * t[i] + 0.5 * t[i] * t[i];
  return s;
}
Mat4 LossGrad(const Mat4& t, const Mat4& w) {
  Mat4 g{};
  for (int i = 0; i < 12; ++i) g[i] = w[i] + t[i];
  return g;
}

TEST(TransformParams, RotationIsOrthonormal) {
  Mat3 r = RotationFromAxisAngle({0.3, -0.2, 0.5});
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      double d = 0;
      for (int k = 0; k < 3; ++k) d += r[k * 3 + i] * r[k * 3 + j];
      EXPECT_NEAR(d, i == j ? 1 : 0, 1e-12);
    }
  }
}

TEST(TransformParams, GradientsMatchFiniteDifferences) {
  std::mt19937 rng(4);
  std::uniform_real_distribution<double> u(-1, 1);
  for (TransformModel model : {TransformModel::kRigid, TransformModel::kAffine}) {
    LinearTransform base;
    base.matrix = RotationFromAxisAngle({0.1, 0.2, -0.1});
    base.translation = {3, -2, 1};
    base.center = {10, 20, -5};
    TransformParameterization param(model, base, 50.0, 0.1);
    Mat4 w{};
    for (double& x : w) x = u(rng);
    std::vector<double> p(param.size());
    for (double& x : p) x = 0.1 * u(rng);
    const std::vector<double> g = param.Gradient(p, LossGrad(param.Apply(p).ToMat4(), w));
    for (int k = 0; k < param.size(); ++k) {
      const double h = 1e-6;
      std::vector<double> pp = p, pm = p;
      pp[k] += h;
      pm[k] -= h;
      const double numeric = (Loss(param.Apply(pp).ToMat4(), w) - Loss(param.Apply(pm).ToMat4(), w)) / (2 * h);
      EXPECT_NEAR(g[k], numeric, 1e-4 * std::max(1.0, std::abs(numeric))) << "param " << k;
    }
  }
}

TEST(TransformParams, ZeroParamsGiveTheBase) {
  LinearTransform base;
  base.translation = {1, 2, 3};
  base.center = {4, 5, 6};
  TransformParameterization param(TransformModel::kRigid, base, 10, 1);
  Mat4 m = param.Apply(std::vector<double>(6, 0.0)).ToMat4();
  EXPECT_NEAR(m[3], 1, 1e-12);
  EXPECT_NEAR(m[7], 2, 1e-12);
  EXPECT_NEAR(m[11], 3, 1e-12);
}

}  // namespace
}  // namespace tessera::registration
