// 3-D MRI on CUDA against the CPU reference (issue 36), random non-zero
// inputs except where a phantom is needed to make CG meaningful:
//   - CenteredFft (cuFFT + shift passes) vs FFTW: 1e-5 relative l2;
//   - CartesianSenseOperator Forward / Adjoint / Normal: 1e-5; 3-D Cartesian
//     CG-SENSE 10 iterations: 1e-3;
//   - the 3-D NUFFT SenseOperator Forward / Adjoint (tolerance 1e-6): 1e-4;
//   - ReconstructNonCartesian3D, both paths (stack of stars, kooshball),
//     adjoint 1e-4 and CG-SENSE 8 iterations 2e-2 (cg_sense_cuda_test's bound:
//     CG amplifies the operators' rounding differences).
#include <gtest/gtest.h>

#include <complex>
#include <vector>

#include "common/testing/device_array.h"
#include "common/testing/gpu_test.h"
#include "kernels/reconstruction/mri/cartesian_operator.h"
#include "kernels/reconstruction/mri/cg_sense.h"
#include "kernels/reconstruction/mri/ellipsoid_phantom.h"
#include "kernels/reconstruction/mri/noncartesian_3d.h"
#include "kernels/reconstruction/mri/trajectory.h"

namespace tessera {
namespace recon {
namespace mri {
namespace {

using Complex = std::complex<float>;
using ::tessera::testing::DeviceArray;
using ::tessera::testing::RelL2;

std::vector<Complex> RandomComplex(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<Complex> v(n);
  for (auto& x : v) x = Complex(dist(rng), dist(rng));
  return v;
}

TEST(Mri3dCuda, CenteredFftMatchesCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok());
  for (const std::array<int64_t, 3> dims : {std::array<int64_t, 3>{24, 20, 15}, std::array<int64_t, 3>{33, 16, 1}}) {
    const int64_t n = dims[0] * dims[1] * dims[2];
    const auto x = RandomComplex(3 * n, 1);
    for (int sign : {-1, +1}) {
      const Stream cpu = Stream::Cpu();
      auto cpu_fft = CenteredFft::Create(cpu, dims, 3);
      auto gpu_fft = CenteredFft::Create(*stream, dims, 3);
      ASSERT_TRUE(cpu_fft.ok() && gpu_fft.ok());
      std::vector<Complex> want = x;
      ASSERT_TRUE((*cpu_fft)->Execute(want.data(), sign).ok());
      auto d = DeviceArray<Complex>::FromHost(x, *stream);
      ASSERT_TRUE((*gpu_fft)->Execute(d.data(), sign).ok());
      EXPECT_LT(RelL2(d.Download(), want), 1e-5) << dims[0] << "x" << dims[1] << "x" << dims[2] << " sign " << sign;
    }
  }
}

TEST(Mri3dCuda, CartesianOperatorAndCgSenseMatchCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok());
  const int64_t nx = 24, ny = 20, nz = 16, npix = nx * ny * nz;
  const int coils = 4;
  const auto maps = RandomComplex(coils * npix, 2);
  const auto x = RandomComplex(npix, 3);
  const auto y = RandomComplex(coils * npix, 4);
  std::vector<float> mask(npix);
  std::mt19937 rng(5);
  for (auto& m : mask) m = rng() % 3 == 0 ? 0.f : 1.f;
  auto d_maps = DeviceArray<Complex>::FromHost(maps, *stream);
  auto d_mask = DeviceArray<float>::FromHost(mask, *stream);
  auto d_x = DeviceArray<Complex>::FromHost(x, *stream);
  auto d_y = DeviceArray<Complex>::FromHost(y, *stream);
  const Stream cpu = Stream::Cpu();
  auto cpu_op = CartesianSenseOperator::Create(cpu, {nx, ny, nz, coils, maps.data(), mask.data()});
  auto gpu_op = CartesianSenseOperator::Create(*stream, {nx, ny, nz, coils, d_maps.data(), d_mask.data()});
  ASSERT_TRUE(cpu_op.ok() && gpu_op.ok());
  std::vector<Complex> k(coils * npix), img(npix), normal(npix);
  auto d_k = DeviceArray<Complex>::Allocate(coils * npix, *stream);
  auto d_img = DeviceArray<Complex>::Allocate(npix, *stream);
  ASSERT_TRUE((*cpu_op)->Forward(x.data(), k.data()).ok());
  ASSERT_TRUE((*gpu_op)->Forward(d_x.data(), d_k.data()).ok());
  EXPECT_LT(RelL2(d_k.Download(), k), 1e-5);
  ASSERT_TRUE((*cpu_op)->Adjoint(y.data(), img.data()).ok());
  ASSERT_TRUE((*gpu_op)->Adjoint(d_y.data(), d_img.data()).ok());
  EXPECT_LT(RelL2(d_img.Download(), img), 1e-5);
  ASSERT_TRUE((*cpu_op)->Normal(x.data(), normal.data()).ok());
  ASSERT_TRUE((*gpu_op)->Normal(d_x.data(), d_img.data()).ok());
  EXPECT_LT(RelL2(d_img.Download(), normal), 1e-5);

  CgSenseOptions options;
  options.iterations = 10;
  options.lambda = 1e-3;
  ASSERT_TRUE(CgSense(cpu, **cpu_op, y.data(), options, img.data()).ok());
  d_img.Poison(Complex(NAN, NAN));
  ASSERT_TRUE(CgSense(*stream, **gpu_op, d_y.data(), options, d_img.data()).ok());
  EXPECT_LT(RelL2(d_img.Download(), img), 1e-3);
}

TEST(Mri3dCuda, NufftOperatorMatchesCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok());
  const int64_t n = 24, npix = n * n * n;
  const int coils = 4;
  const Trajectory3D t = *KooshballTrajectory(n, 2 * n, 300);
  const int64_t m = t.size();
  const auto maps = RandomComplex(coils * npix, 6);
  const auto x = RandomComplex(npix, 7);
  const auto y = RandomComplex(coils * m, 8);
  auto d_kx = DeviceArray<float>::FromHost(t.kx, *stream);
  auto d_ky = DeviceArray<float>::FromHost(t.ky, *stream);
  auto d_kz = DeviceArray<float>::FromHost(t.kz, *stream);
  auto d_maps = DeviceArray<Complex>::FromHost(maps, *stream);
  auto d_x = DeviceArray<Complex>::FromHost(x, *stream);
  auto d_y = DeviceArray<Complex>::FromHost(y, *stream);
  SenseOperatorOptions precise;
  precise.nufft_tolerance = 1e-6;
  for (bool toeplitz : {false, true}) {
    precise.use_toeplitz = toeplitz;
    const Stream cpu = Stream::Cpu();
    auto cpu_op = SenseOperator::Create(
        cpu, {n, n, coils, m, t.kx.data(), t.ky.data(), maps.data(), nullptr, n, t.kz.data()}, precise);
    auto gpu_op = SenseOperator::Create(
        *stream, {n, n, coils, m, d_kx.data(), d_ky.data(), d_maps.data(), nullptr, n, d_kz.data()}, precise);
    ASSERT_TRUE(cpu_op.ok() && gpu_op.ok());
    std::vector<Complex> k(coils * m), img(npix);
    auto d_k = DeviceArray<Complex>::Allocate(coils * m, *stream);
    auto d_img = DeviceArray<Complex>::Allocate(npix, *stream);
    ASSERT_TRUE((*cpu_op)->Forward(x.data(), k.data()).ok());
    ASSERT_TRUE((*gpu_op)->Forward(d_x.data(), d_k.data()).ok());
    EXPECT_LT(RelL2(d_k.Download(), k), 1e-4);
    ASSERT_TRUE((*cpu_op)->Adjoint(y.data(), img.data()).ok());
    ASSERT_TRUE((*gpu_op)->Adjoint(d_y.data(), d_img.data()).ok());
    EXPECT_LT(RelL2(d_img.Download(), img), 1e-4);
    ASSERT_TRUE((*cpu_op)->Normal(x.data(), img.data()).ok());
    ASSERT_TRUE((*gpu_op)->Normal(d_x.data(), d_img.data()).ok());
    EXPECT_LT(RelL2(d_img.Download(), img), 1e-4) << "toeplitz " << toeplitz;
  }
}

TEST(Mri3dCuda, BothPathsMatchCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok());
  const int64_t n = 24;
  const int coils = 4;
  const auto series = *SmoothCoilSeries3D(coils, 1);
  const auto maps = EvaluateCoilSeries3D(series, n, n, n);
  const auto phantom = SheppLogan3D(0.9);
  for (bool stack : {true, false}) {
    const Trajectory3D t = stack ? *StackOfStarsTrajectory(n, n, 2 * n, 40, RadialOrdering::kGoldenAngle)
                                 : *KooshballTrajectory(n, 2 * n, 600);
    const auto kspace = *PhantomCoilKspace3D(phantom, series, t.size(), t.kx.data(), t.ky.data(), t.kz.data(), n, n, n);
    const NonCartesian3D problem{n, n, n, coils, t.size(), t.kx.data(), t.ky.data(), t.kz.data(), kspace.data(),
                                 maps.data(), nullptr};
    for (bool adjoint : {true, false}) {
      Recon3DOptions options;
      options.adjoint_only = adjoint;
      options.cg.iterations = 8;
      options.cg.lambda = 1e-3;
      options.cg.use_toeplitz = true;
      options.cg.nufft.nufft_tolerance = 1e-6;
      std::vector<Complex> cpu_image(n * n * n), gpu_image(n * n * n, Complex(NAN, NAN));
      auto a = ReconstructNonCartesian3D(Stream::Cpu(), problem, options, cpu_image.data());
      auto b = ReconstructNonCartesian3D(*stream, problem, options, gpu_image.data());
      ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
      EXPECT_EQ(a->path, stack ? Path3D::kStackOfStars : Path3D::kNufft3D);
      EXPECT_EQ(a->path, b->path);
      EXPECT_LT(RelL2(gpu_image, cpu_image), adjoint ? 1e-4 : 2e-2) << Path3DName(a->path) << " adjoint " << adjoint;
    }
  }
}

}  // namespace
}  // namespace mri
}  // namespace recon
}  // namespace tessera
