// CUDA batched Hermitian positive-definite solves against the CPU reference
// on random well-conditioned systems A = M M^H + n I, n in {1, 2, 3, 4, 5, 8,
// 16, 33, 64, 128}, real and complex, nrhs 1 and 3 (and 20: several passes
// of right-hand sides): X within 1e-5 (relative L2) of the CPU solution,
// residual ||(A + lambda I) X - B|| / ||B|| < 1e-4 for every system, info 0.
// Indefinite systems: the same info as the CPU and X = 0.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <vector>

#include "common/testing/device_array.h"
#include "common/testing/gpu_test.h"
#include "kernels/reconstruction/linalg/batched_cholesky.h"
#include "kernels/reconstruction/linalg/random_problems.h"

namespace tessera {
namespace recon {
namespace linalg {
namespace {

using ::tessera::testing::DeviceArray;

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
  const std::vector<float> re = ::tessera::testing::RandomUniform<float>(size, -1, 1, seed);
  const std::vector<float> im = ::tessera::testing::RandomUniform<float>(size, -1, 1, seed + 1);
  std::vector<T> b(size);
  for (size_t i = 0; i < size; ++i) {
    if constexpr (std::is_same_v<T, float>) {
      b[i] = re[i];
    } else {
      b[i] = T(re[i], im[i]);
    }
  }
  return b;
}

using ::tessera::testing::RelL2;

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
void CheckParity(int n, int nrhs) {
  SCOPED_TRACE(::testing::Message() << (std::is_same_v<T, float> ? "real" : "complex") << " n " << n << " nrhs "
                                    << nrhs);
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok());
  // Not a multiple of the 64 systems a small-n block takes.
  const BatchedSolveShape shape{n <= 8 ? 1000 : (n <= 33 ? 150 : 24), n, nrhs};
  const float lambda = 0.25f;
  const std::vector<T> a = Random<T>(shape.batch, n, 7 * n + nrhs);
  const std::vector<T> b = Rhs<T>(shape.batch * n * nrhs, n);
  std::vector<T> ref(b.size());
  std::vector<int> ref_info(shape.batch);
  cpu::BatchedCholeskySolve(shape, lambda, a.data(), b.data(), ref.data(), ref_info.data());

  auto da = DeviceArray<T>::FromHost(a, *stream);
  auto db = DeviceArray<T>::FromHost(b, *stream);
  auto dx = DeviceArray<T>::Allocate(b.size(), *stream);
  dx.Poison(T(::tessera::testing::kNaN));
  auto dinfo = DeviceArray<int>::Allocate(shape.batch, *stream);
  dinfo.Poison(-1);
  ASSERT_TRUE(BatchedCholeskySolve(*stream, shape, lambda, da.data(), db.data(), dx.data(), dinfo.data()).ok());
  const std::vector<T> x = dx.Download();
  EXPECT_EQ(dinfo.Download(), std::vector<int>(shape.batch, 0));
  EXPECT_LT(RelL2(x, ref), 1e-5);
  EXPECT_LT(WorstResidual(shape, lambda, a, b, x), 1e-4);

  // In place (x == b).
  ASSERT_TRUE(BatchedCholeskySolve(*stream, shape, lambda, da.data(), db.data(), db.data(), dinfo.data()).ok());
  EXPECT_LT(RelL2(db.Download(), ref), 1e-5);
}

template <typename T>
void CheckAllSizes() {
  for (int n : {1, 2, 3, 4, 5, 8, 16, 33, 64, 128}) {
    for (int nrhs : {1, 3}) CheckParity<T>(n, nrhs);
  }
  CheckParity<T>(6, 20);   // right-hand sides in 3 passes of <= 8
  CheckParity<T>(40, 20);  // 2 passes of <= 16
}

TEST(BatchedCholeskyCudaTest, RealMatchesCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  CheckAllSizes<float>();
}

TEST(BatchedCholeskyCudaTest, ComplexMatchesCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  CheckAllSizes<std::complex<float>>();
}

// One indefinite system among positive-definite ones, for a register-path and
// a shared-memory-path size: info names the pivot, X is 0, the others solve.
template <typename T>
void CheckIndefinite(int n) {
  SCOPED_TRACE(::testing::Message() << "n " << n);
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok());
  const BatchedSolveShape shape{70, n, 2};
  std::vector<T> a = Random<T>(shape.batch, n, 5);
  const int p = n / 2;  // pivot p + 1 fails
  a[3 * n * n + p + p * n] = T(-1e4f);
  const std::vector<T> b = Rhs<T>(shape.batch * n * 2, 6);
  std::vector<T> ref(b.size());
  std::vector<int> ref_info(shape.batch);
  cpu::BatchedCholeskySolve(shape, 0.0f, a.data(), b.data(), ref.data(), ref_info.data());
  ASSERT_EQ(ref_info[3], p + 1);
  auto da = DeviceArray<T>::FromHost(a, *stream);
  auto db = DeviceArray<T>::FromHost(b, *stream);
  auto dx = DeviceArray<T>::Allocate(b.size(), *stream);
  dx.Poison(T(::tessera::testing::kNaN));
  auto dinfo = DeviceArray<int>::Allocate(shape.batch, *stream);
  ASSERT_TRUE(BatchedCholeskySolve(*stream, shape, 0.0f, da.data(), db.data(), dx.data(), dinfo.data()).ok());
  EXPECT_EQ(dinfo.Download(), ref_info);
  const std::vector<T> x = dx.Download();
  for (int i = 0; i < 2 * n; ++i) EXPECT_EQ(std::abs(std::complex<double>(x[3 * 2 * n + i])), 0.0);
  EXPECT_LT(RelL2(x, ref), 1e-5);
}

TEST(BatchedCholeskyCudaTest, IndefiniteSystemsReportThePivot) {
  TESSERA_SKIP_WITHOUT_GPU();
  for (int n : {5, 8, 50, 128}) {
    CheckIndefinite<float>(n);
    CheckIndefinite<std::complex<float>>(n);
  }
}

}  // namespace
}  // namespace linalg
}  // namespace recon
}  // namespace tessera
