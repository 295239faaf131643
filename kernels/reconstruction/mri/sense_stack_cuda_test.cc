// The CUDA stack (one operator on the stream, slices in order, maps switched)
// against the CPU stack on slices whose phantoms and coil maps differ:
// CG-SENSE (Toeplitz, 8 iterations, NUFFT tolerance 1e-6) per slice within
// 2e-2 relative l2 (the bound of cg_sense_cuda_test: CG amplifies the
// operators' rounding differences), the adjoint within 1e-4.
#include <gtest/gtest.h>

#include <complex>
#include <vector>

#include "common/testing/device_array.h"
#include "common/testing/gpu_test.h"
#include "kernels/reconstruction/mri/coil_maps.h"
#include "kernels/reconstruction/mri/density_compensation.h"
#include "kernels/reconstruction/mri/ellipse_phantom.h"
#include "kernels/reconstruction/mri/sense_stack.h"
#include "kernels/reconstruction/mri/trajectory.h"

namespace tessera {
namespace recon {
namespace mri {
namespace {

using Complex = std::complex<float>;
using ::tessera::testing::DeviceArray;
using ::tessera::testing::RelL2;

constexpr int64_t kN = 64;
constexpr int kCoils = 4;
constexpr int64_t kSlices = 4;

TEST(SenseStackCuda, SlicesMatchCpuStack) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok());
  const Trajectory2D t = *RadialTrajectory(kN, 2 * kN, 45, RadialOrdering::kGoldenAngle);
  const std::vector<float> density = *PipeMenonDensity(t);
  std::vector<Complex> maps, kspace;
  for (int64_t s = 0; s < kSlices; ++s) {
    const auto series = *BirdcageSeries({kCoils, 1.3 + 0.2 * s}, 4);
    const auto m = EvaluateCoilSeries(series, kN, kN);
    maps.insert(maps.end(), m.begin(), m.end());
    const auto k = *PhantomCoilKspace(SheppLogan(0.5 + 0.1 * s), series, t, kN, kN);
    kspace.insert(kspace.end(), k.begin(), k.end());
  }
  auto d_kx = DeviceArray<float>::FromHost(t.kx, *stream);
  auto d_ky = DeviceArray<float>::FromHost(t.ky, *stream);
  auto d_density = DeviceArray<float>::FromHost(density, *stream);
  auto d_maps = DeviceArray<Complex>::FromHost(maps, *stream);
  auto d_kspace = DeviceArray<Complex>::FromHost(kspace, *stream);
  const SenseStack cpu_stack{{kN, kN, kCoils, t.size(), t.kx.data(), t.ky.data(), maps.data(), density.data()},
                             kSlices, 1};
  const SenseStack gpu_stack{{kN, kN, kCoils, t.size(), d_kx.data(), d_ky.data(), d_maps.data(), d_density.data()},
                             kSlices, 1};
  const size_t pixels = kSlices * kN * kN;

  CgSenseOptions options;
  options.iterations = 8;
  options.lambda = 1e-4;
  options.nufft.nufft_tolerance = 1e-6;
  options.use_toeplitz = true;
  std::vector<Complex> cpu_images(pixels);
  ASSERT_TRUE(CgSenseStack(Stream::Cpu(), cpu_stack, kspace.data(), options, cpu_images.data()).ok());
  auto d_images = DeviceArray<Complex>::Allocate(pixels, *stream);
  d_images.Poison(Complex(NAN, NAN));
  auto result = CgSenseStack(*stream, gpu_stack, d_kspace.data(), options, d_images.data());
  ASSERT_TRUE(result.ok()) << result.status();
  const std::vector<Complex> gpu_images = d_images.Download();
  for (int64_t s = 0; s < kSlices; ++s) {
    const auto at = [&](const std::vector<Complex>& v) {
      return std::vector<Complex>(v.begin() + s * kN * kN, v.begin() + (s + 1) * kN * kN);
    };
    EXPECT_LT(RelL2(at(gpu_images), at(cpu_images)), 2e-2) << "slice " << s;
  }

  ASSERT_TRUE(AdjointSenseStack(Stream::Cpu(), cpu_stack, kspace.data(), options.nufft, cpu_images.data()).ok());
  d_images.Poison(Complex(NAN, NAN));
  ASSERT_TRUE(AdjointSenseStack(*stream, gpu_stack, d_kspace.data(), options.nufft, d_images.data()).ok());
  EXPECT_LT(RelL2(d_images.Download(), cpu_images), 1e-4);
}

}  // namespace
}  // namespace mri
}  // namespace recon
}  // namespace tessera
