// CPU semantics of the solver vector ops, and CUDA parity on random inputs.
#include "kernels/reconstruction/vector_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/buffer.h"
#include "common/testing/device_array.h"
#include "common/testing/gpu_test.h"

namespace tessera {
namespace recon {
namespace {

std::vector<float> Random(int64_t n, uint32_t seed, float lo = -2, float hi = 2) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

TEST(VectorOpsTest, CpuOpsDoWhatTheySay) {
  const Stream cpu = Stream::Cpu();
  std::vector<float> x{1, 2, 3}, y{4, 0, -1};
  ASSERT_TRUE(Axpy(cpu, 2, x.data(), y.data(), 3).ok());
  EXPECT_EQ(y, (std::vector<float>{6, 4, 5}));
  EXPECT_DOUBLE_EQ(*Dot(cpu, x.data(), y.data(), 3), 6 + 8 + 15);
  std::vector<float> den{2, 0, 4}, out(3);
  ASSERT_TRUE(SafeDivide(cpu, x.data(), den.data(), 0, out.data(), 3).ok());
  EXPECT_EQ(out, (std::vector<float>{0.5f, 0, 0.75f}));
  ASSERT_TRUE(AddScaledRatio(cpu, 2, x.data(), den.data(), 0, y.data(), 3).ok());
  EXPECT_EQ(y, (std::vector<float>{7, 4, 6.5f}));
  ASSERT_TRUE(ClampMin(cpu, 5, y.data(), 3).ok());
  EXPECT_EQ(y, (std::vector<float>{7, 5, 6.5f}));
  std::vector<float> at{0, 0, 1, -1}, g{-2, 3, -4, -5};
  ASSERT_TRUE(ZeroWhereBound(cpu, 0, at.data(), g.data(), 4).ok());
  EXPECT_EQ(g, (std::vector<float>{0, 3, -4, 0}));
  EXPECT_FALSE(Fill(cpu, y.data(), -1, 0).ok());
}

// Each op on CUDA against the CPU version, 1e6 + 3 random elements (not a
// multiple of the block size). Element-wise ops match to 1 ulp-ish (2e-6
// relative); sums to 1e-10 relative (both accumulate in double).
TEST(VectorOpsCudaTest, MatchesCpuOnRandomInputs) {
  TESSERA_SKIP_WITHOUT_GPU();
  const int64_t n = 1000003;
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok());
  using ::tessera::testing::DeviceArray;
  const std::vector<float> a = Random(n, 1), b = Random(n, 2), c = Random(n, 3, 0.0f, 1.0f);
  auto da = DeviceArray<float>::FromHost(a, *stream);
  auto db = DeviceArray<float>::FromHost(b, *stream);
  auto dc = DeviceArray<float>::FromHost(c, *stream);
  float* ga = da.data();
  float* gb = db.data();
  float* gc = dc.data();
  const Stream cpu = Stream::Cpu();
  std::vector<float> ha = a, hb = b, hc = c;

  const double dot_gpu = *Dot(*stream, ga, gb, n), dot_cpu = *Dot(cpu, ha.data(), hb.data(), n);
  EXPECT_NEAR(dot_gpu, dot_cpu, 1e-10 * std::fabs(dot_cpu) + 1e-9);
  EXPECT_NEAR(*Sum(*stream, gc, n), *Sum(cpu, hc.data(), n), 1e-8);
  // Bit-identical across two runs (fixed reduction order).
  EXPECT_EQ(*Dot(*stream, ga, gb, n), dot_gpu);

  // Each element-wise op is checked on its own: the CPU runs it on the GPU's
  // current state, so rounding differences (the GPU contracts a*x+y into an
  // FMA) are not amplified by later ops such as SafeDivide by a near-zero
  // denominator (a chained comparison failed that way on an H200).
  const std::pair<DeviceArray<float>*, std::vector<float>*> pairs[] = {{&da, &ha}, {&db, &hb}, {&dc, &hc}};
  auto expect_op = [&](const char* name, auto gpu_op, auto cpu_op) {
    for (const auto& [dev, host] : pairs) *host = dev->Download();
    ASSERT_TRUE(gpu_op().ok()) << name;
    ASSERT_TRUE(cpu_op().ok()) << name;
    ASSERT_TRUE(stream->Synchronize().ok());
    for (const auto& [dev, host] : pairs) {
      const std::vector<float> got = dev->Download();
      int bad = 0;
      for (int64_t i = 0; i < n; ++i) {
        if (std::fabs(got[i] - (*host)[i]) > 2e-6f * std::max(1.0f, std::fabs((*host)[i]))) ++bad;
      }
      EXPECT_EQ(bad, 0) << name;
    }
  };
  expect_op("Axpy", [&] { return Axpy(*stream, 0.7f, ga, gb, n); }, [&] { return Axpy(cpu, 0.7f, ha.data(), hb.data(), n); });
  expect_op("AddScaledRatio", [&] { return AddScaledRatio(*stream, 0.3f, ga, gc, 1e-3f, gb, n); },
            [&] { return AddScaledRatio(cpu, 0.3f, ha.data(), hc.data(), 1e-3f, hb.data(), n); });
  expect_op("Xpby", [&] { return Xpby(*stream, gc, -0.5f, ga, n); },
            [&] { return Xpby(cpu, hc.data(), -0.5f, ha.data(), n); });
  expect_op("Multiply", [&] { return Multiply(*stream, gc, ga, n); },
            [&] { return Multiply(cpu, hc.data(), ha.data(), n); });
  expect_op("ClampMin", [&] { return ClampMin(*stream, 0.1f, ga, n); },
            [&] { return ClampMin(cpu, 0.1f, ha.data(), n); });
  // Random signs in a and b: about a quarter of b is zeroed where a <= 0.
  expect_op("ZeroWhereBound", [&] { return ZeroWhereBound(*stream, 0.0f, ga, gb, n); },
            [&] { return ZeroWhereBound(cpu, 0.0f, ha.data(), hb.data(), n); });
  expect_op("SafeDivide", [&] { return SafeDivide(*stream, ga, gb, 1e-3f, gc, n); },
            [&] { return SafeDivide(cpu, ha.data(), hb.data(), 1e-3f, hc.data(), n); });
}

}  // namespace
}  // namespace recon
}  // namespace tessera
