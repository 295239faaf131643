// PlanFdkChunks: the issue's case within 20 GB, slabs when the volume does
// not fit, row windows that cover every sample, and the refusal.
#include "kernels/reconstruction/fbp/fdk_chunking.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kernels/reconstruction/fbp/fbp_setup.h"
#include "kernels/reconstruction/fbp/filter.h"

namespace tessera {
namespace recon {
namespace fbp {
namespace {

constexpr double kPi = 3.14159265358979323846;

CtGeometry Cone(int64_t n, int64_t views, int64_t det, double spacing, double dso, double dod) {
  CtGeometry g;
  g.volume = CenteredVolume(n, n, n);
  g.projection = ConeBeam(EvenAngles(views, 2 * kPi), spacing, spacing, det, det, dso, dod);
  return g;
}

FdkChunkInput InputOf(const CtGeometry& g, bool texture) {
  FdkChunkInput in;
  in.nx = g.volume.nx;
  in.ny = g.volume.ny;
  in.nz = g.volume.nz;
  in.views = g.projection.num_views();
  in.cols = in.input_cols = g.projection.det_cols;
  in.rows = g.projection.det_rows;
  in.padded = PaddedLength(in.cols);
  in.texture = texture;
  in.max_views_per_chunk = std::min<int64_t>(in.views, (65536 + in.rows - 1) / in.rows);
  return in;
}

// The issue's criterion: 1024^3 from 1440 views of 1536^2 within 20 GB.
TEST(FdkChunkingTest, IssueCaseFitsTwentyGigabytesInOneSlab) {
  const CtGeometry g = Cone(1024, 1440, 1536, 1.0, 1000, 500);
  auto setup = MakeFbpSetup(g);
  ASSERT_TRUE(setup.ok()) << setup.status();
  const FdkChunkInput in = InputOf(g, /*texture=*/true);
  const int64_t budget = int64_t{20} * 1000 * 1000 * 1000;
  auto plan = PlanFdkChunks(in, setup->back, budget);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->slabs.size(), 1u);
  EXPECT_EQ(plan->window_rows, 1536);
  EXPECT_EQ(plan->views_per_chunk, in.max_views_per_chunk);
  EXPECT_LE(plan->device_bytes, budget);
  EXPECT_GT(plan->device_bytes, int64_t{4} << 30);  // at least the 4 GiB volume
  // The resident alternative (13.6 GB of projections + 4 GiB volume + scratch) would not fit.
  EXPECT_GT(int64_t{1440} * 1536 * 1536 * 4 + plan->device_bytes, budget);
}

TEST(FdkChunkingTest, SmallBudgetSplitsTheVolumeIntoSlabsWithRowWindows) {
  const CtGeometry g = Cone(1024, 1440, 1536, 1.0, 1000, 500);
  auto setup = MakeFbpSetup(g);
  ASSERT_TRUE(setup.ok()) << setup.status();
  const FdkChunkInput in = InputOf(g, /*texture=*/true);
  const int64_t budget = int64_t{3} << 30;  // less than the volume
  auto plan = PlanFdkChunks(in, setup->back, budget);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_GE(plan->slabs.size(), 2u);
  EXPECT_LT(plan->window_rows, 1536);
  EXPECT_LE(plan->device_bytes, budget);
  EXPECT_EQ(plan->slab_planes % kSlabPlaneMultiple, 0);
  int64_t next = 0;
  for (const FdkSlab& s : plan->slabs) {
    EXPECT_EQ(s.k0, next);
    EXPECT_EQ(s.k0 % kSlabPlaneMultiple, 0);
    EXPECT_GE(s.row0, 0);
    EXPECT_LE(s.row0 + plan->window_rows, 1536);
    next = s.k0 + s.nz;
  }
  EXPECT_EQ(next, 1024);
  EXPECT_NE(plan->Describe(in, budget).find("slabs"), std::string::npos);
}

// Every bilinear sample of every voxel of a slab, computed in float as the
// back projection does, reads rows inside its window (or off the detector).
TEST(FdkChunkingTest, RowWindowsCoverEverySample) {
  const CtGeometry g = Cone(24, 30, 40, 1.0, 60, 30);
  auto setup = MakeFbpSetup(g);
  ASSERT_TRUE(setup.ok()) << setup.status();
  FdkChunkInput in = InputOf(g, /*texture=*/false);
  in.fixed_allowance_bytes = 0;
  const int64_t budget = FdkDeviceBytes(in, 8, 40, 8);
  auto plan = PlanFdkChunks(in, setup->back, budget);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_GE(plan->slabs.size(), 2u);
  EXPECT_LT(plan->window_rows, 40);
  for (const FdkSlab& s : plan->slabs) {
    for (const BackprojectView& w : setup->back) {
      for (int64_t k = s.k0; k < s.k0 + s.nz; ++k) {
        for (int64_t j = 0; j < g.volume.ny; ++j) {
          for (int64_t i = 0; i < g.volume.nx; ++i) {
            const float fi = i, fj = j, fk = k;
            const float inv = 1.0f / (w.d[0] * fi + w.d[1] * fj + w.d[2] * fk + w.d[3]);
            const float b = (w.b[0] * fi + w.b[1] * fj + w.b[2] * fk + w.b[3]) * inv;
            if (!(b > -1.0f && b < 40.0f)) continue;  // off the detector: reads nothing
            const int64_t r = static_cast<int64_t>(std::floor(b));
            ASSERT_GE(std::max<int64_t>(r, 0), s.row0) << "plane " << k;
            ASSERT_LT(std::min<int64_t>(r + 1, 39), s.row0 + plan->window_rows) << "plane " << k;
          }
        }
      }
    }
  }
}

TEST(FdkChunkingTest, RefusesABudgetBelowOneSlabAndOneView) {
  const CtGeometry g = Cone(64, 90, 96, 1.0, 200, 100);
  auto setup = MakeFbpSetup(g);
  ASSERT_TRUE(setup.ok()) << setup.status();
  const FdkChunkInput in = InputOf(g, /*texture=*/true);
  auto plan = PlanFdkChunks(in, setup->back, int64_t{32} << 20);  // below the cuFFT allowance alone
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(plan.status().message().find("8 planes of 64 x 64 voxels"), absl::string_view::npos)
      << plan.status();
  EXPECT_EQ(PlanFdkChunks(in, setup->back, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fbp
}  // namespace recon
}  // namespace tessera
