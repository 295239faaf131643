// SENSE unfolding on the CPU: noiseless folds of random complex images are
// unfolded to 1e-4 (relative l2) for R = 1..8 along either axis (random maps,
// R + 2 coils, lambda 0) and with 16-coil birdcage maps for R <= 4; lambda > 0 shrinks; pixels no coil sees report
// as failed and come back 0; bad shapes and arguments are INVALID_ARGUMENT.
#include "kernels/reconstruction/mri/sense_unfold.h"

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <random>
#include <vector>

#include "common/testing/device_array.h"
#include "kernels/reconstruction/mri/coil_maps.h"

namespace tessera {
namespace recon {
namespace mri {
namespace {

using Complex = std::complex<float>;

std::vector<Complex> RandomImage(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(0.2f, 1.0f), phase(-3.14f, 3.14f);
  std::vector<Complex> v(n);
  for (auto& x : v) x = std::polar(dist(rng), phase(rng));
  return v;
}

using ::tessera::testing::RelL2;

// Random (rough) maps keep every R x R system well conditioned, so a
// noiseless fold must come back to float precision for every R; coils = R + 2.
class SenseUnfoldTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(SenseUnfoldTest, NoiselessFoldIsRecovered) {
  const auto [reduction, axis] = GetParam();
  SenseShape shape;
  shape.nx = axis == 0 ? 6 * reduction : 20;
  shape.ny = axis == 1 ? 6 * reduction : 18;
  shape.coils = reduction + 2;
  shape.reduction = reduction;
  shape.axis = axis;
  const auto maps = RandomImage(shape.nx * shape.ny * shape.coils, 100 + reduction);
  const auto truth = RandomImage(shape.nx * shape.ny, 7 + reduction);
  std::vector<Complex> aliased(shape.aliased_pixels() * shape.coils), image(truth.size(), Complex(NAN, NAN));
  cpu::SenseFold(shape, maps.data(), truth.data(), aliased.data());
  auto failed = SenseUnfold(Stream::Cpu(), shape, 0.0f, maps.data(), aliased.data(), image.data());
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_EQ(*failed, 0);
  EXPECT_LT(RelL2(image, truth), 1e-4) << "R = " << reduction << " axis " << axis;
}

INSTANTIATE_TEST_SUITE_P(Reductions, SenseUnfoldTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 6, 7, 8), ::testing::Values(0, 1)));

// Smooth birdcage maps (16 coils on a ring): R <= 4 is well conditioned
// (1e-4); at R = 8 the ring's g-factor makes float normal equations lose
// digits, so only a loose bound is asserted there.
TEST(SenseUnfold, BirdcageFoldIsRecovered) {
  for (int reduction : {2, 3, 4, 8}) {
    SenseShape shape{40, 24 * reduction, 16, reduction, 1};
    auto maps = BirdcageMaps(shape.nx, shape.ny, {shape.coils, 1.5});
    ASSERT_TRUE(maps.ok());
    const auto truth = RandomImage(shape.nx * shape.ny, 9);
    std::vector<Complex> aliased(shape.aliased_pixels() * shape.coils), image(truth.size());
    cpu::SenseFold(shape, maps->data(), truth.data(), aliased.data());
    auto failed = SenseUnfold(Stream::Cpu(), shape, 0.0f, maps->data(), aliased.data(), image.data());
    ASSERT_TRUE(failed.ok()) << failed.status();
    EXPECT_LT(RelL2(image, truth), reduction <= 4 ? 1e-4 : 0.5) << "R = " << reduction;
  }
}

TEST(SenseUnfold, RegularisationShrinksAndUnseenPixelsFail) {
  SenseShape shape{16, 16, 4, 2, 1};
  auto maps = BirdcageMaps(16, 16, {4, 1.5});
  ASSERT_TRUE(maps.ok());
  // Coil sensitivities zero in row 0 and its alias row 8: no coil sees them.
  for (int c = 0; c < 4; ++c) {
    for (int i = 0; i < 16; ++i) {
      (*maps)[i + 16 * (0 + 16 * c)] = 0;
      (*maps)[i + 16 * (8 + 16 * c)] = 0;
    }
  }
  const auto truth = RandomImage(256, 3);
  std::vector<Complex> aliased(128 * 4), image(256), regularised(256);
  cpu::SenseFold(shape, maps->data(), truth.data(), aliased.data());
  auto failed = SenseUnfold(Stream::Cpu(), shape, 0.0f, maps->data(), aliased.data(), image.data());
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(*failed, 16);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(image[i], Complex(0, 0));
  auto with_lambda = SenseUnfold(Stream::Cpu(), shape, 0.5f, maps->data(), aliased.data(), regularised.data());
  ASSERT_TRUE(with_lambda.ok());
  EXPECT_EQ(*with_lambda, 0);
  double norm_plain = 0, norm_reg = 0;
  for (int p = 16; p < 256; ++p) norm_plain += std::norm(image[p]), norm_reg += std::norm(regularised[p]);
  EXPECT_LT(norm_reg, 0.9 * norm_plain);
}

TEST(SenseUnfold, BadArgumentsAreInvalid) {
  std::vector<Complex> buf(1024);
  const Stream cpu = Stream::Cpu();
  auto code = [&](SenseShape shape, float lambda) {
    return SenseUnfold(cpu, shape, lambda, buf.data(), buf.data(), buf.data()).status().code();
  };
  EXPECT_EQ(code({16, 15, 4, 2, 1}, 0), absl::StatusCode::kInvalidArgument);  // 15 % 2
  EXPECT_EQ(code({16, 16, 4, 9, 1}, 0), absl::StatusCode::kInvalidArgument);  // R > 8
  EXPECT_EQ(code({16, 16, 4, 2, 2}, 0), absl::StatusCode::kInvalidArgument);  // axis
  EXPECT_EQ(code({16, 16, 0, 2, 1}, 0), absl::StatusCode::kInvalidArgument);  // coils
  EXPECT_EQ(code({16, 16, 4, 2, 1}, -1), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code({16, 16, 4, 2, 1}, NAN), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SenseUnfold(cpu, {16, 16, 4, 2, 1}, 0, nullptr, buf.data(), buf.data()).status().code(),
            absl::StatusCode::kInvalidArgument);
  const auto status = SenseUnfold(cpu, {16, 15, 4, 2, 1}, 0, buf.data(), buf.data(), buf.data()).status();
  EXPECT_NE(status.message().find("divisible"), std::string::npos) << status;
}

}  // namespace
}  // namespace mri
}  // namespace recon
}  // namespace tessera
