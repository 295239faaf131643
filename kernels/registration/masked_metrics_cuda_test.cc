// Issue 34: the masked metrics on CUDA against the CPU reference (skipped
// without a GPU), random non-zero images and a random mask:
// - CombineMasks: the same mask and count exactly;
// - MSE: loss relative 1e-6, gradient relative L2 1e-6, 0 outside the mask;
// - LNCC (Lncc, LnccWithCoefficients, LnccHalfFixed): loss relative 1e-5,
//   gradient relative L2 1e-4 (the CUDA box sums are float; lncc_cuda_test's
//   tolerances), with the mixed kernel against its own (bf16) reference;
// - MI: loss within 1e-4, gradient within 2e-3 max|grad| (mutual_info.h);
// and "ignored nowhere" on the device: values changed where the mask is 0
// leave the loss and the in-mask gradient bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "common/testing/gpu_test.h"
#include "kernels/registration/lncc.h"
#include "kernels/registration/mse.h"
#include "kernels/registration/mutual_info.h"
#include "kernels/registration/test_util.h"
#include "kernels/registration/voxel_mask.h"

namespace tessera {
namespace registration {
namespace {

using testing::DeviceArray;
using testing::RandomUniform;
using testing::RelL2;

std::vector<uint8_t> RandomMask(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::bernoulli_distribution coin(0.6);
  std::vector<uint8_t> m(n);
  for (auto& v : m) v = coin(rng) ? 1 : 0;
  return m;
}

int64_t Count(const std::vector<uint8_t>& m) {
  int64_t c = 0;
  for (uint8_t v : m) c += v != 0;
  return c;
}

class MaskedMetricsCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    TESSERA_SKIP_WITHOUT_GPU();
    auto s = Stream::Create(Backend::kCuda);
    ASSERT_TRUE(s.ok()) << s.status();
    stream_ = std::make_unique<Stream>(*std::move(s));
  }
  std::unique_ptr<Stream> stream_;
};

TEST_F(MaskedMetricsCuda, CombineMasksMatchesCpu) {
  const int64_t n = 300007;
  const auto f = RandomMask(n, 1);
  std::vector<int32_t> m(n);
  for (int64_t v = 0; v < n; ++v) m[v] = (v * 7919) % 11 == 0 ? 0 : 3;
  std::vector<uint8_t> out_cpu(n);
  const int64_t count_cpu = cpu::CombineMasks(f.data(), m.data(), n, out_cpu.data());
  auto df = DeviceArray<uint8_t>::FromHost(f, *stream_);
  auto dm = DeviceArray<int32_t>::FromHost(m, *stream_);
  auto dout = DeviceArray<uint8_t>::Allocate(n, *stream_);
  dout.Poison(7);
  EXPECT_EQ(CombineMasks(*stream_, df.data(), dm.data(), n, dout.data()).value(), count_cpu);
  EXPECT_EQ(dout.Download(), out_cpu);
  EXPECT_EQ(CombineMasks(*stream_, nullptr, nullptr, n, dout.data()).value(), n);
}

TEST_F(MaskedMetricsCuda, MseMatchesCpu) {
  const Dims3 d{37, 29, 23};
  auto f = RandomUniform<float>(d.size(), 0.05, 1.0, 7), w = RandomUniform<float>(d.size(), 0.05, 1.0, 8);
  const auto m = RandomMask(d.size(), 9);
  const int64_t count = Count(m);
  std::vector<float> grad_cpu(d.size());
  float loss_cpu = 0;
  ASSERT_TRUE(Mse(Stream::Cpu(), f.data(), w.data(), d, &loss_cpu, grad_cpu.data(), nullptr, {m.data(), count}).ok());
  auto dm = DeviceArray<uint8_t>::FromHost(m, *stream_);
  auto df = DeviceArray<float>::FromHost(f, *stream_);
  auto dw = DeviceArray<float>::FromHost(w, *stream_);
  auto dgrad = DeviceArray<float>::Allocate(d.size(), *stream_);
  auto dloss = DeviceArray<float>::Allocate(1, *stream_);
  dgrad.Poison(testing::kNaN);
  ASSERT_TRUE(Mse(*stream_, df.data(), dw.data(), d, dloss.data(), dgrad.data(), nullptr, {dm.data(), count}).ok());
  EXPECT_NEAR(dloss.Download()[0], loss_cpu, 1e-6 * std::abs(loss_cpu));
  const auto g = dgrad.Download();
  EXPECT_LT(RelL2(g, grad_cpu), 1e-6);
  for (int64_t v = 0; v < d.size(); ++v) {
    if (!m[v]) {
      ASSERT_EQ(g[v], 0.f) << v;
    }
  }
  // Ignored nowhere.
  for (int64_t v = 0; v < d.size(); ++v) {
    if (!m[v]) f[v] = 5.f, w[v] = -3.f;
  }
  df.Upload(f);
  dw.Upload(w);
  const float loss1 = dloss.Download()[0];
  ASSERT_TRUE(Mse(*stream_, df.data(), dw.data(), d, dloss.data(), dgrad.data(), nullptr, {dm.data(), count}).ok());
  EXPECT_EQ(dloss.Download()[0], loss1);
  EXPECT_EQ(dgrad.Download(), g);
}

TEST_F(MaskedMetricsCuda, LnccMatchesCpu) {
  const Dims3 d{45, 37, 29};
  auto f = RandomUniform<float>(d.size(), 0.05, 1.0, 10), w = RandomUniform<float>(d.size(), 0.05, 1.0, 11);
  const auto m = RandomMask(d.size(), 12);
  const int64_t count = Count(m);
  LnccOptions o;
  o.window = 5;
  std::vector<float> grad_cpu(d.size());
  float loss_cpu = 0;
  ASSERT_TRUE(Lncc(Stream::Cpu(), f.data(), w.data(), d, o, &loss_cpu, grad_cpu.data(), nullptr, {m.data(), count}).ok());
  auto dm = DeviceArray<uint8_t>::FromHost(m, *stream_);
  auto df = DeviceArray<float>::FromHost(f, *stream_);
  auto dw = DeviceArray<float>::FromHost(w, *stream_);
  auto dgrad = DeviceArray<float>::Allocate(d.size(), *stream_);
  auto dloss = DeviceArray<float>::Allocate(1, *stream_);
  auto dcoef = DeviceArray<float>::Allocate(3 * d.size(), *stream_);
  dgrad.Poison(testing::kNaN);
  ASSERT_TRUE(Lncc(*stream_, df.data(), dw.data(), d, o, dloss.data(), dgrad.data(), nullptr, {dm.data(), count}).ok());
  EXPECT_NEAR(dloss.Download()[0], loss_cpu, 1e-5 * std::abs(loss_cpu));
  const auto g = dgrad.Download();
  EXPECT_LT(RelL2(g, grad_cpu), 1e-4);
  dgrad.Poison(testing::kNaN);
  ASSERT_TRUE(LnccWithCoefficients(*stream_, df.data(), dw.data(), d, o, dloss.data(), dgrad.data(), dcoef.data(),
                                   nullptr, {dm.data(), count}).ok());
  EXPECT_EQ(dgrad.Download(), g);
  // Mixed precision: fp16 fixed, bf16 coefficients, against its reference.
  std::vector<Half> fh(d.size());
  for (int64_t v = 0; v < d.size(); ++v) fh[v] = FromFloat<Half>(f[v]);
  std::vector<float> grad_half_cpu(d.size());
  float loss_half_cpu = 0;
  ASSERT_TRUE(LnccHalfFixed(Stream::Cpu(), fh.data(), w.data(), d, o, &loss_half_cpu, grad_half_cpu.data(), nullptr,
                            nullptr, {m.data(), count}).ok());
  auto dfh = DeviceArray<Half>::FromHost(fh, *stream_);
  auto dcoef16 = DeviceArray<BFloat16>::Allocate(3 * d.size(), *stream_);
  ASSERT_TRUE(LnccHalfFixed(*stream_, dfh.data(), dw.data(), d, o, dloss.data(), dgrad.data(), dcoef16.data(), nullptr,
                            {dm.data(), count}).ok());
  EXPECT_NEAR(dloss.Download()[0], loss_half_cpu, 1e-5 * std::abs(loss_half_cpu));
  EXPECT_LT(RelL2(dgrad.Download(), grad_half_cpu), 1e-3);
  // Ignored nowhere: voxels farther than r from every centre in the mask.
  // With a random mask every voxel is near one; use a box mask instead.
  std::vector<uint8_t> box(d.size(), 0);
  for (int64_t k = 8; k < 20; ++k)
    for (int64_t j = 8; j < 25; ++j)
      for (int64_t i = 8; i < 30; ++i) box[d.index(i, j, k)] = 1;
  dm.Upload(box);
  const VoxelMask bm{dm.data(), Count(box)};
  ASSERT_TRUE(Lncc(*stream_, df.data(), dw.data(), d, o, dloss.data(), dgrad.data(), nullptr, bm).ok());
  const float l1 = dloss.Download()[0];
  const auto g1 = dgrad.Download();
  for (int64_t k = 0; k < d.nz; ++k)
    for (int64_t j = 0; j < d.ny; ++j)
      for (int64_t i = 0; i < d.nx; ++i) {
        const bool near = i >= 6 && i < 32 && j >= 6 && j < 27 && k >= 6 && k < 22;
        if (!near) f[d.index(i, j, k)] = 4.f, w[d.index(i, j, k)] = 0.25f * (i % 3);
      }
  df.Upload(f);
  dw.Upload(w);
  ASSERT_TRUE(Lncc(*stream_, df.data(), dw.data(), d, o, dloss.data(), dgrad.data(), nullptr, bm).ok());
  EXPECT_EQ(dloss.Download()[0], l1);
  const auto g2 = dgrad.Download();
  for (int64_t v = 0; v < d.size(); ++v) {
    if (box[v]) {
      ASSERT_EQ(g1[v], g2[v]) << v;
    }
  }
}

TEST_F(MaskedMetricsCuda, MiMatchesCpu) {
  const Dims3 d{40, 33, 27};
  auto f = RandomUniform<float>(d.size(), 0.0, 1.0, 13), w = RandomUniform<float>(d.size(), 0.0, 1.0, 14);
  for (int64_t v = 0; v < d.size(); ++v) w[v] = 0.6f * f[v] + 0.4f * w[v];
  const auto m = RandomMask(d.size(), 15);
  const Shape shape = {d.nx, d.ny, d.nz};
  auto host = [&](const auto& v, DType t) {
    NDArray a = NDArray::Allocate(shape, t).value();
    std::memcpy(a.raw_data(), v.data(), a.nbytes());
    return a;
  };
  NDArray hf = host(f, DType::kFloat32), hw = host(w, DType::kFloat32), hm = host(m, DType::kUInt8);
  NDArray hg = NDArray::Allocate(shape, DType::kFloat32).value();
  MattesMiOptions o;
  const MattesMiResult r_cpu = MattesMutualInformation(hf, hw, &hm, o, &hg, Stream::Cpu()).value();
  auto dev = [&](const NDArray& a) { return a.CopyTo(MemoryKind::kDevice, *stream_, stream_->ordinal()).value(); };
  NDArray df = dev(hf), dw = dev(hw), dm = dev(hm), dg = dev(hg);
  const MattesMiResult r_gpu = MattesMutualInformation(df, dw, &dm, o, &dg, *stream_).value();
  EXPECT_NEAR(r_gpu.loss, r_cpu.loss, 1e-4 * std::max(1.0, std::abs(r_cpu.loss)));
  NDArray g = dg.CopyTo(MemoryKind::kHost, *stream_).value();
  ASSERT_TRUE(stream_->Synchronize().ok());
  double max_grad = 0;
  for (int64_t v = 0; v < d.size(); ++v) max_grad = std::max(max_grad, double(std::abs(hg.data<float>()[v])));
  for (int64_t v = 0; v < d.size(); ++v) {
    ASSERT_NEAR(g.data<float>()[v], hg.data<float>()[v], 2e-3 * max_grad) << v;
    if (!m[v]) {
      ASSERT_EQ(g.data<float>()[v], 0.f) << v;
    }
  }
}

}  // namespace
}  // namespace registration
}  // namespace tessera
