// The deterministic math of fp_math.h against the C library.
#include "kernels/fingerprint/fp_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace tessera {
namespace fingerprint {
namespace {

TEST(FpMath, ExpDouble) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> u(-700.0, 700.0);
  double worst = 0;
  for (int i = 0; i < 200000; ++i) {
    const double x = i < 1000 ? (i - 500) * 1e-3 : u(rng);
    worst = std::max(worst, std::fabs(fpmath::Exp(x) / std::exp(x) - 1.0));
  }
  EXPECT_LT(worst, 2e-15);
  EXPECT_EQ(fpmath::Exp(-800.0), 0.0);
  EXPECT_EQ(fpmath::Exp(0.0), 1.0);
}

TEST(FpMath, ExpFloat) {
  double worst = 0;
  for (float x = -87.0f; x <= 88.0f; x += 0.00731f) {
    worst = std::max(worst, std::fabs(static_cast<double>(fpmath::ExpF(x)) / std::exp(static_cast<double>(x)) - 1.0));
  }
  EXPECT_LT(worst, 5e-7);
  EXPECT_EQ(fpmath::ExpF(-100.0f), 0.0f);
  EXPECT_TRUE(std::isinf(fpmath::ExpF(100.0f)));
  EXPECT_EQ(fpmath::ExpF(0.0f), 1.0f);
}

TEST(FpMath, Erf) {
  double worst = 0;
  for (double x = -7.0; x <= 7.0; x += 0.00137) worst = std::max(worst, std::fabs(fpmath::Erf(x) - std::erf(x)));
  EXPECT_LT(worst, 1e-13);
  EXPECT_EQ(fpmath::Erf(0.0), 0.0);
}

TEST(FpMath, Atan2) {
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-500.0f, 500.0f);
  double worst = 0;
  for (int i = 0; i < 200000; ++i) {
    const float y = u(rng), x = u(rng);
    worst = std::max(worst, std::fabs(fpmath::Atan2F(y, x) - std::atan2(static_cast<double>(y), static_cast<double>(x))));
  }
  EXPECT_LT(worst, 5e-6);
  EXPECT_EQ(fpmath::Atan2F(0.0f, 0.0f), 0.0f);
  EXPECT_NEAR(fpmath::Atan2F(0.0f, -1.0f), M_PI, 1e-6);
  EXPECT_NEAR(fpmath::Atan2F(-1.0f, 0.0f), -M_PI / 2, 1e-6);
}

TEST(FpMath, AngleDifferencesWrapToMinusPiPi) {
  for (float a = 0.0f; a < 6.28f; a += 0.05f) {
    for (float b = 0.0f; b < 6.28f; b += 0.07f) {
      const float d = fpmath::AngleDiffF(a, b);
      EXPECT_GE(d, -fpmath::kPiF);
      EXPECT_LT(d, fpmath::kPiF);
      EXPECT_NEAR(std::remainder(static_cast<double>(a) - b - d, 2 * M_PI), 0.0, 1e-5);
      const double dd = fpmath::AngleDiff(static_cast<double>(a), static_cast<double>(b));
      EXPECT_GE(dd, -M_PI);
      EXPECT_LT(dd, M_PI);
    }
  }
  EXPECT_EQ(fpmath::FloorSmallF(-2.5f), -3.0f);
  EXPECT_EQ(fpmath::FloorSmallF(2.5f), 2.0f);
  EXPECT_EQ(fpmath::FloorSmallF(-3.0f), -3.0f);
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
