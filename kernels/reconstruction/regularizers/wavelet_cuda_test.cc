// CUDA wavelet against the CPU reference on random complex images: forward
// and inverse (2-D db2/db4, 3-D, shifted; a 1024-wide line exercises the
// block-stride loop) to 1e-6 relative l2, thresholding to 1e-6, and the prox
// with the same seed (the same shifts, 4 averaged per call) to 1e-5.
#include <gtest/gtest.h>

#include <complex>
#include <vector>

#include "common/testing/device_array.h"
#include "common/testing/gpu_test.h"
#include "kernels/reconstruction/regularizers/wavelet.h"

namespace tessera {
namespace recon {
namespace regularizers {
namespace {

using Complex = std::complex<float>;
using ::tessera::testing::DeviceArray;
using ::tessera::testing::RelL2;

std::vector<Complex> RandomComplex(size_t n, uint32_t seed) {
  const auto re = ::tessera::testing::RandomUniform<float>(n, -1, 1, seed);
  const auto im = ::tessera::testing::RandomUniform<float>(n, 0.1, 1, seed + 1);
  std::vector<Complex> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = Complex(re[i], im[i]);
  return v;
}

struct Case {
  WaveletShape shape;
  std::array<int64_t, 3> shift;
};

TEST(WaveletCuda, MatchesCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream_or = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream_or.ok()) << stream_or.status();
  const Stream& gpu = *stream_or;
  const Stream cpu = Stream::Cpu();
  const Case cases[] = {
      {{128, 128, 1, WaveletFilter::kDb2, 16}, {3, 5, 0}},
      {{96, 64, 1, WaveletFilter::kDb4, 16}, {1, 2, 0}},
      {{1024, 32, 1, WaveletFilter::kDb2, 16}, {17, 0, 0}},
      {{32, 48, 64, WaveletFilter::kDb4, 8}, {2, 3, 4}},
  };
  for (const Case& c : cases) {
    const WaveletShape& s = c.shape;
    SCOPED_TRACE(::testing::Message() << s.nx << "x" << s.ny << "x" << s.nz);
    const size_t n = s.nx * s.ny * s.nz;
    const auto x = RandomComplex(n, 11);
    std::vector<Complex> w_cpu(n), back_cpu(n);
    ASSERT_TRUE(WaveletForward(cpu, s, c.shift, x.data(), w_cpu.data()).ok());
    auto d_x = DeviceArray<Complex>::FromHost(x, gpu);
    auto d_w = DeviceArray<Complex>::Allocate(n, gpu);
    ASSERT_TRUE(WaveletForward(gpu, s, c.shift, d_x.data(), d_w.data()).ok());
    EXPECT_LT(RelL2(d_w.Download(), w_cpu), 1e-6);

    ASSERT_TRUE(SoftThresholdDetails(cpu, s, 0.3f, w_cpu.data()).ok());
    ASSERT_TRUE(SoftThresholdDetails(gpu, s, 0.3f, d_w.data()).ok());
    EXPECT_LT(RelL2(d_w.Download(), w_cpu), 1e-6);

    ASSERT_TRUE(WaveletInverse(cpu, s, c.shift, w_cpu.data(), back_cpu.data()).ok());
    auto d_back = DeviceArray<Complex>::Allocate(n, gpu);
    ASSERT_TRUE(WaveletInverse(gpu, s, c.shift, d_w.data(), d_back.data()).ok());
    EXPECT_LT(RelL2(d_back.Download(), back_cpu), 1e-6);
  }
}

TEST(WaveletCuda, ProxMatchesCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream_or = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream_or.ok()) << stream_or.status();
  const Stream& gpu = *stream_or;
  const Stream cpu = Stream::Cpu();
  const WaveletShape shape{128, 96, 1, WaveletFilter::kDb2, 16};
  auto cpu_prox = WaveletProx::Create(cpu, shape, 42, true, 4);  // 4 shifts averaged per call
  auto gpu_prox = WaveletProx::Create(gpu, shape, 42, true, 4);
  ASSERT_TRUE(cpu_prox.ok() && gpu_prox.ok());
  auto x = RandomComplex(128 * 96, 12);
  auto d_x = DeviceArray<Complex>::FromHost(x, gpu);
  for (int k = 0; k < 5; ++k) {
    ASSERT_TRUE((*cpu_prox)->Apply(0.2f, x.data()).ok());
    ASSERT_TRUE((*gpu_prox)->Apply(0.2f, d_x.data()).ok());
  }
  EXPECT_LT(RelL2(d_x.Download(), x), 1e-5);
}

}  // namespace
}  // namespace regularizers
}  // namespace recon
}  // namespace tessera
