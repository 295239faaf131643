// The whole CS solve on CUDA against the CPU: 64^2 radial phantom, 16 spokes,
// 8 coils, 20 FISTA iterations with the same seed (the same wavelet shifts)
// and the same Lipschitz constant (so both take the same step): L1-wavelet
// and TV images within 2e-3 relative l2 (the NUFFT/FFT rounding of the two
// backends, carried through 20 iterations); data scales within 1e-4.
#include <gtest/gtest.h>

#include <complex>
#include <vector>

#include "common/testing/device_array.h"
#include "common/testing/gpu_test.h"
#include "kernels/reconstruction/mri/coil_maps.h"
#include "kernels/reconstruction/mri/cs_sense.h"
#include "kernels/reconstruction/mri/ellipse_phantom.h"
#include "kernels/reconstruction/mri/trajectory.h"

namespace tessera {
namespace recon {
namespace mri {
namespace {

using Complex = std::complex<float>;
using ::tessera::testing::DeviceArray;
using ::tessera::testing::RelL2;

TEST(CsSenseCuda, MatchesCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream_or = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream_or.ok()) << stream_or.status();
  const Stream& gpu = *stream_or;
  const Stream cpu = Stream::Cpu();
  const int64_t n = 64;
  const int coils = 8;
  const auto traj = *RadialTrajectory(n, 2 * n, 16, RadialOrdering::kGoldenAngle);
  const auto series = *BirdcageSeries({coils, 1.5}, 4);
  const auto maps = EvaluateCoilSeries(series, n, n);
  const auto kspace = *PhantomCoilKspace(SheppLogan(0.9), series, traj, n, n);

  auto d_kx = DeviceArray<float>::FromHost(traj.kx, gpu);
  auto d_ky = DeviceArray<float>::FromHost(traj.ky, gpu);
  auto d_maps = DeviceArray<Complex>::FromHost(maps, gpu);
  auto d_kspace = DeviceArray<Complex>::FromHost(kspace, gpu);
  const SenseGeometry host_g{n, n, coils, traj.size(), traj.kx.data(), traj.ky.data(), maps.data(), nullptr};
  const SenseGeometry dev_g{n, n, coils, traj.size(), d_kx.data(), d_ky.data(), d_maps.data(), nullptr};

  for (CsRegularizer r : {CsRegularizer::kL1Wavelet, CsRegularizer::kTv}) {
    SCOPED_TRACE(r == CsRegularizer::kTv ? "tv" : "l1-wavelet");
    CsSenseOptions options;
    options.regularizer = r;
    options.iterations = 20;
    options.seed = 9;
    std::vector<Complex> image(n * n);
    auto on_cpu = CsSense(cpu, host_g, kspace.data(), options, image.data());
    ASSERT_TRUE(on_cpu.ok()) << on_cpu.status();
    options.lipschitz = on_cpu->lipschitz;
    auto d_image = DeviceArray<Complex>::Allocate(n * n, gpu);
    d_image.Poison(Complex(NAN, NAN));
    auto on_gpu = CsSense(gpu, dev_g, d_kspace.data(), options, d_image.data());
    ASSERT_TRUE(on_gpu.ok()) << on_gpu.status();
    EXPECT_NEAR(on_gpu->data_scale / on_cpu->data_scale, 1.0, 1e-4);
    EXPECT_LT(RelL2(d_image.Download(), image), 2e-3);
  }
}

}  // namespace
}  // namespace mri
}  // namespace recon
}  // namespace tessera
