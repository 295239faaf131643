#include "kernels/reconstruction/nufft/es_kernel.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tessera {
namespace recon {
namespace nufft {
namespace {

TEST(EsKernelTest, WidthFollowsFinufftRules) {
  // sigma 2: w = ceil(log10(1/tol)) + 1.
  EXPECT_EQ(ChooseEsKernel(1e-2, 2.0)->width, 3);
  EXPECT_EQ(ChooseEsKernel(1e-5, 2.0)->width, 6);
  EXPECT_EQ(ChooseEsKernel(1e-6, 2.0)->width, 7);
  EXPECT_EQ(ChooseEsKernel(1e-12, 2.0)->width, 13);
  EXPECT_EQ(ChooseEsKernel(1e-15, 2.0)->width, 16);
  EXPECT_NEAR(ChooseEsKernel(1e-5, 2.0)->beta, 2.30 * 6, 1e-12);
  EXPECT_NEAR(ChooseEsKernel(1e-2, 2.0)->beta, 2.26 * 3, 1e-12);
  // sigma 1.25: w = ceil(ln(1/tol) / (pi sqrt(0.2))), gamma-based beta.
  const auto k = ChooseEsKernel(1e-6, 1.25);
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->width, static_cast<int>(std::ceil(std::log(1e6) / (M_PI * std::sqrt(0.2)))) + 1);
  EXPECT_NEAR(k->beta, 0.97 * M_PI * (1 - 1 / 2.5) * k->width, 1e-12);
  EXPECT_EQ(ChooseEsKernel(1e-14, 1.25)->width, kMaxKernelWidth);
}

TEST(EsKernelTest, RejectsBadTolerance) {
  for (double tol : {0.0, -1.0, 0.5, 1e-16, std::nan("")}) {
    const auto k = ChooseEsKernel(tol, 2.0);
    EXPECT_EQ(k.status().code(), absl::StatusCode::kInvalidArgument) << tol;
    EXPECT_NE(k.status().message().find("tolerance"), std::string::npos);
  }
  const auto k = ChooseEsKernel(1e-6, 1.5);
  EXPECT_EQ(k.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(k.status().message().find("upsampling"), std::string::npos);
}

TEST(EsKernelTest, FineGridIsEvenAndSmooth) {
  EXPECT_EQ(FineGridSize(256, 2.0, 6), 512);
  EXPECT_EQ(FineGridSize(100, 1.25, 10), 128);  // 125 -> next even 2,3,5-smooth
  EXPECT_EQ(FineGridSize(2, 2.0, 7), 14 + 2);   // at least 2w, even, smooth: 16
  EXPECT_EQ(FineGridSize(49, 2.0, 4), 100);
}

TEST(EsKernelTest, GaussLegendreIntegratesPolynomialsExactly) {
  std::vector<double> x, w;
  GaussLegendre(8, &x, &w);
  double s0 = 0, s14 = 0;
  for (int i = 0; i < 8; ++i) {
    s0 += w[i];
    s14 += w[i] * std::pow(x[i], 14);
  }
  EXPECT_NEAR(s0, 2.0, 1e-14);
  EXPECT_NEAR(s14, 2.0 / 15.0, 1e-14);
}

TEST(EsKernelTest, FourierSeriesMatchesFineQuadrature) {
  const EsKernelParams p = *ChooseEsKernel(1e-6, 2.0);
  const int64_t n = 64;
  const std::vector<double> phihat = EsKernelFourierSeries(p, n);
  ASSERT_EQ(phihat.size(), static_cast<size_t>(n / 2 + 1));
  for (int64_t k : {0, 5, 16, 32}) {
    // Midpoint rule with 20000 cells on the support.
    const int cells = 20000;
    const double h = p.width / static_cast<double>(cells);
    double s = 0;
    for (int i = 0; i < cells; ++i) {
      const double z = -p.width / 2.0 + (i + 0.5) * h;
      s += EsKernelValue(p, z) * std::cos(2 * M_PI * k * z / n) * h;
    }
    EXPECT_NEAR(phihat[k], s, 1e-7 * phihat[0]) << "k=" << k;
  }
  EXPECT_GT(phihat[n / 4], 0.0);  // no zero crossings inside the modes
}

}  // namespace
}  // namespace nufft
}  // namespace recon
}  // namespace tessera
