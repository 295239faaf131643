// CPU reference of the batched Hermitian positive-definite solves: residuals
// on random well-conditioned systems (real and complex), in-place use, the
// upper triangle never read, LAPACK-style info for indefinite systems, and
// argument checks.
#include "kernels/reconstruction/linalg/batched_cholesky.h"

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <limits>
#include <vector>

#include "kernels/reconstruction/linalg/random_problems.h"

namespace tessera {
namespace recon {
namespace linalg {
namespace {

template <typename T>
std::vector<T> Random(int64_t batch, int n, uint32_t seed) {
  if constexpr (std::is_same_v<T, float>) {
    return RandomHpdBatch(batch, n, seed);
  } else {
    return RandomHpdBatchComplex(batch, n, seed);
  }
}

template <typename T>
std::vector<T> Rhs(size_t size, uint32_t seed) {
  std::vector<T> b(size);
  for (size_t i = 0; i < size; ++i) {
    const float re = std::sin(0.37f * i + seed), im = std::cos(1.3f * i + seed);
    if constexpr (std::is_same_v<T, float>) {
      b[i] = re;
    } else {
      b[i] = T(re, im);
    }
  }
  return b;
}

// max over systems of ||(A + lambda I) X - B|| / ||B||, A's full matrix as given.
template <typename T>
double WorstResidual(const BatchedSolveShape& s, float lambda, const std::vector<T>& a, const std::vector<T>& b,
                     const std::vector<T>& x) {
  const int n = s.n;
  double worst = 0;
  for (int64_t i = 0; i < s.batch; ++i) {
    double num = 0, den = 0;
    for (int k = 0; k < s.nrhs; ++k) {
      const int64_t off = i * n * s.nrhs + static_cast<int64_t>(k) * n;
      for (int r = 0; r < n; ++r) {
        std::complex<double> v = static_cast<double>(lambda) * std::complex<double>(x[off + r]);
        for (int c = 0; c < n; ++c) {
          v += std::complex<double>(a[i * n * n + r + c * n]) * std::complex<double>(x[off + c]);
        }
        num += std::norm(v - std::complex<double>(b[off + r]));
        den += std::norm(std::complex<double>(b[off + r]));
      }
    }
    worst = std::max(worst, std::sqrt(num / den));
  }
  return worst;
}

template <typename T>
void CheckResiduals() {
  const Stream cpu = Stream::Cpu();
  for (int n : {1, 2, 3, 4, 5, 8, 16, 33, 64, 128}) {
    for (int nrhs : {1, 3}) {
      const BatchedSolveShape shape{n <= 16 ? 20 : 3, n, nrhs};
      const std::vector<T> a = Random<T>(shape.batch, n, 100 + n);
      const std::vector<T> b = Rhs<T>(shape.batch * n * nrhs, n);
      std::vector<T> x(b.size(), T(std::numeric_limits<float>::quiet_NaN()));
      std::vector<int> info(shape.batch, -1);
      ASSERT_TRUE(BatchedCholeskySolve(cpu, shape, 0.5f, a.data(), b.data(), x.data(), info.data()).ok());
      EXPECT_EQ(info, std::vector<int>(shape.batch, 0)) << "n " << n;
      EXPECT_LT(WorstResidual(shape, 0.5f, a, b, x), 1e-6) << "n " << n << " nrhs " << nrhs;
    }
  }
}

TEST(BatchedCholeskyTest, RealResiduals) { CheckResiduals<float>(); }
TEST(BatchedCholeskyTest, ComplexResiduals) { CheckResiduals<std::complex<float>>(); }

TEST(BatchedCholeskyTest, InPlaceAndUpperTriangleIgnored) {
  const BatchedSolveShape shape{7, 6, 2};
  std::vector<std::complex<float>> a = RandomHpdBatchComplex(shape.batch, shape.n, 3);
  const std::vector<std::complex<float>> full = a;
  for (int64_t i = 0; i < shape.batch; ++i) {
    for (int c = 0; c < shape.n; ++c) {
      for (int r = 0; r < c; ++r) a[i * 36 + r + c * 6] = std::numeric_limits<float>::quiet_NaN();
    }
  }
  const std::vector<std::complex<float>> b = Rhs<std::complex<float>>(shape.batch * 12, 4);
  std::vector<std::complex<float>> xb = b;  // x == b
  std::vector<int> info(shape.batch);
  ASSERT_TRUE(BatchedCholeskySolve(Stream::Cpu(), shape, 0.0f, a.data(), xb.data(), xb.data(), info.data()).ok());
  EXPECT_LT(WorstResidual(shape, 0.0f, full, b, xb), 1e-6);
}

TEST(BatchedCholeskyTest, IndefiniteSystemsReportTheFailedPivot) {
  const BatchedSolveShape shape{3, 4, 1};
  // System 0: diag(2, 3, -1, 5) fails at pivot 3. System 1: [[1 2],[2 1]]
  // block fails at pivot 2. System 2: -0.5 I, rescued by lambda = 1.
  std::vector<float> a(3 * 16, 0.0f);
  const float d0[4] = {2, 3, -1, 5};
  for (int r = 0; r < 4; ++r) a[r + 4 * r] = d0[r];
  a[16 + 0] = 1;
  a[16 + 1] = 2;
  a[16 + 4] = 2;
  a[16 + 5] = 1;
  a[16 + 10] = 1;
  a[16 + 15] = 1;
  for (int r = 0; r < 4; ++r) a[32 + r + 4 * r] = -0.5f;
  std::vector<float> b(12, 1.0f), x(12, 9.0f);
  std::vector<int> info(3, -1);
  ASSERT_TRUE(BatchedCholeskySolve(Stream::Cpu(), shape, 0.0f, a.data(), b.data(), x.data(), info.data()).ok());
  EXPECT_EQ(info, (std::vector<int>{3, 2, 1}));
  for (float v : x) EXPECT_EQ(v, 0.0f);
  ASSERT_TRUE(BatchedCholeskySolve(Stream::Cpu(), shape, 1.0f, a.data(), b.data(), x.data(), info.data()).ok());
  EXPECT_EQ(info[2], 0);
  for (int r = 0; r < 4; ++r) EXPECT_FLOAT_EQ(x[8 + r], 2.0f);  // (-0.5 + 1) x = 1
}

TEST(BatchedCholeskyTest, BadArguments) {
  const Stream cpu = Stream::Cpu();
  std::vector<float> a(16, 1.0f), b(4), x(4);
  std::vector<int> info(1);
  auto call = [&](BatchedSolveShape s, float lambda, int* i) {
    return BatchedCholeskySolve(cpu, s, lambda, a.data(), b.data(), x.data(), i).code();
  };
  EXPECT_EQ(call({1, 0, 1}, 0, info.data()), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(call({1, 129, 1}, 0, info.data()), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(call({1, 4, 0}, 0, info.data()), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(call({-1, 4, 1}, 0, info.data()), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(call({1, 4, 1}, std::numeric_limits<float>::infinity(), info.data()), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(call({1, 4, 1}, 0, nullptr), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(call({0, 4, 1}, 0, nullptr), absl::StatusCode::kOk);  // nothing to do
}

}  // namespace
}  // namespace linalg
}  // namespace recon
}  // namespace tessera
