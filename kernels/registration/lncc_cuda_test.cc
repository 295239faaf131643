// CUDA-vs-CPU parity of fused LNCC on random inputs (skipped without a GPU).
// Outputs are poisoned with NaN before every GPU run.
// Tolerances: loss relative 1e-5; gradient relative L2 1e-4.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/buffer.h"
#include "common/testing/gpu_test.h"
#include "kernels/registration/lncc.h"
#include "kernels/registration/test_util.h"

namespace tessera {
namespace registration {
namespace {

using testing::DeviceArray;
using testing::kNaN;
using testing::RandomUniform;
using testing::RelL2;

struct Case {
  Dims3 dims;
  int window;
  double scale;  // intensity scale
};

TEST(LnccCuda, MatchesCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto s = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(s.ok()) << s.status();
  const Stream& stream = *s;
  uint32_t seed = 7;
  Workspace ws;
  for (const Case& c : {Case{{37, 29, 23}, 7, 1.0}, Case{{64, 50, 40}, 3, 1.0}, Case{{40, 30, 100}, 5, 1.0},
                        Case{{33, 17, 70}, 9, 1000.0}, Case{{20, 21, 22}, 25, 1.0}, Case{{70, 9, 1}, 7, 1.0},
                        Case{{1, 1, 50}, 3, 1.0}}) {
    SCOPED_TRACE(DimsToString(c.dims) + " window " + std::to_string(c.window));
    const Dims3 d = c.dims;
    const auto f = RandomUniform<float>(d.size(), 0.0, c.scale, ++seed);
    auto w = RandomUniform<float>(d.size(), 0.0, c.scale, ++seed);
    for (size_t v = 0; v < w.size(); ++v) w[v] = 0.5f * w[v] + 0.5f * f[v];
    LnccOptions opt;
    opt.window = c.window;
    float loss_cpu = 0;
    std::vector<float> grad_cpu(d.size());
    ASSERT_TRUE(Lncc(Stream::Cpu(), f.data(), w.data(), d, opt, &loss_cpu, grad_cpu.data()).ok());

    auto df = DeviceArray<float>::FromHost(f, stream);
    auto dw = DeviceArray<float>::FromHost(w, stream);
    auto dloss = DeviceArray<float>::Allocate(1, stream);
    auto dgrad = DeviceArray<float>::Allocate(d.size(), stream);
    dloss.Poison(kNaN);
    dgrad.Poison(kNaN);
    ASSERT_TRUE(Lncc(stream, df.data(), dw.data(), d, opt, dloss.data(), dgrad.data(), &ws).ok());
    const float loss_gpu = dloss.Download()[0];
    EXPECT_NEAR(loss_gpu, loss_cpu, 1e-5 * std::abs(loss_cpu));
    EXPECT_LT(RelL2(dgrad.Download(), grad_cpu), 1e-4);

    // Loss only (no intermediates) and gradient only, without a workspace.
    dloss.Poison(kNaN);
    ASSERT_TRUE(Lncc(stream, df.data(), dw.data(), d, opt, dloss.data(), nullptr).ok());
    EXPECT_EQ(dloss.Download()[0], loss_gpu);
    dgrad.Poison(kNaN);
    ASSERT_TRUE(Lncc(stream, df.data(), dw.data(), d, opt, nullptr, dgrad.data()).ok());
    EXPECT_LT(RelL2(dgrad.Download(), grad_cpu), 1e-4);
  }
}

TEST(LnccCuda, IntermediateMemoryIsThreeVolumes) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto s = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(s.ok()) << s.status();
  const Stream& stream = *s;
  const Dims3 d{64, 64, 64};
  const auto f = RandomUniform<float>(d.size(), 0.0, 1.0, 1);
  auto df = DeviceArray<float>::FromHost(f, stream);
  auto dw = DeviceArray<float>::FromHost(f, stream);
  auto dloss = DeviceArray<float>::Allocate(1, stream);
  auto dgrad = DeviceArray<float>::Allocate(d.size(), stream);
  ASSERT_TRUE(stream.Synchronize().ok());
  auto tracker = std::make_shared<DeviceMemoryTracker>();
  {
    ScopedDeviceMemoryCharge charge(tracker);
    LnccOptions opt;
    ASSERT_TRUE(Lncc(stream, df.data(), dw.data(), d, opt, dloss.data(), dgrad.data()).ok());
  }
  EXPECT_EQ(tracker->current_bytes(), 0u);  // its scratch is freed
  const size_t extra = tracker->peak_bytes();
  const size_t volume = sizeof(float) * d.size();
  EXPECT_GE(extra, 3 * volume);
  EXPECT_LT(extra, 3 * volume + volume / 4);  // plus per-block partials
}

TEST(LnccCuda, RejectsOversizedWindow) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto s = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(s.ok()) << s.status();
  const Dims3 d{8, 8, 8};
  auto df = DeviceArray<float>::FromHost(std::vector<float>(d.size(), 1.0f), *s);
  auto dloss = DeviceArray<float>::Allocate(1, *s);
  LnccOptions opt;
  opt.window = kLnccMaxCudaWindow + 2;
  EXPECT_EQ(Lncc(*s, df.data(), df.data(), d, opt, dloss.data(), nullptr).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace registration
}  // namespace tessera
