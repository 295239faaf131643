#include "kernels/reconstruction/nufft/nudft.h"

#include <gtest/gtest.h>

#include "kernels/reconstruction/nufft/nufft_test_util.h"

namespace tessera {
namespace recon {
namespace nufft {
namespace {

using cd = std::complex<double>;

TEST(NudftTest, SinglePointMatchesClosedForm) {
  const double x = 0.7, y = -1.3, z = 2.1;
  NudftPoints p;
  p.m = 1;
  p.x = &x;
  p.y = &y;
  p.z = &z;
  const std::array<int64_t, 3> modes = {4, 3, 5};
  const cd c(0.5, -2.0);
  std::vector<cd> f(60);
  NudftType1(modes, p, +1, 1, &c, f.data());
  // index (i0, i1, i2) = (3, 0, 4) is k = (1, -1, 2).
  const cd expected = c * std::polar(1.0, 1 * x - 1 * y + 2 * z);
  const cd got = f[3 + 4 * (0 + 3 * 4)];
  EXPECT_NEAR(std::abs(got - expected), 0.0, 1e-14);
}

TEST(NudftTest, Type1IsTheAdjointOfType2) {
  for (int dim : {2, 3}) {
    const std::array<int64_t, 3> modes = {6, 5, dim == 3 ? 4 : 1};
    const int64_t nmodes = modes[0] * modes[1] * modes[2];
    const auto pts = testing::RandomPoints<double>(dim, 37, 1);
    const auto c = testing::ToDouble(testing::RandomComplex<double>(37 * 2, 2));
    const auto f = testing::ToDouble(testing::RandomComplex<double>(nmodes * 2, 3));
    const auto ac = testing::ReferenceNudft(NufftType::kType1, modes, pts, +1, 2, c);
    const auto af = testing::ReferenceNudft(NufftType::kType2, modes, pts, -1, 2, f);
    const cd lhs = testing::Dot(af, c), rhs = testing::Dot(f, ac);
    EXPECT_NEAR(std::abs(lhs - rhs) / std::abs(lhs), 0.0, 1e-13) << dim;
  }
}

}  // namespace
}  // namespace nufft
}  // namespace recon
}  // namespace tessera
