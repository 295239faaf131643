// FbpPlan::RunOutOfCore on CUDA (pinned uploads on a second stream, z-slabs
// with detector row windows) against the resident CUDA Run with the same views
// per batch and against the CPU's RunOutOfCore, on random sinograms with a
// budget forcing several slabs and chunks. Tolerances against the resident
// CUDA run, max difference over the peak: exact interpolation 1e-6 (the same
// sums, b - row0 exact; only cuFFT plans of another batch count may round
// differently: the test prints whether it was bit-identical), texture 1e-3
// (the texture unit's 8-bit fraction of a coordinate that may round
// differently); against the CPU as fbp_cuda_test (1e-4 exact, 5e-3 texture,
// relative L2).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "common/device.h"
#include "common/testing/device_array.h"
#include "common/testing/gpu_test.h"
#include "kernels/reconstruction/fbp/fbp.h"
#include "kernels/reconstruction/fbp/fdk_chunking.h"
#include "kernels/reconstruction/fbp/filter.h"

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

std::vector<Case> Cases() {
  CtGeometry full, short_scan;
  full.volume = short_scan.volume = CenteredVolume(40, 36, 48);
  full.projection = ConeBeam(EvenAngles(60, 2 * kPi), 1.0, 1.0, 64, 64, 150, 75);
  short_scan.projection = ConeBeam(EvenAngles(48, kPi + 0.9), 1.0, 1.0, 64, 64, 150, 75);
  return {{"full scan", full}, {"short scan", short_scan}};
}

// The CUDA model's bytes for slabs of 16 planes and 8 views per chunk.
int64_t Budget(const CtGeometry& g, bool texture) {
  FdkChunkInput in;
  in.nx = g.volume.nx;
  in.ny = g.volume.ny;
  in.nz = g.volume.nz;
  in.views = g.projection.num_views();
  in.cols = in.input_cols = g.projection.det_cols;
  in.rows = g.projection.det_rows;
  in.padded = PaddedLength(in.cols);
  in.column_weights = true;
  in.texture = texture;
  return FdkDeviceBytes(in, 16, in.rows, 8);
}

TEST(FdkOutOfCoreCudaTest, MatchesResidentCudaAndCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok()) << stream.status();
  const Stream cpu = Stream::Cpu();
  for (const Case& c : Cases()) {
    const CtGeometry& g = c.geometry;
    const std::vector<float> sino = RandomUniform<float>(g.projection.sinogram_size(), 0.5, 1.5, 11);
    for (FbpInterpolation interp : {FbpInterpolation::kExact, FbpInterpolation::kTexture}) {
      SCOPED_TRACE(std::string(c.name) + " " + FbpInterpolationName(interp));
      FbpOptions options;
      options.filter = FilterKind::kSheppLogan;
      options.interpolation = interp;
      options.device_memory_bytes = Budget(g, interp == FbpInterpolation::kTexture);
      auto ooc = FbpPlan::Create(g, *stream, options);
      ASSERT_TRUE(ooc.ok()) << ooc.status();
      const FdkChunking& chunking = (*ooc)->chunking();
      EXPECT_GE(chunking.slabs.size(), 2u);
      EXPECT_LT(chunking.views_per_chunk, g.projection.num_views());
      EXPECT_LT(chunking.window_rows, g.projection.det_rows);
      std::vector<float> streamed(g.volume.size(), ::tessera::testing::kNaN);
      ASSERT_TRUE((*ooc)->RunOutOfCore(sino.data(), streamed.data()).ok());

      FbpOptions resident_options = options;
      resident_options.device_memory_bytes = 0;
      resident_options.views_per_batch = chunking.views_per_chunk;
      auto resident = FbpPlan::Create(g, *stream, resident_options);
      ASSERT_TRUE(resident.ok()) << resident.status();
      auto d_sino = DeviceArray<float>::FromHost(sino, *stream);
      auto d_vol = DeviceArray<float>::Allocate(g.volume.size(), *stream);
      d_vol.Poison(::tessera::testing::kNaN);
      ASSERT_TRUE((*resident)->Run(d_sino.data(), d_vol.data()).ok());
      const std::vector<float> expected = d_vol.Download();
      float peak = 0, worst = 0;
      for (size_t i = 0; i < expected.size(); ++i) {
        peak = std::max(peak, std::fabs(expected[i]));
        worst = std::max(worst, std::fabs(expected[i] - streamed[i]));
      }
      std::printf("%s %s: %zu slabs, %lld views per chunk, rows %lld of %lld; max |streamed - resident| = %.3g "
                  "(%.3g of the peak)%s\n",
                  c.name, FbpInterpolationName(interp), chunking.slabs.size(),
                  static_cast<long long>(chunking.views_per_chunk), static_cast<long long>(chunking.window_rows),
                  static_cast<long long>(g.projection.det_rows), worst, worst / peak,
                  streamed == expected ? ", bit-identical" : "");
      EXPECT_GT(peak, 0.0f);
      EXPECT_LE(worst, (interp == FbpInterpolation::kExact ? 1e-6f : 1e-3f) * peak);

      FbpOptions cpu_options = options;  // the CPU model has no texture or cuFFT allowance: its own chunking
      auto cpu_plan = FbpPlan::Create(g, cpu, cpu_options);
      ASSERT_TRUE(cpu_plan.ok()) << cpu_plan.status();
      std::vector<float> reference(g.volume.size());
      ASSERT_TRUE((*cpu_plan)->RunOutOfCore(sino.data(), reference.data()).ok());
      EXPECT_LT(RelL2(streamed, reference), interp == FbpInterpolation::kExact ? 1e-4 : 5e-3);
    }
  }
}

TEST(FdkOutOfCoreCudaTest, TinyBudgetIsResourceExhausted) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok()) << stream.status();
  const CtGeometry g = Cases()[0].geometry;
  FbpOptions options;
  options.device_memory_bytes = int64_t{16} << 20;  // below the cuFFT allowance
  auto plan = FbpPlan::Create(g, *stream, options);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted) << plan.status();
}

}  // namespace
}  // namespace fbp
}  // namespace recon
}  // namespace tessera
