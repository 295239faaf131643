// The ramp filter: FFT filtering equals the spatial convolution of Kak &
// Slaney's discretised ramp, the spectrum is the ramp |nu| where it should
// be, windows and cutoff shape it as documented.
#include "kernels/reconstruction/fbp/filter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/reconstruction/fbp/fbp_backend.h"

namespace tessera {
namespace recon {
namespace fbp {
namespace {

constexpr double kPi = 3.14159265358979323846;

TEST(FilterTest, PaddedLengthIsPowerOfTwoAtLeastTwiceCols) {
  EXPECT_EQ(PaddedLength(1), 2);
  EXPECT_EQ(PaddedLength(100), 256);
  EXPECT_EQ(PaddedLength(128), 256);
  EXPECT_EQ(PaddedLength(129), 512);
  EXPECT_EQ(PaddedLength(1024), 2048);
}

TEST(FilterTest, RampKernelValues) {
  const std::vector<double> h = RampKernel(4);
  EXPECT_DOUBLE_EQ(h[0], 0.25);
  EXPECT_DOUBLE_EQ(h[1], -1.0 / (kPi * kPi));
  EXPECT_DOUBLE_EQ(h[2], 0.0);
  EXPECT_DOUBLE_EQ(h[3], -1.0 / (9.0 * kPi * kPi));
}

// FFT filtering (zero-padded, so no wrap-around) against the direct spatial
// convolution q[k] = sum_j h[k - j] p[j] in double, on random rows of an odd
// length: agreement to 1e-5 of the largest output.
TEST(FilterTest, FftFilteringEqualsSpatialConvolution) {
  const int64_t rows = 16, cols = 37;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 2.0f);
  std::vector<float> in(rows * cols), out(rows * cols);
  for (float& v : in) v = dist(rng);
  ASSERT_TRUE(cpu::FilterRows(FilterKind::kRamLak, 1.0, in.data(), out.data(), rows, cols).ok());
  const std::vector<double> h = RampKernel(cols);
  double max_err = 0, max_val = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < cols; ++k) {
      double q = 0;
      for (int64_t j = 0; j < cols; ++j) q += h[std::abs(k - j)] * in[r * cols + j];
      max_err = std::max(max_err, std::fabs(q - out[r * cols + k]));
      max_val = std::max(max_val, std::fabs(q));
    }
  }
  EXPECT_LT(max_err, 1e-5 * max_val) << "max error " << max_err << " of " << max_val;
}

// In place works too (out == in).
TEST(FilterTest, InPlaceFiltering) {
  std::vector<float> a(3 * 20), b;
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.3 * i) + 1.5f;
  b = a;
  std::vector<float> out(a.size());
  ASSERT_TRUE(cpu::FilterRows(FilterKind::kHann, 0.7, a.data(), out.data(), 3, 20).ok());
  ASSERT_TRUE(cpu::FilterRows(FilterKind::kHann, 0.7, b.data(), b.data(), 3, 20).ok());
  EXPECT_EQ(out, b);
}

// The spectrum of the discretised ramp is |nu| (nu in cycles per sample) up
// to the truncation of the kernel, and positive at DC (the sampled |nu|
// would be 0 there and bias the reconstruction).
TEST(FilterTest, RamLakSpectrumIsTheRamp) {
  const int64_t n = 512;
  const std::vector<float> s = FilterSpectrum(FilterKind::kRamLak, 1.0, n);
  ASSERT_EQ(s.size(), static_cast<size_t>(n / 2 + 1));
  EXPECT_GT(s[0], 0.0f);
  EXPECT_LT(s[0] * n, 2.0 / n);
  for (int64_t k = 1; k <= n / 2; ++k) {
    EXPECT_NEAR(s[k] * n, static_cast<double>(k) / n, 2.0 / n) << "k = " << k;
  }
  EXPECT_NEAR(s[n / 2] * n, 0.5, 1e-3);
}

TEST(FilterTest, WindowsAndCutoff) {
  const int64_t n = 256;
  const std::vector<float> ramp = FilterSpectrum(FilterKind::kRamLak, 1.0, n);
  const std::vector<float> hann = FilterSpectrum(FilterKind::kHann, 1.0, n);
  const std::vector<float> shepp = FilterSpectrum(FilterKind::kSheppLogan, 1.0, n);
  const std::vector<float> cosine = FilterSpectrum(FilterKind::kCosine, 1.0, n);
  const std::vector<float> cut = FilterSpectrum(FilterKind::kRamLak, 0.5, n);
  EXPECT_NEAR(hann[n / 2], 0.0, 1e-9);
  EXPECT_NEAR(hann[n / 4], 0.5 * ramp[n / 4], 1e-7);
  EXPECT_NEAR(shepp[n / 2], ramp[n / 2] * 2.0 / kPi, 1e-7);
  EXPECT_NEAR(cosine[n / 2], 0.0, 1e-7);
  EXPECT_NEAR(cosine[n / 4], ramp[n / 4] * std::cos(kPi / 4), 1e-7);
  for (int64_t k = 0; k <= n / 2; ++k) {
    if (k <= n / 4) {
      EXPECT_EQ(cut[k], ramp[k]) << k;
    } else {
      EXPECT_EQ(cut[k], 0.0f) << k;
    }
  }
  // Cutoff scales the window's frequency axis: hann at cutoff 0.5 is 0 at nu = 0.5.
  EXPECT_NEAR(FilterWindow(FilterKind::kHann, 0.5, 0.5), 0.0, 1e-12);
  EXPECT_NEAR(FilterWindow(FilterKind::kHann, 0.5, 0.25), 0.5, 1e-12);
}

TEST(FilterTest, NamesAndValidation) {
  for (FilterKind k : {FilterKind::kRamLak, FilterKind::kSheppLogan, FilterKind::kCosine, FilterKind::kHann}) {
    auto parsed = ParseFilterKind(FilterKindName(k));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, k);
  }
  EXPECT_EQ(*ParseFilterKind("Shepp-Logan"), FilterKind::kSheppLogan);
  auto bad = ParseFilterKind("hamming");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("hamming"), absl::string_view::npos);
  EXPECT_TRUE(ValidateCutoff(1.0).ok());
  EXPECT_TRUE(ValidateCutoff(0.01).ok());
  for (double c : {0.0, -0.5, 1.5, std::nan("")}) {
    const absl::Status s = ValidateCutoff(c);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c;
    EXPECT_NE(s.message().find("filter_cutoff"), absl::string_view::npos);
  }
  std::vector<float> row(8, 1.0f);
  EXPECT_FALSE(cpu::FilterRows(FilterKind::kRamLak, 2.0, row.data(), row.data(), 1, 8).ok());
}

}  // namespace
}  // namespace fbp
}  // namespace recon
}  // namespace tessera
