// LnccWithCoefficients (the lean pipeline's LNCC: coefficient volumes in
// caller memory, gradient written over the warped image): CPU in place equals
// the out-of-place reference exactly; CUDA in place with caller coefficients
// matches the CPU reference on random inputs (loss relative 1e-5, gradient
// relative L2 1e-4, as lncc_cuda_test) and leaves the coefficient volumes
// filled (they really are where a, b, c live).
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

TEST(LnccWithCoefficientsCpu, InPlaceEqualsOutOfPlace) {
  const Dims3 d{23, 19, 17};
  const auto f = RandomUniform<float>(d.size(), 0.0, 1.0, 3);
  auto w = RandomUniform<float>(d.size(), 0.0, 1.0, 4);
  for (size_t v = 0; v < w.size(); ++v) w[v] = 0.5f * w[v] + 0.5f * f[v];
  LnccOptions opt;
  float loss_ref = 0, loss = 0;
  std::vector<float> grad_ref(d.size());
  ASSERT_TRUE(Lncc(Stream::Cpu(), f.data(), w.data(), d, opt, &loss_ref, grad_ref.data()).ok());
  std::vector<float> work = w, coefficients(3 * d.size());
  ASSERT_TRUE(LnccWithCoefficients(Stream::Cpu(), f.data(), work.data(), d, opt, &loss, work.data(),
                                   coefficients.data())
                  .ok());
  EXPECT_EQ(loss, loss_ref);
  EXPECT_EQ(work, grad_ref);
  EXPECT_EQ(LnccWithCoefficients(Stream::Cpu(), f.data(), work.data(), d, opt, &loss, work.data(), nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LnccWithCoefficientsCuda, InPlaceMatchesCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  Stream stream = Stream::Create(Backend::kCuda).value();
  LnccWorkspace ws;
  uint32_t seed = 40;
  for (auto [d, window] : {std::pair<Dims3, int>{{37, 29, 23}, 7}, {{64, 50, 40}, 3}, {{70, 9, 1}, 5}}) {
    SCOPED_TRACE(DimsToString(d));
    const auto f = RandomUniform<float>(d.size(), 0.0, 1.0, ++seed);
    auto w = RandomUniform<float>(d.size(), 0.0, 1.0, ++seed);
    for (size_t v = 0; v < w.size(); ++v) w[v] = 0.5f * w[v] + 0.5f * f[v];
    LnccOptions opt;
    opt.window = window;
    float loss_cpu = 0;
    std::vector<float> grad_cpu(d.size());
    ASSERT_TRUE(Lncc(Stream::Cpu(), f.data(), w.data(), d, opt, &loss_cpu, grad_cpu.data()).ok());
    auto df = DeviceArray<float>::FromHost(f, stream);
    auto dwork = DeviceArray<float>::FromHost(w, stream);
    auto dloss = DeviceArray<float>::Allocate(1, stream);
    auto dcoef = DeviceArray<float>::Allocate(3 * d.size(), stream);
    dloss.Poison(kNaN);
    dcoef.Poison(kNaN);
    ASSERT_TRUE(LnccWithCoefficients(stream, df.data(), dwork.data(), d, opt, dloss.data(), dwork.data(),
                                     dcoef.data(), &ws)
                    .ok());
    EXPECT_NEAR(dloss.Download()[0], loss_cpu, 1e-5 * std::abs(loss_cpu));
    EXPECT_LT(RelL2(dwork.Download(), grad_cpu), 1e-4);
    int nan = 0;
    for (float x : dcoef.Download()) nan += std::isnan(x);
    EXPECT_EQ(nan, 0) << "a, b, c were not written to the caller's volumes";
  }
}

}  // namespace
}  // namespace registration
}  // namespace tessera
