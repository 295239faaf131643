// CGLS on a small dense operator: converges to the least-squares solution
// of a noisy overdetermined system (against a direct normal-equation solve
// in double), residuals never grow, cancel and argument errors.
#include "kernels/reconstruction/solvers/cgls.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/reconstruction/solvers/dense_operator.h"

namespace tessera {
namespace recon {
namespace solvers {
namespace {

using ::tessera::recon::testing::DenseOperator;

// Solves (A^T A) z = A^T y by Gaussian elimination with partial pivoting, in double.
std::vector<double> NormalEquationSolve(const std::vector<float>& a, const std::vector<float>& y, int64_t m,
                                        int64_t n) {
  std::vector<double> g(n * (n + 1), 0.0);  // augmented [A^T A | A^T y]
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t r = 0; r < m; ++r) s += static_cast<double>(a[r * n + i]) * a[r * n + j];
      g[i * (n + 1) + j] = s;
    }
    double s = 0;
    for (int64_t r = 0; r < m; ++r) s += static_cast<double>(a[r * n + i]) * y[r];
    g[i * (n + 1) + n] = s;
  }
  for (int64_t c = 0; c < n; ++c) {
    int64_t piv = c;
    for (int64_t r = c + 1; r < n; ++r) {
      if (std::fabs(g[r * (n + 1) + c]) > std::fabs(g[piv * (n + 1) + c])) piv = r;
    }
    for (int64_t k = 0; k <= n; ++k) std::swap(g[c * (n + 1) + k], g[piv * (n + 1) + k]);
    for (int64_t r = c + 1; r < n; ++r) {
      const double f = g[r * (n + 1) + c] / g[c * (n + 1) + c];
      for (int64_t k = c; k <= n; ++k) g[r * (n + 1) + k] -= f * g[c * (n + 1) + k];
    }
  }
  std::vector<double> z(n);
  for (int64_t r = n - 1; r >= 0; --r) {
    double s = g[r * (n + 1) + n];
    for (int64_t k = r + 1; k < n; ++k) s -= g[r * (n + 1) + k] * z[k];
    z[r] = s / g[r * (n + 1) + r];
  }
  return z;
}

struct Problem {
  std::vector<float> a, y, x_true;
  int64_t m, n;
};

// y = A x_true + noise: the least-squares solution is not x_true.
Problem NoisyProblem(int64_t m, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  Problem p{std::vector<float>(m * n), std::vector<float>(m), std::vector<float>(n), m, n};
  for (float& v : p.a) v = gauss(rng);
  for (float& v : p.x_true) v = gauss(rng);
  for (int64_t r = 0; r < m; ++r) {
    double s = 0;
    for (int64_t c = 0; c < n; ++c) s += static_cast<double>(p.a[r * n + c]) * p.x_true[c];
    p.y[r] = static_cast<float>(s) + 0.3f * gauss(rng);
  }
  return p;
}

double RelErr(const std::vector<float>& x, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += (x[i] - ref[i]) * (x[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

TEST(CglsTest, ConvergesToTheLeastSquaresSolution) {
  const Problem p = NoisyProblem(80, 30, 3);
  const std::vector<double> z = NormalEquationSolve(p.a, p.y, p.m, p.n);
  DenseOperator op(p.a, p.m, 1, p.n, 1);
  std::vector<float> x(p.n, 0.0f);
  SolverOptions options;
  options.iterations = 40;
  auto report = Cgls(op, p.y.data(), x.data(), options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_LT(RelErr(x, z), 1e-4);
  // The least-squares residual, from the direct solution.
  double rr = 0;
  for (int64_t r = 0; r < p.m; ++r) {
    double s = 0;
    for (int64_t c = 0; c < p.n; ++c) s += p.a[r * p.n + c] * z[c];
    rr += (p.y[r] - s) * (p.y[r] - s);
  }
  ASSERT_FALSE(report->residual_norms.empty());
  EXPECT_NEAR(report->residual_norms.back(), std::sqrt(rr), 1e-4 * std::sqrt(rr));
  for (size_t i = 1; i < report->residual_norms.size(); ++i) {
    EXPECT_LE(report->residual_norms[i], report->residual_norms[i - 1] * (1 + 1e-6)) << i;
  }
  // After n iterations CGLS is exact in exact arithmetic; well before 40 here.
  std::vector<float> x10(p.n, 0.0f);
  options.iterations = 10;
  ASSERT_TRUE(Cgls(op, p.y.data(), x10.data(), options).ok());
  EXPECT_GT(RelErr(x10, z), RelErr(x, z));
}

TEST(CglsTest, StartsFromTheGivenGuessAndStopsWhenExact) {
  const Problem p = NoisyProblem(50, 20, 9);
  const std::vector<double> z = NormalEquationSolve(p.a, p.y, p.m, p.n);
  DenseOperator op(p.a, p.m, 1, p.n, 1);
  std::vector<float> x(z.begin(), z.end());  // already the solution: A^T r ~ 0
  SolverOptions options;
  options.iterations = 5;
  auto report = Cgls(op, p.y.data(), x.data(), options);
  ASSERT_TRUE(report.ok());
  EXPECT_LT(RelErr(x, z), 1e-4);
}

TEST(CglsTest, CancelStopsAfterThatIteration) {
  const Problem p = NoisyProblem(40, 20, 5);
  DenseOperator op(p.a, p.m, 1, p.n, 1);
  std::vector<float> x(p.n, 0.0f), x3(p.n, 0.0f);
  SolverOptions options;
  options.iterations = 10;
  int calls = 0;
  options.progress = [&](int it, int total, double res) {
    EXPECT_EQ(it, ++calls);
    EXPECT_EQ(total, 10);
    EXPECT_GT(res, 0);
    return it == 3 ? absl::CancelledError("user") : absl::OkStatus();
  };
  auto report = Cgls(op, p.y.data(), x.data(), options);
  EXPECT_EQ(report.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(calls, 3);
  SolverOptions three;
  three.iterations = 3;
  ASSERT_TRUE(Cgls(op, p.y.data(), x3.data(), three).ok());
  EXPECT_EQ(x, x3);
}

TEST(CglsTest, RejectsSubsets) {
  const Problem p = NoisyProblem(12, 4, 1);
  DenseOperator op(p.a, p.m, 1, p.n, 3);
  std::vector<float> x(p.n, 0.0f);
  SolverOptions options;
  options.subsets = 3;
  auto s1 = Cgls(op, p.y.data(), x.data(), options);
  EXPECT_EQ(s1.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s1.status().message().find("subsets"), absl::string_view::npos);
  options.subsets = 1;
  options.iterations = -1;
  EXPECT_EQ(Cgls(op, p.y.data(), x.data(), options).status().code(), absl::StatusCode::kInvalidArgument);
  options.iterations = 1;
  EXPECT_EQ(Cgls(op, nullptr, x.data(), options).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace solvers
}  // namespace recon
}  // namespace tessera
