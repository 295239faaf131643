// FbpPlan::RunOutOfCore on the CPU backend with budgets small enough to force
// several chunks and slabs: bit-identical to the resident Run with the same
// views per batch, for a full scan, a short scan (Parker weights) and an
// offset detector; the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/reconstruction/fbp/fbp.h"
#include "kernels/reconstruction/fbp/fbp_setup.h"
#include "kernels/reconstruction/fbp/fdk_chunking.h"
#include "kernels/reconstruction/fbp/filter.h"

namespace tessera {
namespace recon {
namespace fbp {
namespace {

constexpr double kPi = 3.14159265358979323846;

CtGeometry Cone(double range, int64_t views, double det_shift = 0) {
  CtGeometry g;
  g.volume = CenteredVolume(32, 32, 32);
  g.projection = ConeBeam(EvenAngles(views, range), 1.0, 1.0, /*rows=*/48, /*cols=*/48, 120, 60);
  for (ProjectionVectors& v : g.projection.views) {
    v.det_center.x += det_shift * v.u.x;
    v.det_center.y += det_shift * v.u.y;
  }
  return g;
}

std::vector<float> RandomSinogram(const CtGeometry& g) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(0.5f, 1.5f);
  std::vector<float> s(g.projection.sinogram_size());
  for (float& x : s) x = u(rng);
  return s;
}

// The CPU model's bytes for slabs of 8 planes and 8 views per chunk: forces
// several slabs of a 32^3 volume.
int64_t SmallBudget(const CtGeometry& g) {
  FdkChunkInput in;
  in.nx = g.volume.nx;
  in.ny = g.volume.ny;
  in.nz = g.volume.nz;
  in.views = g.projection.num_views();
  in.cols = in.input_cols = g.projection.det_cols;
  in.rows = g.projection.det_rows;
  in.padded = PaddedLength(in.cols);
  in.column_weights = true;
  in.texture = false;
  in.fixed_allowance_bytes = 0;
  return FdkDeviceBytes(in, 8, in.rows, 8);
}

void ExpectOutOfCoreMatchesResident(const CtGeometry& g) {
  const Stream cpu = Stream::Cpu();
  const std::vector<float> sino = RandomSinogram(g);
  FbpOptions ooc_options;
  ooc_options.filter = FilterKind::kHann;
  ooc_options.device_memory_bytes = SmallBudget(g);
  auto ooc = FbpPlan::Create(g, cpu, ooc_options);
  ASSERT_TRUE(ooc.ok()) << ooc.status();
  const FdkChunking& c = (*ooc)->chunking();
  EXPECT_GE(c.slabs.size(), 2u);
  EXPECT_LT(c.views_per_chunk, g.projection.num_views());
  EXPECT_LT(c.window_rows, g.projection.det_rows);

  std::vector<float> streamed(g.volume.size(), -1.0f);
  int64_t last_done = 0, last_total = 0;
  ASSERT_TRUE((*ooc)
                  ->RunOutOfCore(sino.data(), streamed.data(),
                                 [&](int64_t done, int64_t total) {
                                   last_done = done;
                                   last_total = total;
                                   return absl::OkStatus();
                                 })
                  .ok());
  EXPECT_EQ(last_total, g.projection.num_views() * static_cast<int64_t>(c.slabs.size()));
  EXPECT_EQ(last_done, last_total);

  FbpOptions resident_options = ooc_options;
  resident_options.device_memory_bytes = 0;
  resident_options.views_per_batch = c.views_per_chunk;
  std::vector<float> resident(g.volume.size(), -2.0f);
  auto plan = FbpPlan::Create(g, cpu, resident_options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE((*plan)->Run(sino.data(), resident.data()).ok());
  EXPECT_EQ(std::memcmp(streamed.data(), resident.data(), sizeof(float) * resident.size()), 0)
      << (*ooc)->chunking().Describe({}, ooc_options.device_memory_bytes);

  // Against the default batching only the order of the float sums differs.
  resident_options.views_per_batch = 0;
  auto default_plan = FbpPlan::Create(g, cpu, resident_options);
  ASSERT_TRUE(default_plan.ok());
  ASSERT_TRUE((*default_plan)->Run(sino.data(), resident.data()).ok());
  float peak = 0, worst = 0;
  for (size_t i = 0; i < resident.size(); ++i) {
    peak = std::max(peak, std::fabs(resident[i]));
    worst = std::max(worst, std::fabs(resident[i] - streamed[i]));
  }
  EXPECT_LE(worst, 1e-5f * peak);
  EXPECT_GT(peak, 0.0f);
}

TEST(FdkOutOfCoreTest, FullScanMatchesResidentBitForBit) { ExpectOutOfCoreMatchesResident(Cone(2 * kPi, 40)); }

TEST(FdkOutOfCoreTest, ShortScanMatchesResidentBitForBit) {
  ExpectOutOfCoreMatchesResident(Cone(kPi + 0.8, 30));
}

TEST(FdkOutOfCoreTest, OffsetDetectorMatchesResidentBitForBit) {
  ExpectOutOfCoreMatchesResident(Cone(2 * kPi, 40, /*det_shift=*/10));
}

TEST(FdkOutOfCoreTest, WindowedPlanRefusesResidentRunAndTinyBudget) {
  const CtGeometry g = Cone(2 * kPi, 40);
  const Stream cpu = Stream::Cpu();
  FbpOptions options;
  options.device_memory_bytes = SmallBudget(g);
  auto plan = FbpPlan::Create(g, cpu, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<float> sino = RandomSinogram(g), vol(g.volume.size());
  EXPECT_EQ((*plan)->Run(sino.data(), vol.data()).code(), absl::StatusCode::kFailedPrecondition);

  options.device_memory_bytes = 1024;
  auto tiny = FbpPlan::Create(g, cpu, options);
  ASSERT_FALSE(tiny.ok());
  EXPECT_EQ(tiny.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(tiny.status().message().find("32 x 32 voxels"), absl::string_view::npos) << tiny.status();
}

// A resident plan runs out of core as one slab of every row.
TEST(FdkOutOfCoreTest, ResidentPlanRunsOutOfCoreAsOneSlab) {
  const CtGeometry g = Cone(2 * kPi, 40);
  const Stream cpu = Stream::Cpu();
  auto plan = FbpPlan::Create(g, cpu, {});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ((*plan)->chunking().slabs.size(), 1u);
  const std::vector<float> sino = RandomSinogram(g);
  std::vector<float> a(g.volume.size()), b(g.volume.size());
  ASSERT_TRUE((*plan)->Run(sino.data(), a.data()).ok());
  ASSERT_TRUE((*plan)->RunOutOfCore(sino.data(), b.data()).ok());
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace fbp
}  // namespace recon
}  // namespace tessera
