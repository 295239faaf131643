// Cartesian SENSE from zero-filled k-space: random complex images times
// 12-coil birdcage maps, centred FFT, every R-th line kept (R = 2, 3, 4,
// both axes, class offsets 0 and 1, with and without extra calibration
// lines): R detected, extra lines counted, image recovered to 1e-3 (relative
// l2); the centred FFT pair round-trips; malformed inputs are INVALID_ARGUMENT.
#include "kernels/reconstruction/mri/cartesian_sense.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common/testing/device_array.h"
#include "kernels/reconstruction/mri/coil_maps.h"

namespace tessera {
namespace recon {
namespace mri {
namespace {

using Complex = std::complex<float>;

std::vector<Complex> RandomImage(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mag(0.2f, 1.0f), phase(-3.1f, 3.1f);
  std::vector<Complex> v(n);
  for (auto& x : v) x = std::polar(mag(rng), phase(rng));
  return v;
}

using ::tessera::testing::RelL2;

TEST(CenteredFft, RoundTripsAndPutsDcAtTheCentre) {
  const int64_t nx = 6, ny = 5;
  auto x = RandomImage(nx * ny * 2, 1);
  auto y = x;
  ASSERT_TRUE(CenteredForwardFft2d(nx, ny, 2, y.data()).ok());
  std::complex<double> sum = 0;
  for (int64_t i = 0; i < nx * ny; ++i) sum += std::complex<double>(x[i]);
  EXPECT_LT(std::abs(std::complex<double>(y[nx / 2 + nx * (ny / 2)]) - sum), 1e-4);
  ASSERT_TRUE(CenteredInverseFft2d(nx, ny, 2, y.data()).ok());
  for (auto& v : y) v /= static_cast<float>(nx * ny);
  EXPECT_LT(RelL2(y, x), 1e-6);
}

struct Case {
  int reduction, axis, offset;
  bool calibration;
};

class CartesianSenseTest : public ::testing::TestWithParam<Case> {};

TEST_P(CartesianSenseTest, RecoversTheImage) {
  const Case c = GetParam();
  const int64_t nx = 48, ny = 36;
  const int coils = 12;
  auto maps = BirdcageMaps(nx, ny, {coils, 1.5});
  ASSERT_TRUE(maps.ok());
  const auto truth = RandomImage(nx * ny, 3);
  std::vector<Complex> kspace(nx * ny * coils);
  for (int ch = 0; ch < coils; ++ch) {
    for (int64_t p = 0; p < nx * ny; ++p) kspace[p + nx * ny * ch] = (*maps)[p + nx * ny * ch] * truth[p];
  }
  ASSERT_TRUE(CenteredForwardFft2d(nx, ny, coils, kspace.data()).ok());
  const int64_t n = c.axis == 1 ? ny : nx;
  int64_t calibration_lines = 0;
  for (int64_t line = 0; line < n; ++line) {
    const bool kept = (line % c.reduction) == c.offset;
    const bool calibration = c.calibration && std::abs(line - n / 2) <= 3;
    calibration_lines += calibration && !kept;
    if (kept || calibration) continue;
    for (int ch = 0; ch < coils; ++ch) {
      for (int64_t k = 0; k < (c.axis == 1 ? nx : ny); ++k) {
        const int64_t index = c.axis == 1 ? k + nx * (line + ny * ch) : line + nx * (k + ny * ch);
        kspace[index] = 0;
      }
    }
  }
  CartesianSenseOptions options;
  options.axis = c.axis;
  auto result = CartesianSense(Stream::Cpu(), nx, ny, coils, kspace, *maps, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->reduction, c.reduction);
  EXPECT_EQ(result->ignored_lines, calibration_lines);
  EXPECT_EQ(result->failed_pixels, 0);
  EXPECT_LT(RelL2(result->image, truth), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Patterns, CartesianSenseTest,
                         ::testing::Values(Case{2, 1, 0, false}, Case{2, 1, 1, false}, Case{3, 1, 1, false},
                                           Case{4, 1, 2, true}, Case{2, 0, 1, true}, Case{4, 0, 0, false},
                                           Case{3, 0, 2, false}));

TEST(CartesianSense, MalformedInputs) {
  const int64_t nx = 8, ny = 10;  // R may be 1, 2 or 5
  std::vector<Complex> maps(nx * ny * 2, Complex(1, 0)), kspace(nx * ny * 2, Complex(0, 0));
  const Stream cpu = Stream::Cpu();
  auto status = CartesianSense(cpu, nx, ny, 2, kspace, maps).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("no non-zero line"), std::string::npos) << status;
  EXPECT_EQ(CartesianSense(cpu, nx, ny, 3, kspace, maps).status().code(), absl::StatusCode::kInvalidArgument);
  // Lines 0, 1, 3: no residue class mod 2 or 5 is complete.
  for (int64_t line : {0, 1, 3}) kspace[nx * line] = Complex(1, 0);
  status = CartesianSense(cpu, nx, ny, 2, kspace, maps).status();
  EXPECT_NE(status.message().find("no regular pattern"), std::string::npos) << status;
  CartesianSenseOptions r3;
  r3.reduction = 3;  // does not divide 10
  EXPECT_EQ(CartesianSense(cpu, nx, ny, 2, kspace, maps, r3).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mri
}  // namespace recon
}  // namespace tessera
