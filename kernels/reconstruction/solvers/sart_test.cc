// SART / OS-SART on a small 2-D parallel-beam system matrix: monotone
// residuals for lambda <= 1, OS-SART faster per pass than one subset, the
// cost of the residual report, non-negativity, cancel and argument errors.
#include "kernels/reconstruction/solvers/sart.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/reconstruction/solvers/dense_operator.h"

namespace tessera {
namespace recon {
namespace solvers {
namespace {

using ::tessera::recon::testing::DenseOperator;
using ::tessera::recon::testing::ParallelBeamMatrix;

constexpr int64_t kN = 16, kViews = 30, kCols = 24;

// A disc of 1 with a brighter square, 0 outside.
std::vector<float> Phantom() {
  std::vector<float> x(kN * kN, 0.0f);
  for (int64_t j = 0; j < kN; ++j) {
    for (int64_t i = 0; i < kN; ++i) {
      const double dx = i + 0.5 - kN / 2.0, dy = j + 0.5 - kN / 2.0;
      if (dx * dx + dy * dy < 36) x[j * kN + i] = 1.0f;
      if (i >= 8 && i < 11 && j >= 5 && j < 9) x[j * kN + i] = 1.5f;
    }
  }
  return x;
}

struct Tomo {
  std::vector<float> a, x_true, y;
};

const Tomo& Problem() {
  static const Tomo* t = [] {
    auto* p = new Tomo;
    p->a = ParallelBeamMatrix(kN, kViews, kCols, 1.0);
    p->x_true = Phantom();
    p->y.resize(kViews * kCols);
    for (int64_t r = 0; r < kViews * kCols; ++r) {
      double s = 0;
      for (int64_t c = 0; c < kN * kN; ++c) s += static_cast<double>(p->a[r * kN * kN + c]) * p->x_true[c];
      p->y[r] = static_cast<float>(s);
    }
    return p;
  }();
  return *t;
}

double Error(const std::vector<float>& x, const std::vector<float>& ref) {
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += (x[i] - ref[i]) * (x[i] - ref[i]);
  return std::sqrt(s / x.size());
}

TEST(SartTest, ResidualDecreasesMonotonicallyForLambdaUpToOne) {
  const Tomo& t = Problem();
  for (float lambda : {1.0f, 0.5f}) {
    DenseOperator op(t.a, kViews, kCols, kN * kN, 1);
    std::vector<float> x(kN * kN, 0.0f);
    SolverOptions options;
    options.iterations = 25;
    options.lambda = lambda;
    auto report = Sart(op, t.y.data(), x.data(), options);
    ASSERT_TRUE(report.ok()) << report.status();
    ASSERT_EQ(report->iterations, 25);
    ASSERT_EQ(report->residual_norms.size(), 25u);
    for (size_t i = 1; i < report->residual_norms.size(); ++i) {
      EXPECT_LT(report->residual_norms[i], report->residual_norms[i - 1]) << "lambda " << lambda << " it " << i;
    }
    EXPECT_LT(report->residual_norms.back(), 0.2 * report->residual_norms.front());
    EXPECT_LT(Error(x, t.x_true), 0.15) << lambda;
  }
}

// One subset: the residual reported after an iteration is the one the next
// update uses, so the forward projections are 1 (row sums) + iterations + 1.
// OS-SART's exact residual costs one extra forward per iteration.
TEST(SartTest, ResidualReportCost) {
  const Tomo& t = Problem();
  DenseOperator one(t.a, kViews, kCols, kN * kN, 1);
  std::vector<float> x(kN * kN, 0.0f);
  SolverOptions options;
  options.iterations = 3;
  ASSERT_TRUE(Sart(one, t.y.data(), x.data(), options).ok());
  EXPECT_EQ(one.forward_calls(), 1 + 3 + 1);
  EXPECT_EQ(one.back_calls(), 1 + 3);

  options.subsets = 6;
  DenseOperator exact(t.a, kViews, kCols, kN * kN, 6), pass(t.a, kViews, kCols, kN * kN, 6);
  std::vector<float> xe(kN * kN, 0.0f), xp(kN * kN, 0.0f);
  auto re = Sart(exact, t.y.data(), xe.data(), options);
  options.exact_residual = false;
  auto rp = Sart(pass, t.y.data(), xp.data(), options);
  ASSERT_TRUE(re.ok() && rp.ok());
  EXPECT_EQ(exact.forward_calls(), 6 + 3 * 6 + 3);
  EXPECT_EQ(pass.forward_calls(), 6 + 3 * 6);
  EXPECT_EQ(xe, xp);  // same iterates, only the report differs
  // The pass estimate sees each subset before its update: larger than the end-of-pass residual.
  for (int i = 0; i < 3; ++i) EXPECT_GT(rp->residual_norms[i], re->residual_norms[i]);
}

TEST(SartTest, OrderedSubsetsConvergeFasterPerPass) {
  const Tomo& t = Problem();
  DenseOperator op(t.a, kViews, kCols, kN * kN, 6);
  std::vector<float> x1(kN * kN, 0.0f), x6(kN * kN, 0.0f);
  SolverOptions options;
  options.iterations = 3;
  auto r1 = Sart(op, t.y.data(), x1.data(), options);
  options.subsets = 6;
  auto r6 = Sart(op, t.y.data(), x6.data(), options);
  ASSERT_TRUE(r1.ok() && r6.ok());
  for (int i = 0; i < 3; ++i) {
    EXPECT_LT(r6->residual_norms[i], 0.5 * r1->residual_norms[i]) << "pass " << i;
  }
  EXPECT_LT(Error(x6, t.x_true), Error(x1, t.x_true));
}

TEST(SartTest, NonNegativeClampsNoisyData) {
  const Tomo& t = Problem();
  std::vector<float> noisy = t.y;
  std::mt19937 rng(4);
  std::normal_distribution<float> gauss(0.0f, 0.5f);
  for (float& v : noisy) v += gauss(rng);
  DenseOperator op(t.a, kViews, kCols, kN * kN, 6);
  SolverOptions options;
  options.iterations = 5;
  options.subsets = 6;
  std::vector<float> free_x(kN * kN, 0.0f), clamped(kN * kN, 0.0f);
  ASSERT_TRUE(Sart(op, noisy.data(), free_x.data(), options).ok());
  options.non_negative = true;
  ASSERT_TRUE(Sart(op, noisy.data(), clamped.data(), options).ok());
  EXPECT_LT(*std::min_element(free_x.begin(), free_x.end()), 0.0f);
  EXPECT_GE(*std::min_element(clamped.begin(), clamped.end()), 0.0f);
}

TEST(SartTest, CancelStopsAfterThatIteration) {
  const Tomo& t = Problem();
  DenseOperator op(t.a, kViews, kCols, kN * kN, 6);
  SolverOptions options;
  options.iterations = 8;
  options.subsets = 6;
  int calls = 0;
  options.progress = [&](int it, int total, double) {
    ++calls;
    EXPECT_EQ(total, 8);
    return it == 2 ? absl::CancelledError("cancelled by user") : absl::OkStatus();
  };
  std::vector<float> x(kN * kN, 0.0f), x2(kN * kN, 0.0f);
  auto report = Sart(op, t.y.data(), x.data(), options);
  EXPECT_EQ(report.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(calls, 2);
  SolverOptions two = options;
  two.iterations = 2;
  two.progress = nullptr;
  ASSERT_TRUE(Sart(op, t.y.data(), x2.data(), two).ok());
  EXPECT_EQ(x, x2);
}

TEST(SartTest, ArgumentErrors) {
  const Tomo& t = Problem();
  DenseOperator op(t.a, kViews, kCols, kN * kN, 6);
  std::vector<float> x(kN * kN, 0.0f);
  SolverOptions options;
  for (float lambda : {0.0f, 2.0f, -1.0f}) {
    options.lambda = lambda;
    auto s = Sart(op, t.y.data(), x.data(), options);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find("lambda"), absl::string_view::npos);
  }
  options.lambda = 1;
  options.subsets = 4;
  auto s = Sart(op, t.y.data(), x.data(), options);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("subsets = 4"), absl::string_view::npos) << s.status();
  options.subsets = 0;
  EXPECT_EQ(Sart(op, t.y.data(), x.data(), options).status().code(), absl::StatusCode::kInvalidArgument);
  options.subsets = 1;
  EXPECT_EQ(Sart(op, t.y.data(), nullptr, options).status().code(), absl::StatusCode::kInvalidArgument);
  options.iterations = 0;
  auto none = Sart(op, t.y.data(), x.data(), options);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->iterations, 0);
}

}  // namespace
}  // namespace solvers
}  // namespace recon
}  // namespace tessera
