// bspline_interpolation: the spline passes through the samples, reproduces a
// cubic polynomial away from the mirrored borders, and the sampler honours
// ITK's inside-buffer rule.
#include "kernels/registration/bspline_interpolation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace tessera::registration {
namespace {

NDArray RandomImage(int64_t nx, int64_t ny, int64_t nz, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-50, 150);
  NDArray a = NDArray::Allocate({nx, ny, nz}, DType::kFloat32).value();
  for (int64_t i = 0; i < a.num_elements(); ++i) a.data<float>()[i] = u(rng);
  return a;
}

TEST(Bspline, InterpolatesTheSamples) {
  const NDArray image = RandomImage(9, 7, 6, 3);
  const NDArray c = BsplineCoefficients(image).value();
  const Dims3 d{9, 7, 6};
  double worst = 0;
  for (int64_t k = 0; k < d.nz; ++k) {
    for (int64_t j = 0; j < d.ny; ++j) {
      for (int64_t i = 0; i < d.nx; ++i) {
        const double v = cpu::BsplineValue(c.data<float>(), d, i, j, k);
        worst = std::max(worst, std::fabs(v - image.data<float>()[d.index(i, j, k)]));
      }
    }
  }
  EXPECT_LT(worst, 2e-4);  // float coefficients of values up to 150: ~1e-6 relative
}

// A cubic along each axis (separable product) sampled at the voxels is
// reproduced between them, away from the mirrored borders (whose influence
// decays as |sqrt(3) - 2|^distance).
TEST(Bspline, ReproducesACubicInTheInterior) {
  const int64_t n = 40;
  auto f = [](double x) { return 0.01 * x * x * x - 0.3 * x * x + 2 * x + 5; };
  NDArray image = NDArray::Allocate({n, 3, 1}, DType::kFloat32).value();
  for (int64_t j = 0; j < 3; ++j) {
    for (int64_t i = 0; i < n; ++i) image.data<float>()[i + n * j] = static_cast<float>(f(i));
  }
  const NDArray c = BsplineCoefficients(image).value();
  for (double x = 15; x <= 25; x += 0.37) {
    const double v = cpu::BsplineValue(c.data<float>(), Dims3{n, 3, 1}, x, 1.0, 0.0);
    EXPECT_NEAR(v, f(x), 1e-4 * std::fabs(f(x)) + 1e-4) << x;
  }
}

TEST(Bspline, OutsideTheBufferGivesTheDefault) {
  const NDArray image = RandomImage(5, 5, 5, 4);
  const NDArray c = BsplineCoefficients(image).value();
  // x: -0.6 outside, -0.4 inside (mirrored), 4.49 inside, 4.5 outside.
  const std::vector<float> pos = {-0.6f, -0.4f, 4.49f, 4.5f, 2, 2, 2, 2, 2, 2, 2, 2};
  std::vector<float> out(4);
  BsplineSampleArgs args{c.data<float>(), Dims3{5, 5, 5}, pos.data(), 4, -7.0f};
  ASSERT_TRUE(BsplineSample(Stream::Cpu(), args, out.data()).ok());
  EXPECT_EQ(out[0], -7.0f);
  EXPECT_NE(out[1], -7.0f);
  EXPECT_NE(out[2], -7.0f);
  EXPECT_EQ(out[3], -7.0f);
  EXPECT_NEAR(out[1], cpu::BsplineValue(c.data<float>(), Dims3{5, 5, 5}, -0.4f, 2, 2), 1e-4);
}

TEST(Bspline, RejectsWrongInputs) {
  NDArray ints = NDArray::Allocate({4, 4, 4}, DType::kInt32).value();
  EXPECT_EQ(BsplineCoefficients(ints).status().code(), absl::StatusCode::kInvalidArgument);
  BsplineSampleArgs args;
  float out;
  EXPECT_EQ(BsplineSample(Stream::Cpu(), args, &out).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::registration
