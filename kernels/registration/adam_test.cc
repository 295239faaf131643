#include "kernels/registration/adam.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common/testing/gpu_test.h"
#include "kernels/registration/reg_testing.h"

namespace tessera {
namespace registration {
namespace {

using reg_testing::HostFloat;
using reg_testing::RandomUniform;
using reg_testing::ToDevice;
using reg_testing::ToHost;

TEST(AdamCpu, MatchesTorchFormulaInDouble) {
  NDArray p = HostFloat({1}, 0.5f), g = HostFloat({1}), m = HostFloat({1}), v = HostFloat({1});
  AdamOptions o;
  o.lr = 0.01;
  double P = 0.5, M = 0, V = 0;
  const float grads[] = {0.3f, -1.2f, 0.05f, 2.0f};
  for (int t = 1; t <= 4; ++t) {
    g.data<float>()[0] = grads[t - 1];
    ASSERT_TRUE(AdamStep(p, g, m, v, o, t, Stream::Cpu()).ok());
    const double G = grads[t - 1];
    M = 0.9 * M + 0.1 * G;
    V = 0.999 * V + 0.001 * G * G;
    const double mhat = M / (1 - std::pow(0.9, t)), vhat = V / (1 - std::pow(0.999, t));
    P -= 0.01 * mhat / (std::sqrt(vhat) + 1e-8);
    EXPECT_NEAR(p.data<float>()[0], P, 1e-6);
    EXPECT_NEAR(m.data<float>()[0], M, 1e-6 * std::abs(M));
    EXPECT_NEAR(v.data<float>()[0], V, 1e-6 * V);
  }
  // First step moves each element by ~lr against the gradient's sign.
  NDArray q = HostFloat({3}, 1.f), gq = HostFloat({3}), mq = HostFloat({3}), vq = HostFloat({3});
  gq.data<float>()[0] = 5.f, gq.data<float>()[1] = -0.001f, gq.data<float>()[2] = 1e3f;
  ASSERT_TRUE(AdamStep(q, gq, mq, vq, o, 1, Stream::Cpu()).ok());
  EXPECT_NEAR(q.data<float>()[0], 0.99f, 1e-6);
  EXPECT_NEAR(q.data<float>()[1], 1.01f, 1e-5);
  EXPECT_NEAR(q.data<float>()[2], 0.99f, 1e-6);
}

TEST(AdamCpu, MinimisesAQuadratic) {
  std::mt19937 rng(1);
  NDArray target = RandomUniform({1000}, rng, -3.f, 3.f);
  NDArray p = HostFloat({1000}), g = HostFloat({1000}), m = HostFloat({1000}), v = HostFloat({1000});
  AdamOptions o;
  o.lr = 0.05;
  for (int t = 1; t <= 1500; ++t) {
    for (int i = 0; i < 1000; ++i) g.data<float>()[i] = 2.f * (p.data<float>()[i] - target.data<float>()[i]);
    ASSERT_TRUE(AdamStep(p, g, m, v, o, t, Stream::Cpu()).ok());
  }
  for (int i = 0; i < 1000; ++i) EXPECT_NEAR(p.data<float>()[i], target.data<float>()[i], 2e-2);
}

TEST(Adam, RejectsBadArguments) {
  NDArray p = HostFloat({8}), g = HostFloat({8}), m = HostFloat({8}), v = HostFloat({8}), s = HostFloat({7});
  AdamOptions o;
  EXPECT_EQ(AdamStep(p, g, m, v, o, 0, Stream::Cpu()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AdamStep(p, s, m, v, o, 1, Stream::Cpu()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AdamStep(p, g, m, m, o, 1, Stream::Cpu()).code(), absl::StatusCode::kInvalidArgument);
  o.beta2 = 1.0;
  EXPECT_EQ(AdamStep(p, g, m, v, o, 1, Stream::Cpu()).code(), absl::StatusCode::kInvalidArgument);
}

// Parity: three steps on random state. Tolerances (float rounding and FMA
// contraction differ): v within 1e-6 relative (a sum of non-negative terms);
// m within 1e-6 * (|m| + 0.1 |g|max) (it can cancel); param within
// 1e-6 * (|param| + 10 lr) (it moves by ~lr per step).
TEST(AdamParity, CudaMatchesCpuOnRandomInputs) {
  TESSERA_SKIP_WITHOUT_GPU();
  Stream stream = Stream::Create(Backend::kCuda).value();
  std::mt19937 rng(3);
  for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{5}, int64_t{1001}, int64_t{(1 << 20) + 3}}) {
    SCOPED_TRACE(n);
    NDArray p = RandomUniform({n}, rng, -2.f, 2.f), m = RandomUniform({n}, rng, -0.1f, 0.1f),
            v = RandomUniform({n}, rng, 1e-6f, 1e-2f);
    NDArray dp = ToDevice(p, stream), dm = ToDevice(m, stream), dv = ToDevice(v, stream);
    AdamOptions o;
    o.lr = 0.02;
    for (int t = 5; t < 8; ++t) {
      NDArray g = RandomUniform({n}, rng, -1.f, 1.f);
      ASSERT_TRUE(AdamStep(p, g, m, v, o, t, Stream::Cpu()).ok());
      ASSERT_TRUE(AdamStep(dp, ToDevice(g, stream), dm, dv, o, t, stream).ok());
    }
    const NDArray hp = ToHost(dp, stream), hm = ToHost(dm, stream), hv = ToHost(dv, stream);
    int64_t bad_p = 0, bad_m = 0, bad_v = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float rp = p.data<float>()[i], rm = m.data<float>()[i], rv = v.data<float>()[i];
      bad_p += !(std::abs(hp.data<float>()[i] - rp) <= 1e-6 * (std::abs(rp) + 10 * o.lr));
      bad_m += !(std::abs(hm.data<float>()[i] - rm) <= 1e-6 * (std::abs(rm) + 0.1));
      bad_v += !(std::abs(hv.data<float>()[i] - rv) <= 1e-6 * std::abs(rv) + 1e-12);
    }
    EXPECT_EQ(bad_p, 0);
    EXPECT_EQ(bad_m, 0);
    EXPECT_EQ(bad_v, 0);
  }
}

}  // namespace
}  // namespace registration
}  // namespace tessera
