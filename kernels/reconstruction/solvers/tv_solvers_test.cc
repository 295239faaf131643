// FISTA-TV and ASD-POCS on a small dense parallel-beam operator (CPU): the
// FISTA-TV objective 0.5 ||A x - y||^2 + lambda TV(x) falls well below its
// value at the start and at plain least squares' answer for a blocky image;
// with tv_weight 0 FISTA-TV is least squares (residual near CGLS's);
// non_negative keeps every voxel >= 0; ASD-POCS ends with x >= 0 after its
// first pass and a residual far below ||y||; bad options name the field.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/reconstruction/regularizers/tv.h"
#include "kernels/reconstruction/solvers/asd_pocs.h"
#include "kernels/reconstruction/solvers/cgls.h"
#include "kernels/reconstruction/solvers/dense_operator.h"
#include "kernels/reconstruction/solvers/fista_tv.h"

namespace tessera {
namespace recon {
namespace solvers {
namespace {

using testing::DenseOperator;
using testing::ParallelBeamMatrix;

constexpr int64_t kN = 16, kViews = 12, kCols = 24;

struct Problem {
  DenseOperator op;
  std::vector<float> truth, y;
};

Problem Blocks() {
  Problem p{DenseOperator(ParallelBeamMatrix(kN, kViews, kCols, 1.0), kViews, kCols, kN * kN, 1), {}, {}};
  p.truth.assign(kN * kN, 0.0f);
  for (int64_t j = 3; j < 12; ++j)
    for (int64_t i = 4; i < 13; ++i) p.truth[j * kN + i] = (i < 8 ? 1.0f : 0.5f);
  p.y.resize(kViews * kCols);
  EXPECT_TRUE(p.op.Forward(p.truth.data(), p.y.data(), kAllSubsets).ok());
  for (size_t i = 0; i < p.y.size(); ++i) p.y[i] += 0.05f * std::sin(1.7f * i);  // deterministic "noise"
  return p;
}

const regularizers::TvShape kShape{kN, kN, 1, 1};

double Objective(Problem& p, const std::vector<float>& x, double lambda) {
  std::vector<float> ax(p.y.size());
  EXPECT_TRUE(p.op.Forward(x.data(), ax.data(), kAllSubsets).ok());
  double fit = 0;
  for (size_t i = 0; i < ax.size(); ++i) fit += 0.5 * (ax[i] - p.y[i]) * (ax[i] - p.y[i]);
  return fit + lambda * *regularizers::TvNorm(Stream::Cpu(), kShape, x.data());
}

double Lambda(Problem& p, double tv_weight) {
  std::vector<float> aty(kN * kN);
  EXPECT_TRUE(p.op.Back(p.y.data(), aty.data(), kAllSubsets).ok());
  double m = 0;
  for (float v : aty) m = std::max(m, static_cast<double>(std::fabs(v)));
  return tv_weight * m;
}

TEST(TvSolversTest, FistaTvLowersItsObjective) {
  Problem p = Blocks();
  const double lambda = Lambda(p, 0.02);
  std::vector<float> x(kN * kN, 0.0f), ls(kN * kN, 0.0f);
  FistaTvOptions o;
  o.iterations = 200;
  o.tv_weight = 0.02;
  auto report = FistaTv(p.op, kShape, p.y.data(), x.data(), o);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->iterations, 200);
  SolverOptions co;
  co.iterations = 200;
  ASSERT_TRUE(Cgls(p.op, p.y.data(), ls.data(), co).ok());
  const double at_x = Objective(p, x, lambda);
  EXPECT_LT(at_x, 0.5 * Objective(p, std::vector<float>(kN * kN, 0.0f), lambda));
  EXPECT_LT(at_x, Objective(p, ls, lambda));
  EXPECT_LT(at_x, Objective(p, p.truth, lambda) * 1.0001);  // the truth is feasible, not optimal
}

TEST(TvSolversTest, ZeroWeightIsLeastSquaresAndNonNegativeHolds) {
  Problem p = Blocks();
  std::vector<float> x(kN * kN, 0.0f), ls(kN * kN, 0.0f);
  FistaTvOptions o;
  o.iterations = 300;
  o.tv_weight = 0;
  auto report = FistaTv(p.op, kShape, p.y.data(), x.data(), o);
  ASSERT_TRUE(report.ok());
  SolverOptions co;
  co.iterations = 100;
  auto cgls = Cgls(p.op, p.y.data(), ls.data(), co);
  ASSERT_TRUE(cgls.ok());
  EXPECT_LT(report->residual_norms.back(), 1.02 * cgls->residual_norms.back());
  std::vector<float> nn(kN * kN, 0.0f);
  o.tv_weight = 0.01;
  o.non_negative = true;
  ASSERT_TRUE(FistaTv(p.op, kShape, p.y.data(), nn.data(), o).ok());
  EXPECT_GE(*std::min_element(nn.begin(), nn.end()), 0.0f);
}

TEST(TvSolversTest, AsdPocsFitsTheData) {
  Problem p = Blocks();
  std::vector<float> x(kN * kN, 0.0f);
  AsdPocsOptions o;
  o.iterations = 30;
  auto report = AsdPocs(p.op, kShape, p.y.data(), x.data(), o);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_GE(report->iterations, 5);
  double yy = 0;
  for (float v : p.y) yy += v * v;
  EXPECT_LT(report->residual_norms.back(), 0.1 * std::sqrt(yy));
  // TV steps after the positivity projection move voxels by little.
  EXPECT_GT(*std::min_element(x.begin(), x.end()), -0.05f);
}

TEST(TvSolversTest, BadOptionsNameTheField) {
  Problem p = Blocks();
  std::vector<float> x(kN * kN, 0.0f);
  auto message = [](const absl::Status& s) { return std::string(s.message()); };
  FistaTvOptions f;
  f.tv_weight = -1;
  EXPECT_NE(message(FistaTv(p.op, kShape, p.y.data(), x.data(), f).status()).find("tv_weight"), std::string::npos);
  f = FistaTvOptions();
  f.tv_iterations = 0;
  EXPECT_NE(message(FistaTv(p.op, kShape, p.y.data(), x.data(), f).status()).find("tv_iterations"),
            std::string::npos);
  f = FistaTvOptions();
  EXPECT_NE(message(FistaTv(p.op, {kN, kN + 1, 1, 1}, p.y.data(), x.data(), f).status()).find("shape"),
            std::string::npos);
  AsdPocsOptions a;
  a.alpha = 0;
  EXPECT_NE(message(AsdPocs(p.op, kShape, p.y.data(), x.data(), a).status()).find("alpha"), std::string::npos);
  a = AsdPocsOptions();
  a.epsilon = -1;
  EXPECT_NE(message(AsdPocs(p.op, kShape, p.y.data(), x.data(), a).status()).find("epsilon"), std::string::npos);
  a = AsdPocsOptions();
  a.subsets = 3;  // the operator has 1
  EXPECT_NE(message(AsdPocs(p.op, kShape, p.y.data(), x.data(), a).status()).find("subsets"), std::string::npos);
}

}  // namespace
}  // namespace solvers
}  // namespace recon
}  // namespace tessera
