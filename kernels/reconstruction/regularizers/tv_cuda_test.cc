// TV on a CUDA stream against the CPU reference on random (non-zero) images,
// real and complex, 2-D and 3-D: TvNorm to 1e-6 relative (both sum the same
// float magnitudes in double; only the order differs), TvGradient to 1e-5
// relative L2, TvProx (40 FGP iterations, with and without non_negative) to
// 1e-4 relative L2 (fused multiply-adds differ; FGP is contractive, so the
// difference does not grow). Reruns on the GPU are bit-identical (every pass
// is element-wise). Skipped without a GPU.
#include <gtest/gtest.h>

#include <vector>

#include "common/device.h"
#include "common/testing/device_array.h"
#include "common/testing/gpu_test.h"
#include "kernels/reconstruction/regularizers/tv.h"

namespace tessera {
namespace recon {
namespace regularizers {
namespace {

using ::tessera::testing::DeviceArray;
using ::tessera::testing::RandomUniform;
using ::tessera::testing::RelL2;

const TvShape kShapes[] = {{64, 48, 1, 1}, {24, 20, 16, 1}, {40, 33, 1, 2}, {16, 17, 12, 2}};

std::vector<float> CpuProx(const TvShape& s, std::vector<float> x, const TvProxOptions& o) {
  const Stream cpu = Stream::Cpu();  // the plan keeps a pointer to it
  auto plan = TvProxPlan::Create(cpu, s);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (plan.ok()) EXPECT_TRUE(plan->Apply(o, x.data()).ok());
  return x;
}

std::vector<float> GpuProx(const Stream& stream, const TvShape& s, const std::vector<float>& b,
                           const TvProxOptions& o) {
  auto plan = TvProxPlan::Create(stream, s);
  EXPECT_TRUE(plan.ok()) << plan.status();
  auto x = DeviceArray<float>::FromHost(b, stream);
  if (plan.ok()) EXPECT_TRUE(plan->Apply(o, x.data()).ok());
  return x.Download();
}

TEST(TvCudaTest, NormAndGradientMatchTheCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok()) << stream.status();
  for (const TvShape& s : kShapes) {
    const std::vector<float> x = RandomUniform<float>(static_cast<size_t>(s.size()), -1, 2, 21);
    auto cpu_norm = TvNorm(Stream::Cpu(), s, x.data());
    auto dx = DeviceArray<float>::FromHost(x, *stream);
    auto gpu_norm = TvNorm(*stream, s, dx.data());
    ASSERT_TRUE(cpu_norm.ok() && gpu_norm.ok());
    EXPECT_NEAR(*gpu_norm, *cpu_norm, 1e-6 * *cpu_norm);

    std::vector<float> cpu_g(x.size());
    ASSERT_TRUE(TvGradient(Stream::Cpu(), s, 1e-2, x.data(), cpu_g.data()).ok());
    auto dg = DeviceArray<float>::Allocate(x.size(), *stream);
    dg.Poison(::tessera::testing::kNaN);
    ASSERT_TRUE(TvGradient(*stream, s, 1e-2, dx.data(), dg.data()).ok());
    EXPECT_LT(RelL2(dg.Download(), cpu_g), 1e-5) << s.nx << "x" << s.ny << "x" << s.nz << " c" << s.channels;
  }
}

TEST(TvCudaTest, ProxMatchesTheCpuAndRerunsAreIdentical) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok()) << stream.status();
  for (const TvShape& s : kShapes) {
    const std::vector<float> b = RandomUniform<float>(static_cast<size_t>(s.size()), -0.3, 1, 23);
    for (bool non_negative : {false, true}) {
      if (non_negative && s.channels != 1) continue;
      const TvProxOptions o{0.2, 40, non_negative};
      const std::vector<float> cpu = CpuProx(s, b, o);
      const std::vector<float> gpu = GpuProx(*stream, s, b, o);
      EXPECT_LT(RelL2(gpu, cpu), 1e-4) << s.nx << "x" << s.ny << "x" << s.nz << " c" << s.channels
                                       << " non_negative " << non_negative;
      EXPECT_EQ(GpuProx(*stream, s, b, o), gpu);
    }
  }
}

}  // namespace
}  // namespace regularizers
}  // namespace recon
}  // namespace tessera
