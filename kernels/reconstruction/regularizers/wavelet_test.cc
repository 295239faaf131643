// The wavelet transform on the CPU: perfect reconstruction and orthogonality
// (db2 and db4, 2-D and 3-D, shifted and not, sizes with fewer levels than
// the minimum-size rule alone gives), BART's level rule, thresholding against
// a plain per-coefficient reference, and the prox's seeded shifts.
#include "kernels/reconstruction/regularizers/wavelet.h"

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <random>
#include <set>
#include <vector>

namespace tessera {
namespace recon {
namespace regularizers {
namespace {

using Complex = std::complex<float>;

std::vector<Complex> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<Complex> v(n);
  for (auto& x : v) x = Complex(d(rng), d(rng));
  return v;
}

double Norm(const std::vector<Complex>& v) {
  double s = 0;
  for (const Complex& x : v) s += std::norm(std::complex<double>(x));
  return std::sqrt(s);
}

double MaxAbsDiff(const std::vector<Complex>& a, const std::vector<Complex>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, double(std::abs(a[i] - b[i])));
  return m;
}

struct Case {
  int64_t nx, ny, nz;
  WaveletFilter filter;
  std::array<int64_t, 3> shift;
};

TEST(Wavelet, PerfectReconstructionAndOrthogonality) {
  const Stream cpu = Stream::Cpu();
  const Case cases[] = {
      {64, 64, 1, WaveletFilter::kDb2, {0, 0, 0}},   {64, 48, 1, WaveletFilter::kDb2, {5, 3, 0}},
      {64, 64, 1, WaveletFilter::kDb4, {7, 1, 0}},   {40, 33, 1, WaveletFilter::kDb4, {2, 9, 0}},
      {32, 32, 32, WaveletFilter::kDb2, {1, 2, 3}},  {32, 16, 34, WaveletFilter::kDb4, {0, 5, 1}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.nx << "x" << c.ny << "x" << c.nz << " filter " << int(c.filter));
    const WaveletShape shape{c.nx, c.ny, c.nz, c.filter, /*min_size=*/8};
    const auto x = Random(c.nx * c.ny * c.nz, 1);
    std::vector<Complex> coeffs(x.size()), back(x.size());
    ASSERT_TRUE(WaveletForward(cpu, shape, c.shift, x.data(), coeffs.data()).ok());
    EXPECT_NEAR(Norm(coeffs) / Norm(x), 1.0, 1e-5);  // orthogonal: norm preserved
    EXPECT_GT(MaxAbsDiff(coeffs, x), 0.1);           // and it did transform
    ASSERT_TRUE(WaveletInverse(cpu, shape, c.shift, coeffs.data(), back.data()).ok());
    EXPECT_LT(MaxAbsDiff(back, x), 1e-5);
  }
}

TEST(Wavelet, InnerProductsPreserved) {
  // <W a, W b> = <a, b>: orthogonality beyond the norm.
  const Stream cpu = Stream::Cpu();
  const WaveletShape shape{64, 32, 1, WaveletFilter::kDb4, 8};
  const auto a = Random(64 * 32, 2), b = Random(64 * 32, 3);
  std::vector<Complex> wa(a.size()), wb(b.size());
  ASSERT_TRUE(WaveletForward(cpu, shape, {3, 4, 0}, a.data(), wa.data()).ok());
  ASSERT_TRUE(WaveletForward(cpu, shape, {3, 4, 0}, b.data(), wb.data()).ok());
  std::complex<double> dot_x = 0, dot_w = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot_x += std::conj(std::complex<double>(a[i])) * std::complex<double>(b[i]);
    dot_w += std::conj(std::complex<double>(wa[i])) * std::complex<double>(wb[i]);
  }
  EXPECT_LT(std::abs(dot_x - dot_w), 1e-4 * std::abs(dot_x) + 1e-3);
}

TEST(Wavelet, LevelsFollowMinimumSizeAndDivisibility) {
  auto levels = WaveletLevels({128, 128, 1, WaveletFilter::kDb2, 16});
  ASSERT_TRUE(levels.ok());
  EXPECT_EQ(*levels, (std::array<int, 3>{3, 3, 0}));  // 128 -> 16, z not split
  levels = WaveletLevels({96, 40, 64, WaveletFilter::kDb2, 16});
  ASSERT_TRUE(levels.ok());
  EXPECT_EQ(*levels, (std::array<int, 3>{2, 1, 2}));  // 96 -> 24, 40 -> 20, 64 -> 16
  EXPECT_FALSE(WaveletLevels({0, 8, 1, WaveletFilter::kDb2, 16}).ok());
  const auto bad = WaveletLevels({8, 8, 1, WaveletFilter::kDb2, 0});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("min_size"), std::string::npos);
}

TEST(Wavelet, ConstantImageHasNoDetail) {
  // db filters have vanishing moments: a constant image lives in the coarse band only.
  const Stream cpu = Stream::Cpu();
  const WaveletShape shape{64, 64, 1, WaveletFilter::kDb2, 16};
  std::vector<Complex> x(64 * 64, Complex(2, -1)), w(x.size());
  ASSERT_TRUE(WaveletForward(cpu, shape, {0, 0, 0}, x.data(), w.data()).ok());
  for (int64_t j = 0; j < 64; ++j) {
    for (int64_t i = 0; i < 64; ++i) {
      if (i < 16 && j < 16) continue;
      ASSERT_LT(std::abs(w[i + 64 * j]), 1e-5) << i << "," << j;
    }
  }
}

TEST(Wavelet, SoftThresholdMatchesPlainReference) {
  const Stream cpu = Stream::Cpu();
  const WaveletShape shape{64, 32, 1, WaveletFilter::kDb2, 16};  // coarse band 16 x 16
  const auto c = Random(64 * 32, 4);
  auto t = c;
  const float threshold = 0.6f;
  ASSERT_TRUE(SoftThresholdDetails(cpu, shape, threshold, t.data()).ok());
  int zeroed = 0;
  for (int64_t j = 0; j < 32; ++j) {
    for (int64_t i = 0; i < 64; ++i) {
      const Complex v = c[i + 64 * j];
      Complex expected = v;
      if (!(i < 16 && j < 16)) {
        const double mag = std::abs(std::complex<double>(v));
        expected = mag > threshold ? Complex(std::complex<double>(v) * ((mag - threshold) / mag)) : Complex(0, 0);
        zeroed += mag <= threshold;
      }
      ASSERT_LT(std::abs(t[i + 64 * j] - expected), 1e-6) << i << "," << j;
    }
  }
  EXPECT_GT(zeroed, 100);
  EXPECT_FALSE(SoftThresholdDetails(cpu, shape, -1.f, t.data()).ok());
}

TEST(Wavelet, ProxShiftsAreSeededAndBounded) {
  const Stream cpu = Stream::Cpu();
  const WaveletShape shape{64, 64, 1, WaveletFilter::kDb2, 16};
  auto a = WaveletProx::Create(cpu, shape, 7);
  auto b = WaveletProx::Create(cpu, shape, 7);
  ASSERT_TRUE(a.ok() && b.ok());
  auto xa = Random(64 * 64, 5), xb = xa;
  std::set<std::pair<int64_t, int64_t>> seen;
  for (int k = 0; k < 20; ++k) {
    ASSERT_TRUE((*a)->Apply(0.1f, xa.data()).ok());
    ASSERT_TRUE((*b)->Apply(0.1f, xb.data()).ok());
    const auto s = (*a)->last_shift();
    EXPECT_EQ(s, (*b)->last_shift());
    EXPECT_LT(s[0], 4);  // 2 levels: shifts in [0, 4)
    EXPECT_LT(s[1], 4);
    EXPECT_EQ(s[2], 0);
    seen.insert({s[0], s[1]});
  }
  EXPECT_EQ(xa, xb);
  EXPECT_GT(seen.size(), 4u);
}

TEST(Wavelet, ProxAveragesItsShiftedProxes) {
  // K = 3 shifts per call equals the mean of three single-shift proxes drawn
  // from the same seed (the generator advances per shift).
  const Stream cpu = Stream::Cpu();
  const WaveletShape shape{64, 32, 1, WaveletFilter::kDb2, 8};
  auto averaged = WaveletProx::Create(cpu, shape, 11, true, 3);
  auto single = WaveletProx::Create(cpu, shape, 11, true, 1);
  ASSERT_TRUE(averaged.ok() && single.ok());
  const auto x = Random(64 * 32, 8);
  std::vector<Complex> mean(x.size());
  for (int k = 0; k < 3; ++k) {
    auto y = x;
    ASSERT_TRUE((*single)->Apply(0.3f, y.data()).ok());
    for (size_t i = 0; i < x.size(); ++i) mean[i] += y[i] / 3.f;
  }
  auto z = x;
  ASSERT_TRUE((*averaged)->Apply(0.3f, z.data()).ok());
  EXPECT_LT(MaxAbsDiff(z, mean), 1e-5);
  EXPECT_GT(MaxAbsDiff(z, x), 0.05);
  EXPECT_FALSE(WaveletProx::Create(cpu, shape, 1, true, 0).ok());
}

TEST(Wavelet, ProxWithZeroThresholdIsIdentity) {
  const Stream cpu = Stream::Cpu();
  auto prox = WaveletProx::Create(cpu, {48, 64, 1, WaveletFilter::kDb4, 16}, 3);
  ASSERT_TRUE(prox.ok());
  const auto x = Random(48 * 64, 6);
  auto y = x;
  ASSERT_TRUE((*prox)->Apply(0.f, y.data()).ok());
  EXPECT_LT(MaxAbsDiff(x, y), 1e-5);
}

}  // namespace
}  // namespace regularizers
}  // namespace recon
}  // namespace tessera
