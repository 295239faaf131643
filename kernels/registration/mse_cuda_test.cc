// CUDA-vs-CPU parity of MSE on random inputs (skipped without a GPU).
// Tolerances: loss relative 1e-6, gradient relative L2 1e-6.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/testing/gpu_test.h"
#include "kernels/registration/mse.h"
#include "kernels/registration/test_util.h"

namespace tessera {
namespace registration {
namespace {

using testing::DeviceArray;
using testing::RandomUniform;
using testing::RelL2;

TEST(MseCuda, MatchesCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream_or = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream_or.ok()) << stream_or.status();
  const Stream& stream = *stream_or;
  for (Dims3 d : {Dims3{37, 29, 23}, Dims3{128, 100, 90}}) {
    const auto f = RandomUniform<float>(d.size(), 0.0, 1.0, 7);
    const auto w = RandomUniform<float>(d.size(), 0.0, 1.0, 8);
    std::vector<float> grad_cpu(d.size());
    float loss_cpu = 0;
    ASSERT_TRUE(Mse(Stream::Cpu(), f.data(), w.data(), d, &loss_cpu, grad_cpu.data()).ok());

    auto df = DeviceArray<float>::FromHost(f, stream);
    auto dw = DeviceArray<float>::FromHost(w, stream);
    auto dgrad = DeviceArray<float>::Allocate(d.size(), stream);
    auto dloss = DeviceArray<float>::Allocate(1, stream);
    dgrad.Poison(testing::kNaN);
    dloss.Poison(testing::kNaN);
    ASSERT_TRUE(Mse(stream, df.data(), dw.data(), d, dloss.data(), dgrad.data()).ok());
    const float loss_gpu = dloss.Download()[0];
    EXPECT_NEAR(loss_gpu, loss_cpu, 1e-6 * std::abs(loss_cpu)) << DimsToString(d);
    EXPECT_LT(RelL2(dgrad.Download(), grad_cpu), 1e-6) << DimsToString(d);

    // Loss only, with a reused workspace.
    Workspace ws;
    dloss.Poison(testing::kNaN);
    ASSERT_TRUE(Mse(stream, df.data(), dw.data(), d, dloss.data(), nullptr, &ws).ok());
    EXPECT_NEAR(dloss.Download()[0], loss_cpu, 1e-6 * std::abs(loss_cpu));
  }
}

}  // namespace
}  // namespace registration
}  // namespace tessera
