// CUDA against the CPU reference on random (non-zero) inputs: the coil
// operations to 1e-6 (relative l2); the SENSE normal operator E^H W E
// (density-weighted) to 1e-4 and the adjoint to 1e-4 (both NUFFTs at
// tolerance 1e-6), also through the Toeplitz embedding; CG-SENSE images
// after 8 iterations on a radial phantom within 2e-2 of each other (NUFFT
// pair and Toeplitz; CG amplifies the operators' rounding differences).
#include <gtest/gtest.h>

#include <complex>
#include <vector>

#include "common/testing/device_array.h"
#include "common/testing/gpu_test.h"
#include "kernels/reconstruction/mri/cg_sense.h"
#include "kernels/reconstruction/mri/coil_maps.h"
#include "kernels/reconstruction/mri/coil_ops.h"
#include "kernels/reconstruction/mri/density_compensation.h"
#include "kernels/reconstruction/mri/ellipse_phantom.h"
#include "kernels/reconstruction/mri/trajectory.h"

namespace tessera {
namespace recon {
namespace mri {
namespace {

using Complex = std::complex<float>;
using ::tessera::testing::DeviceArray;

std::vector<Complex> RandomComplex(size_t n, uint32_t seed) {
  const auto re = ::tessera::testing::RandomUniform<float>(n, -1, 1, seed);
  const auto im = ::tessera::testing::RandomUniform<float>(n, 0.1, 1, seed + 1);
  std::vector<Complex> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = Complex(re[i], im[i]);
  return v;
}

using ::tessera::testing::RelL2;

TEST(CoilOpsCuda, MatchCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok());
  const int coils = 7;
  const int64_t npix = 3001, m = 2049;
  const auto maps = RandomComplex(coils * npix, 1), x = RandomComplex(npix, 3), in = RandomComplex(coils * npix, 5);
  const auto samples = RandomComplex(coils * m, 7);
  const auto w = ::tessera::testing::RandomUniform<float>(m, 0.1, 2, 9);
  std::vector<Complex> expanded(coils * npix), combined(npix), weighted = samples;
  cpu::ExpandCoils(coils, npix, maps.data(), x.data(), expanded.data());
  cpu::CombineCoils(coils, npix, maps.data(), in.data(), combined.data());
  cpu::WeightSamples(coils, m, w.data(), weighted.data());

  auto d_maps = DeviceArray<Complex>::FromHost(maps, *stream);
  auto d_x = DeviceArray<Complex>::FromHost(x, *stream);
  auto d_in = DeviceArray<Complex>::FromHost(in, *stream);
  auto d_samples = DeviceArray<Complex>::FromHost(samples, *stream);
  auto d_w = DeviceArray<float>::FromHost(w, *stream);
  auto d_expanded = DeviceArray<Complex>::Allocate(expanded.size(), *stream);
  auto d_combined = DeviceArray<Complex>::Allocate(combined.size(), *stream);
  d_expanded.Poison(Complex(NAN, NAN));
  d_combined.Poison(Complex(NAN, NAN));
  ASSERT_TRUE(ExpandCoils(*stream, coils, npix, d_maps.data(), d_x.data(), d_expanded.data()).ok());
  ASSERT_TRUE(CombineCoils(*stream, coils, npix, d_maps.data(), d_in.data(), d_combined.data()).ok());
  ASSERT_TRUE(WeightSamples(*stream, coils, m, d_w.data(), d_samples.data()).ok());
  EXPECT_LT(RelL2(d_expanded.Download(), expanded), 1e-6);
  EXPECT_LT(RelL2(d_combined.Download(), combined), 1e-6);
  EXPECT_LT(RelL2(d_samples.Download(), weighted), 1e-6);
}

struct Radial {
  int64_t n = 96;
  int coils = 8;
  Trajectory2D trajectory;
  std::vector<Complex> maps, kspace;
  std::vector<float> ramp;
};

Radial MakeRadial() {
  Radial r;
  r.trajectory = *RadialTrajectory(r.n, 2 * r.n, 60, RadialOrdering::kGoldenAngle);
  const auto series = *BirdcageSeries({r.coils, 1.5}, 3);
  r.maps = EvaluateCoilSeries(series, r.n, r.n);
  r.kspace = *PhantomCoilKspace(SheppLogan(0.9), series, r.trajectory, r.n, r.n);
  r.ramp = *RadialRampDensity(r.trajectory);
  return r;
}

TEST(CgSenseCuda, OperatorAndSolveMatchCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok());
  const Radial r = MakeRadial();
  const int64_t npix = r.n * r.n, m = r.trajectory.size();
  auto d_kx = DeviceArray<float>::FromHost(r.trajectory.kx, *stream);
  auto d_ky = DeviceArray<float>::FromHost(r.trajectory.ky, *stream);
  auto d_maps = DeviceArray<Complex>::FromHost(r.maps, *stream);
  auto d_ramp = DeviceArray<float>::FromHost(r.ramp, *stream);
  auto d_kspace = DeviceArray<Complex>::FromHost(r.kspace, *stream);
  const SenseGeometry cpu_geometry{r.n, r.n, r.coils, m, r.trajectory.kx.data(), r.trajectory.ky.data(),
                                   r.maps.data(), r.ramp.data()};
  const SenseGeometry gpu_geometry{r.n, r.n, r.coils, m, d_kx.data(), d_ky.data(), d_maps.data(), d_ramp.data()};
  SenseOperatorOptions precise;
  precise.nufft_tolerance = 1e-6;

  const Stream cpu = Stream::Cpu();
  auto cpu_op = SenseOperator::Create(cpu, cpu_geometry, precise);
  auto gpu_op = SenseOperator::Create(*stream, gpu_geometry, precise);
  ASSERT_TRUE(cpu_op.ok() && gpu_op.ok()) << gpu_op.status();
  const auto x = RandomComplex(npix, 11);
  std::vector<Complex> normal(npix), adjoint(npix);
  ASSERT_TRUE((*cpu_op)->Normal(x.data(), normal.data()).ok());
  ASSERT_TRUE((*cpu_op)->Adjoint(r.kspace.data(), adjoint.data()).ok());
  auto d_x = DeviceArray<Complex>::FromHost(x, *stream);
  auto d_out = DeviceArray<Complex>::Allocate(npix, *stream);
  d_out.Poison(Complex(NAN, NAN));
  ASSERT_TRUE((*gpu_op)->Normal(d_x.data(), d_out.data()).ok());
  EXPECT_LT(RelL2(d_out.Download(), normal), 1e-4);
  ASSERT_TRUE((*gpu_op)->Adjoint(d_kspace.data(), d_out.data()).ok());
  EXPECT_LT(RelL2(d_out.Download(), adjoint), 1e-4);

  for (bool toeplitz : {false, true}) {
    CgSenseOptions options;
    options.iterations = 8;
    options.lambda = 1e-4;
    options.nufft = precise;
    options.use_toeplitz = toeplitz;
    std::vector<Complex> image(npix);
    ASSERT_TRUE(CgSense(cpu, cpu_geometry, r.kspace.data(), options, image.data()).ok());
    auto d_image = DeviceArray<Complex>::Allocate(npix, *stream);
    d_image.Poison(Complex(NAN, NAN));
    auto result = CgSense(*stream, gpu_geometry, d_kspace.data(), options, d_image.data());
    ASSERT_TRUE(result.ok()) << result.status();
    // CG amplifies operator differences of ~1e-5 along poorly sampled
    // directions (60 spokes for 96 x 96); the CPU's Toeplitz and NUFFT-pair
    // iterates differ by ~1 % for the same reason (cg_sense_test).
    EXPECT_LT(RelL2(d_image.Download(), image), 2e-2) << "toeplitz " << toeplitz;
  }
}

// The Toeplitz normal operator on the GPU against the CPU's (random image).
TEST(CgSenseCuda, ToeplitzNormalMatchesCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok());
  const Radial r = MakeRadial();
  const int64_t npix = r.n * r.n, m = r.trajectory.size();
  auto d_kx = DeviceArray<float>::FromHost(r.trajectory.kx, *stream);
  auto d_ky = DeviceArray<float>::FromHost(r.trajectory.ky, *stream);
  auto d_maps = DeviceArray<Complex>::FromHost(r.maps, *stream);
  auto d_ramp = DeviceArray<float>::FromHost(r.ramp, *stream);
  SenseOperatorOptions options;
  options.nufft_tolerance = 1e-6;
  options.use_toeplitz = true;
  const Stream cpu = Stream::Cpu();  // the operator keeps a reference to it
  auto cpu_op = SenseOperator::Create(cpu, {r.n, r.n, r.coils, m, r.trajectory.kx.data(), r.trajectory.ky.data(),
                                            r.maps.data(), r.ramp.data()}, options);
  auto gpu_op = SenseOperator::Create(*stream, {r.n, r.n, r.coils, m, d_kx.data(), d_ky.data(), d_maps.data(),
                                                d_ramp.data()}, options);
  ASSERT_TRUE(cpu_op.ok() && gpu_op.ok()) << gpu_op.status();
  const auto x = RandomComplex(npix, 13);
  std::vector<Complex> normal(npix);
  ASSERT_TRUE((*cpu_op)->Normal(x.data(), normal.data()).ok());
  auto d_x = DeviceArray<Complex>::FromHost(x, *stream);
  auto d_out = DeviceArray<Complex>::Allocate(npix, *stream);
  d_out.Poison(Complex(NAN, NAN));
  ASSERT_TRUE((*gpu_op)->Normal(d_x.data(), d_out.data()).ok());
  EXPECT_LT(RelL2(d_out.Download(), normal), 1e-4);
}

}  // namespace
}  // namespace mri
}  // namespace recon
}  // namespace tessera
