// CUDA Toeplitz operator against the CPU one (same tolerance): float rel l2
// <= 1e-5 at tol 1e-6, double <= 1e-11 at 1e-12; 2-D and 3-D, batched.
#include <gtest/gtest.h>

#include "common/device.h"
#include "common/testing/device_array.h"
#include "common/testing/gpu_test.h"
#include "kernels/reconstruction/nufft/nufft_test_util.h"
#include "kernels/reconstruction/nufft/toeplitz.h"

namespace tessera {
namespace recon {
namespace nufft {
namespace {

using ::tessera::testing::DeviceArray;

template <typename T>
double CudaVsCpu(int dim, double tol) {
  const std::array<int64_t, 3> modes = dim == 2 ? std::array<int64_t, 3>{64, 40, 1} : std::array<int64_t, 3>{16, 20, 12};
  const int64_t m = 5000, nmodes = modes[0] * modes[1] * modes[2];
  const int nt = 3;
  const auto pts = testing::RandomPoints<T>(dim, m, 31);
  std::vector<T> w(m);
  for (int64_t j = 0; j < m; ++j) w[j] = static_cast<T>(0.5 + (j % 7) * 0.25);
  const auto f = testing::RandomComplex<T>(nmodes * nt, 32);
  ToeplitzOptions o;
  o.tolerance = tol;
  o.ntransforms = nt;
  const Stream cpu = Stream::Cpu();
  auto cop = ToeplitzOperator<T>::Create(cpu, modes, m, pts.x.data(), pts.y.data(), pts.zp(), w.data(), o);
  EXPECT_TRUE(cop.ok()) << cop.status();
  std::vector<std::complex<T>> cpu_out(nmodes * nt);
  EXPECT_TRUE((*cop)->Apply(f.data(), cpu_out.data()).ok());

  auto stream = Stream::Create(Backend::kCuda);
  EXPECT_TRUE(stream.ok());
  auto dx = DeviceArray<T>::FromHost(pts.x, *stream);
  auto dy = DeviceArray<T>::FromHost(pts.y, *stream);
  auto dz = DeviceArray<T>::FromHost(dim == 3 ? pts.z : std::vector<T>(1), *stream);
  auto dw = DeviceArray<T>::FromHost(w, *stream);
  auto gop = ToeplitzOperator<T>::Create(*stream, modes, m, dx.data(), dy.data(), dim == 3 ? dz.data() : nullptr,
                                         dw.data(), o);
  EXPECT_TRUE(gop.ok()) << gop.status();
  auto din = DeviceArray<std::complex<T>>::FromHost(f, *stream);
  auto dout = DeviceArray<std::complex<T>>::Allocate(nmodes * nt, *stream);
  dout.Poison(std::complex<T>(NAN, NAN));
  EXPECT_TRUE((*gop)->Apply(din.data(), dout.data()).ok());
  return testing::RelL2(dout.Download(), cpu_out);
}

TEST(ToeplitzCudaTest, MatchesCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  for (int dim : {2, 3}) {
    EXPECT_LE(CudaVsCpu<float>(dim, 1e-6), 1e-5) << dim;
    EXPECT_LE(CudaVsCpu<double>(dim, 1e-12), 1e-11) << dim;
  }
}

TEST(ToeplitzCudaTest, NonFiniteWeightIsNamed) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok());
  auto dx = DeviceArray<float>::FromHost({0.1f, 0.2f}, *stream);
  auto dw = DeviceArray<float>::FromHost({1.f, NAN}, *stream);
  auto op = ToeplitzOperator<float>::Create(*stream, {8, 8, 1}, 2, dx.data(), dx.data(), nullptr, dw.data());
  EXPECT_EQ(op.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(op.status().message().find("weights[1]"), std::string::npos) << op.status();
}

}  // namespace
}  // namespace nufft
}  // namespace recon
}  // namespace tessera
