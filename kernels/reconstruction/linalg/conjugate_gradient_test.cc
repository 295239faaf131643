// CG on the CPU backend: convergence to the direct solution within the
// iteration bound of a well-conditioned system, cancellation, breakdown on
// an indefinite operator, and the complex (interleaved) Hermitian variant.
#include "kernels/reconstruction/linalg/conjugate_gradient.h"

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <random>
#include <vector>

#include "kernels/reconstruction/linalg/random_problems.h"
#include "kernels/reconstruction/linalg/spmv.h"

namespace tessera {
namespace recon {
namespace linalg {
namespace {

// Dense Cholesky solve in double (the direct solution).
std::vector<double> DirectSolve(const HostCsr& m, const std::vector<float>& b) {
  const int64_t n = m.rows;
  std::vector<double> a(n * n, 0.0);
  for (int64_t r = 0; r < n; ++r) {
    for (int32_t k = m.row_ptr[r]; k < m.row_ptr[r + 1]; ++k) a[r * n + m.col_idx[k]] += m.values[k];
  }
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t k = 0; k < j; ++k) a[j * n + j] -= a[j * n + k] * a[j * n + k];
    a[j * n + j] = std::sqrt(a[j * n + j]);
    for (int64_t i = j + 1; i < n; ++i) {
      for (int64_t k = 0; k < j; ++k) a[i * n + j] -= a[i * n + k] * a[j * n + k];
      a[i * n + j] /= a[j * n + j];
    }
  }
  std::vector<double> x(b.begin(), b.end());
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < i; ++k) x[i] -= a[i * n + k] * x[k];
    x[i] /= a[i * n + i];
  }
  for (int64_t i = n - 1; i >= 0; --i) {
    for (int64_t k = i + 1; k < n; ++k) x[i] -= a[k * n + i] * x[k];
    x[i] /= a[i * n + i];
  }
  return x;
}

double RelErr(const std::vector<float>& x, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += (x[i] - ref[i]) * (x[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

std::vector<float> RandomVector(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Eigenvalues in [1, 4] (kappa <= 4): the residual bound
// ||r_k|| / ||r_0|| <= 2 sqrt(kappa) ((sqrt(kappa) - 1) / (sqrt(kappa) + 1))^k = 4 / 3^k
// reaches 1e-6 by k = 14.
TEST(ConjugateGradientTest, ConvergesToTheDirectSolutionWithinTheBound) {
  const HostCsr m = RandomSpdCsr(400, 8, 1.0, 4.0, 5);
  const Stream cpu = Stream::Cpu();
  auto plan = SpmvPlan::Create(m.View(), cpu);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::vector<float> b = RandomVector(m.rows, 6);
  std::vector<float> x(m.rows, 123.0f);
  int matvecs = 0;
  Matvec matvec = [&](const float* in, float* out) {
    ++matvecs;
    return (*plan)->Apply(in, out);
  };
  CgOptions options;
  options.tolerance = 1e-6;
  options.zero_initial_guess = true;
  auto result = ConjugateGradient(cpu, matvec, b.data(), x.data(), m.rows, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->converged);
  EXPECT_LE(result->iterations, 15);
  EXPECT_GE(result->iterations, 5);  // a real solve, not a lucky start
  EXPECT_EQ(matvecs, result->iterations);
  ASSERT_EQ(result->residual_history.size(), static_cast<size_t>(result->iterations + 1));
  EXPECT_DOUBLE_EQ(result->residual_history[0], 1.0);
  EXPECT_LE(result->relative_residual, 1e-6);
  EXPECT_LT(RelErr(x, DirectSolve(m, b)), 5e-6);  // error <= kappa * residual

  // From a non-zero guess: one more matvec for r_0, same answer.
  std::vector<float> x2 = RandomVector(m.rows, 7);
  matvecs = 0;
  options.zero_initial_guess = false;
  auto again = ConjugateGradient(cpu, matvec, b.data(), x2.data(), m.rows, options);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->converged);
  EXPECT_EQ(matvecs, again->iterations + 1);
  EXPECT_LT(RelErr(x2, DirectSolve(m, b)), 5e-6);
}

TEST(ConjugateGradientTest, LaplacianConvergesAndMaxIterationsStops) {
  const HostCsr m = Laplacian2d(24);  // kappa ~ 250
  const Stream cpu = Stream::Cpu();
  auto plan = SpmvPlan::Create(m.View(), cpu);
  ASSERT_TRUE(plan.ok());
  const std::vector<float> b = RandomVector(m.rows, 8);
  std::vector<float> x(m.rows, 0.0f);
  Matvec matvec = [&](const float* in, float* out) { return (*plan)->Apply(in, out); };
  CgOptions options;
  options.max_iterations = 5;
  auto capped = ConjugateGradient(cpu, matvec, b.data(), x.data(), m.rows, options);
  ASSERT_TRUE(capped.ok());
  EXPECT_FALSE(capped->converged);
  EXPECT_EQ(capped->iterations, 5);
  options.max_iterations = 500;
  options.tolerance = 1e-5;
  auto full = ConjugateGradient(cpu, matvec, b.data(), x.data(), m.rows, options);  // continues from x
  ASSERT_TRUE(full.ok());
  EXPECT_TRUE(full->converged);
  EXPECT_LT(RelErr(x, DirectSolve(m, b)), 1e-3);
}

TEST(ConjugateGradientTest, ProgressCanCancel) {
  const HostCsr m = RandomSpdCsr(200, 6, 1.0, 100.0, 9);
  const Stream cpu = Stream::Cpu();
  auto plan = SpmvPlan::Create(m.View(), cpu);
  ASSERT_TRUE(plan.ok());
  const std::vector<float> b = RandomVector(m.rows, 10);
  std::vector<float> x(m.rows);
  int matvecs = 0;
  Matvec matvec = [&](const float* in, float* out) {
    ++matvecs;
    return (*plan)->Apply(in, out);
  };
  std::vector<int> seen;
  CgOptions options;
  options.zero_initial_guess = true;
  options.max_iterations = 50;
  options.progress = [&](int k, int total, double residual) {
    seen.push_back(k);
    EXPECT_EQ(total, 50);
    EXPECT_GT(residual, 0);
    return k == 3 ? absl::CancelledError("stop") : absl::OkStatus();
  };
  auto result = ConjugateGradient(cpu, matvec, b.data(), x.data(), m.rows, options);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(matvecs, 3);
  EXPECT_EQ(seen, (std::vector<int>{1, 2, 3}));
}

TEST(ConjugateGradientTest, BadInputsAndIndefiniteOperators) {
  const Stream cpu = Stream::Cpu();
  std::vector<float> b = {1, 2, 3}, x(3);
  Matvec negate = [](const float* in, float* out) {
    for (int i = 0; i < 3; ++i) out[i] = -in[i];
    return absl::OkStatus();
  };
  EXPECT_EQ(ConjugateGradient(cpu, negate, b.data(), x.data(), 3).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ConjugateGradient(cpu, negate, b.data(), x.data(), 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ConjugateGradient(cpu, nullptr, b.data(), x.data(), 3).status().code(), absl::StatusCode::kInvalidArgument);
  CgOptions bad;
  bad.tolerance = -1;
  EXPECT_EQ(ConjugateGradient(cpu, negate, b.data(), x.data(), 3, bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  Matvec failing = [](const float*, float*) { return absl::InternalError("operator broke"); };
  EXPECT_EQ(ConjugateGradient(cpu, failing, b.data(), x.data(), 3).status().code(), absl::StatusCode::kInternal);
  // b == 0: x = 0 without a matvec.
  std::vector<float> zero(3, 0.0f), x0 = {5, 5, 5};
  auto r = ConjugateGradient(cpu, failing, zero.data(), x0.data(), 3);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(x0, zero);
}

// A dense Hermitian positive-definite system on interleaved complex floats.
TEST(ConjugateGradientTest, ComplexHermitianSystem) {
  const int n = 60;
  std::mt19937 rng(12);
  std::uniform_real_distribution<double> d(-1, 1);
  std::vector<std::complex<double>> a(n * n);
  for (int r = 0; r < n; ++r) {
    a[r * n + r] = 2.0 * n + d(rng);
    for (int c = 0; c < r; ++c) {
      a[r * n + c] = {d(rng), d(rng)};
      a[c * n + r] = std::conj(a[r * n + c]);
    }
  }
  Matvec matvec = [&](const float* in, float* out) {
    for (int r = 0; r < n; ++r) {
      std::complex<double> s = 0;
      for (int c = 0; c < n; ++c) s += a[r * n + c] * std::complex<double>(in[2 * c], in[2 * c + 1]);
      out[2 * r] = static_cast<float>(s.real());
      out[2 * r + 1] = static_cast<float>(s.imag());
    }
    return absl::OkStatus();
  };
  const std::vector<float> b = RandomVector(2 * n, 13);
  std::vector<float> x(2 * n, 0.0f);
  CgOptions options;
  options.tolerance = 1e-6;
  auto result = ConjugateGradientComplex(Stream::Cpu(), matvec, b.data(), x.data(), n, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->converged);
  double num = 0, den = 0;
  for (int r = 0; r < n; ++r) {
    std::complex<double> s = 0;
    for (int c = 0; c < n; ++c) s += a[r * n + c] * std::complex<double>(x[2 * c], x[2 * c + 1]);
    num += std::norm(s - std::complex<double>(b[2 * r], b[2 * r + 1]));
    den += std::norm(std::complex<double>(b[2 * r], b[2 * r + 1]));
  }
  EXPECT_LT(std::sqrt(num / den), 2e-6);
}

}  // namespace
}  // namespace linalg
}  // namespace recon
}  // namespace tessera
