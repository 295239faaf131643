// CUDA FBP/FDK against the CPU reference on random sinograms (never zero),
// for parallel, fan and cone beams, both interpolation modes, batches with a
// short tail, volumes of every z-blocking (nz = 1, < 16, >= 16 and not a
// multiple of 8) and a tilted cone_vec detector (the general per-voxel
// path), Parker short scans and an offset detector (the per-column
// redundancy weights), and the derivative short-scan method
// (short_scan_derivative.h) on fan and cone short and full scans.
// Tolerances (relative L2 over the volume): filtered sinogram 2e-5;
// exact interpolation 1e-4 (FFT rounding differs); texture 5e-3 (the
// hardware's 8-bit interpolation weights). Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/device.h"
#include "common/testing/device_array.h"
#include "common/testing/gpu_test.h"
#include "kernels/reconstruction/fbp/analytic_phantom.h"
#include "kernels/reconstruction/fbp/fbp.h"

namespace tessera {
namespace recon {
namespace fbp {
namespace {

using ::tessera::testing::DeviceArray;
using ::tessera::testing::RandomUniform;
using ::tessera::testing::RelL2;

constexpr double kPi = 3.14159265358979323846;

struct Case {
  const char* name;
  CtGeometry geometry;
};

// A cone_vec geometry whose detector is rolled by 10 degrees about the
// central ray, so the detector column changes along z.
CtGeometry TiltedCone() {
  CtGeometry g{CenteredVolume(24, 20, 19), ConeBeam(EvenAngles(30, 2 * kPi), 1.5, 1.5, 28, 36, 120, 60)};
  const double c = std::cos(0.17), s = std::sin(0.17);
  for (ProjectionVectors& w : g.projection.views) {
    const Vec3 u = w.u, v = w.v;
    w.u = {c * u.x + s * v.x, c * u.y + s * v.y, c * u.z + s * v.z};
    w.v = {-s * u.x + c * v.x, -s * u.y + c * v.y, -s * u.z + c * v.z};
  }
  return g;
}

// A fan detector shifted by 9 of its 61 columns: full scan with Wang's
// offset-detector weights (redundancy_weights.h).
CtGeometry OffsetFan() {
  CtGeometry g{CenteredVolume(40, 36), FanBeam2D(EvenAngles(50, 2 * kPi), 1.3, 61, 150, 90)};
  for (ProjectionVectors& w : g.projection.views) {
    w.det_center = {w.det_center.x + 9 * w.u.x, w.det_center.y + 9 * w.u.y, 0};
  }
  return g;
}

std::vector<Case> Cases() {
  const double deg = kPi / 180;
  return {
      {"parallel", {CenteredVolume(40, 36), ParallelBeam2D(EvenAngles(45, kPi), 1.0, 57)}},
      {"fan", {CenteredVolume(40, 36), FanBeam2D(EvenAngles(50, 2 * kPi), 1.3, 61, 150, 90)}},
      {"cone nz=12", {CenteredVolume(24, 20, 12), ConeBeam(EvenAngles(30, 2 * kPi), 1.5, 1.5, 20, 33, 120, 60)}},
      {"cone nz=19", {CenteredVolume(24, 20, 19), ConeBeam(EvenAngles(30, 2 * kPi), 1.5, 1.5, 28, 33, 120, 60)}},
      {"cone tilted", TiltedCone()},
      // Parker short scans (column weights on the device) and an offset detector.
      {"fan short scan", {CenteredVolume(40, 36), FanBeam2D(EvenAngles(50, 230 * deg), 1.3, 61, 150, 90)}},
      {"cone short scan",
       {CenteredVolume(24, 20, 12), ConeBeam(EvenAngles(30, 240 * deg), 1.5, 1.5, 20, 33, 120, 60)}},
      {"fan offset detector", OffsetFan()},
  };
}

struct Outputs {
  std::vector<float> volume, filtered;
};

Outputs RunOn(const CtGeometry& g, const Stream& stream, const FbpOptions& options, const std::vector<float>& sino) {
  Outputs out;
  auto plan = FbpPlan::Create(g, stream, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return out;
  if (stream.backend() == Backend::kCpu) {
    out.volume.assign(g.volume.size(), 0.0f);
    out.filtered.assign(sino.size(), 0.0f);
    EXPECT_TRUE((*plan)->Run(sino.data(), out.volume.data()).ok());
    EXPECT_TRUE((*plan)->Filter(sino.data(), out.filtered.data()).ok());
    return out;
  }
  auto d_sino = DeviceArray<float>::FromHost(sino, stream);
  auto d_vol = DeviceArray<float>::Allocate(g.volume.size(), stream);
  auto d_filt = DeviceArray<float>::Allocate(sino.size(), stream);
  d_vol.Poison(::tessera::testing::kNaN);
  d_filt.Poison(::tessera::testing::kNaN);
  EXPECT_TRUE((*plan)->Run(d_sino.data(), d_vol.data()).ok());
  EXPECT_TRUE((*plan)->Filter(d_sino.data(), d_filt.data()).ok());
  out.volume = d_vol.Download();
  out.filtered = d_filt.Download();
  return out;
}

TEST(FbpCudaTest, MatchesCpuOnRandomSinograms) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok());
  const Stream cpu = Stream::Cpu();
  uint32_t seed = 1;
  for (const Case& c : Cases()) {
    const std::vector<float> sino = RandomUniform<float>(c.geometry.projection.sinogram_size(), 0.5, 2.0, seed++);
    FbpOptions options;
    options.filter = FilterKind::kSheppLogan;
    options.cutoff = 0.9;
    options.views_per_batch = 7;  // views % 7 != 0: the tail plans run too
    const Outputs ref = RunOn(c.geometry, cpu, options, sino);
    for (FbpInterpolation interp : {FbpInterpolation::kExact, FbpInterpolation::kTexture}) {
      options.interpolation = interp;
      const Outputs gpu = RunOn(c.geometry, *stream, options, sino);
      EXPECT_LT(RelL2(gpu.filtered, ref.filtered), 2e-5) << c.name << " " << FbpInterpolationName(interp);
      const double tol = interp == FbpInterpolation::kExact ? 1e-4 : 5e-3;
      EXPECT_LT(RelL2(gpu.volume, ref.volume), tol) << c.name << " " << FbpInterpolationName(interp);
    }
  }
}

// ShortScanMethod::kDerivative: the derivative and two-filter rows, the
// weights after the filter and the 1 / D back projection, against the CPU,
// at the tolerances above (the filtered rows: 2e-5 of their L2 norm).
TEST(FbpCudaTest, DerivativeShortScanMatchesCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok());
  const Stream cpu = Stream::Cpu();
  const double deg = kPi / 180;
  const std::vector<Case> cases = {
      {"fan short scan", {CenteredVolume(40, 36), FanBeam2D(EvenAngles(50, 230 * deg), 1.3, 61, 150, 90)}},
      {"fan full scan", {CenteredVolume(40, 36), FanBeam2D(EvenAngles(50, 2 * kPi), 1.3, 61, 150, 90)}},
      {"cone short scan", {CenteredVolume(24, 20, 12), ConeBeam(EvenAngles(30, 240 * deg), 1.5, 1.5, 20, 33, 120, 60)}},
      {"cone nz=19 full", {CenteredVolume(24, 20, 19), ConeBeam(EvenAngles(30, 2 * kPi), 1.5, 1.5, 28, 33, 120, 60)}},
  };
  uint32_t seed = 50;
  for (const Case& c : cases) {
    const std::vector<float> sino = RandomUniform<float>(c.geometry.projection.sinogram_size(), 0.5, 2.0, seed++);
    FbpOptions options;
    options.short_scan = ShortScanMethod::kDerivative;
    options.filter = FilterKind::kSheppLogan;
    options.cutoff = 0.9;
    options.views_per_batch = 7;  // the tail plans run too; neighbours cross batches
    const Outputs ref = RunOn(c.geometry, cpu, options, sino);
    for (FbpInterpolation interp : {FbpInterpolation::kExact, FbpInterpolation::kTexture}) {
      options.interpolation = interp;
      const Outputs gpu = RunOn(c.geometry, *stream, options, sino);
      EXPECT_LT(RelL2(gpu.filtered, ref.filtered), 2e-5) << c.name << " " << FbpInterpolationName(interp);
      const double tol = interp == FbpInterpolation::kExact ? 1e-4 : 5e-3;
      EXPECT_LT(RelL2(gpu.volume, ref.volume), tol) << c.name << " " << FbpInterpolationName(interp);
    }
  }
}

// Default batching (one batch here), both modes, twice: bit-identical.
TEST(FbpCudaTest, DeterministicRunToRun) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok());
  const CtGeometry g = Cases()[3].geometry;
  const std::vector<float> sino = RandomUniform<float>(g.projection.sinogram_size(), 0.5, 2.0, 99);
  for (ExecutionMode mode : {ExecutionMode::kDefault, ExecutionMode::kDeterministic}) {
    FbpOptions options;
    options.mode = mode;
    const Outputs a = RunOn(g, *stream, options, sino), b = RunOn(g, *stream, options, sino);
    EXPECT_EQ(a.volume, b.volume) << ExecutionModeName(mode);
  }
}

// FDK on the GPU (texture path) meets the CPU test's accuracy on an analytic sphere.
TEST(FbpCudaTest, ConeBeamAccuracyOnAnalyticData) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok());
  const std::vector<testing::Ellipsoid> phantom = {{{0, 0, 0}, {24, 24, 24}, 0, 1.0}};
  const CtGeometry g{CenteredVolume(64, 64, 64), ConeBeam(EvenAngles(180, 2 * kPi), 1.5, 1.5, 80, 80, 150, 75)};
  const std::vector<float> sino = testing::AnalyticSinogram(g.projection, phantom);
  const Outputs out = RunOn(g, *stream, FbpOptions{}, sino);
  const std::vector<float> truth = testing::PhantomVolume(g.volume, {{{0, 0, 0}, {21, 21, 21}, 0, 1.0}});
  std::vector<bool> mask(truth.size());
  for (size_t i = 0; i < truth.size(); ++i) mask[i] = truth[i] > 0;
  EXPECT_LT(testing::MaskedRmse(out.volume, std::vector<float>(truth.size(), 1.0f), mask), 0.015);
}

}  // namespace
}  // namespace fbp
}  // namespace recon
}  // namespace tessera
