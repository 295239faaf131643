#include "kernels/registration/pipeline/noise_estimate.h"

#include <cmath>
#include <random>

#include "gtest/gtest.h"

namespace tessera::registration {
namespace {

// A smooth "anatomy" (a ramp plus a bright ball with a sharp edge, values in
// [0.1, 0.9]) plus i.i.d. Gaussian noise of `sigma`.
NDArray Phantom(int64_t n, double sigma, uint64_t seed) {
  NDArray a = NDArray::Allocate({n, n, n}, DType::kFloat32).value();
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0.0, sigma);
  float* p = a.data<float>();
  for (int64_t k = 0; k < n; ++k) {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t i = 0; i < n; ++i) {
        const double r = std::hypot(i - n / 2.0, j - n / 2.0, k - n / 2.0);
        const double anatomy = 0.1 + 0.3 * i / n + 0.2 * std::sin(0.1 * j) + (r < n / 4.0 ? 0.3 : 0.0);
        p[i + n * (j + n * k)] = static_cast<float>(anatomy + noise(rng));
      }
    }
  }
  return a;
}

TEST(NoiseEstimateTest, RecoversTheNoiseSigmaOverSmoothAnatomyAndEdges) {
  for (double sigma : {0.005, 0.02, 0.05}) {
    const double estimate = EstimateNoiseSigma(Phantom(48, sigma, 7));
    EXPECT_NEAR(estimate, sigma, 0.1 * sigma) << "sigma " << sigma;
  }
}

TEST(NoiseEstimateTest, CleanAnatomyIsNearZero) {
  // The ramp and the sine are not constant along any axis pair exactly, so
  // HHH is not exactly 0, but it is far below any real noise level.
  EXPECT_LT(EstimateNoiseSigma(Phantom(48, 0.0, 7)), 1e-3);
}

TEST(NoiseEstimateTest, FlatBackgroundIsSkipped) {
  // Half the image clamped to 0 (an empty background), half noisy: the
  // estimate is the noisy half's, not pulled toward 0 by the flat blocks.
  NDArray a = Phantom(48, 0.02, 11);
  float* p = a.data<float>();
  for (int64_t v = 0; v < a.num_elements() / 2; ++v) p[v] = 0.f;
  EXPECT_NEAR(EstimateNoiseSigma(a), 0.02, 0.002);
  NDArray zero = NDArray::Allocate({8, 8, 8}, DType::kFloat32).value();
  for (int64_t v = 0; v < zero.num_elements(); ++v) zero.data<float>()[v] = 0.f;
  EXPECT_EQ(EstimateNoiseSigma(zero), 0.0);
  EXPECT_EQ(EstimateNoiseSigma(NDArray::Allocate({1, 1, 8}, DType::kFloat32).value()), 0.0);  // a line
}

TEST(NoiseEstimateTest, TwoDimensionalImagesUseTheirPlane) {
  NDArray a = NDArray::Allocate({96, 80, 1}, DType::kFloat32).value();
  std::mt19937_64 rng(5);
  std::normal_distribution<double> noise(0.0, 0.03);
  for (int64_t j = 0; j < 80; ++j) {
    for (int64_t i = 0; i < 96; ++i) a.data<float>()[i + 96 * j] = static_cast<float>(0.2 + 0.005 * i + noise(rng));
  }
  EXPECT_NEAR(EstimateNoiseSigma(a), 0.03, 0.003);
  EXPECT_EQ(EstimateNoiseSigma(NDArray::Allocate({96, 1, 1}, DType::kFloat32).value()), 0.0);
}

TEST(NoiseEstimateTest, StridedSubsetAgreesWithEveryBlock) {
  const NDArray a = Phantom(64, 0.03, 3);
  EXPECT_NEAR(EstimateNoiseSigma(a, 1000), EstimateNoiseSigma(a), 0.003);
}

TEST(NoiseEstimateTest, AutoWarpSigmaIsProportionalAndCapped) {
  EXPECT_DOUBLE_EQ(AutoWarpSigma(0.0), 0.0);
  EXPECT_DOUBLE_EQ(AutoWarpSigma(-1.0), 0.0);
  EXPECT_NEAR(AutoWarpSigma(0.02), 0.02 * kWarpSigmaPerNoise, 1e-12);
  EXPECT_DOUBLE_EQ(AutoWarpSigma(10.0), kMaxAutoWarpSigma);
}

}  // namespace
}  // namespace tessera::registration
