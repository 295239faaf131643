// CPU tests of MSE: value against a direct sum, gradient against finite
// differences in double.
#include "kernels/registration/mse.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/registration/test_util.h"

namespace tessera {
namespace registration {
namespace {

using testing::Cast;
using testing::RandomUniform;
using testing::RelL2;

TEST(MseCpu, ValueAndGradient) {
  const Dims3 d{7, 6, 5};
  const auto f = RandomUniform<double>(d.size(), -1.0, 1.0, 1);
  auto w = RandomUniform<double>(d.size(), -1.0, 1.0, 2);
  double want = 0;
  for (size_t v = 0; v < f.size(); ++v) want += (w[v] - f[v]) * (w[v] - f[v]);
  want /= d.size();
  std::vector<double> grad(d.size());
  EXPECT_NEAR(cpu::Mse<double>(f.data(), w.data(), d, grad.data()), want, 1e-14);

  const double h = 1e-6;
  double max_err = 0, max_ref = 0;
  for (size_t v = 0; v < w.size(); ++v) {
    const double saved = w[v];
    w[v] = saved + h;
    const double lp = cpu::Mse<double>(f.data(), w.data(), d, nullptr);
    w[v] = saved - h;
    const double lm = cpu::Mse<double>(f.data(), w.data(), d, nullptr);
    w[v] = saved;
    max_err = std::max(max_err, std::abs((lp - lm) / (2 * h) - grad[v]));
    max_ref = std::max(max_ref, std::abs(grad[v]));
  }
  EXPECT_GT(max_ref, 1e-4);
  EXPECT_LT(max_err / max_ref, 1e-6);

  const auto ff = Cast<float>(f), wf = Cast<float>(w);
  float loss = 0;
  std::vector<float> gf(d.size(), testing::kNaN);
  ASSERT_TRUE(Mse(Stream::Cpu(), ff.data(), wf.data(), d, &loss, gf.data()).ok());
  EXPECT_NEAR(loss, want, 1e-6);
  EXPECT_LT(RelL2(gf, grad), 1e-6);
}

TEST(MseCpu, RejectsBadArguments) {
  std::vector<float> a(8, 1.0f);
  float loss;
  EXPECT_EQ(Mse(Stream::Cpu(), a.data(), nullptr, {2, 2, 2}, &loss, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Mse(Stream::Cpu(), a.data(), a.data(), {0, 2, 2}, &loss, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace registration
}  // namespace tessera
