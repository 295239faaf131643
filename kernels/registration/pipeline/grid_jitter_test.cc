#include "kernels/registration/pipeline/grid_jitter.h"

#include <cmath>

#include "gtest/gtest.h"

namespace tessera::registration {
namespace {

// Shifts stay within half a voxel, the grid keeps its extent, and a seed and
// level give one sequence (CPU and CUDA runs sample the same grids).
TEST(GridJitter, ShiftsWithinHalfAVoxelAndRepeatable) {
  GridJitter a(1, 2, 11, 21, 5), b(1, 2, 11, 21, 5), other_level(1, 3, 11, 21, 5);
  const double spacing[3] = {2.0 / 10, 2.0 / 20, 2.0 / 4};
  double lo[3], hi[3], lo_b[3], hi_b[3], lo_o[3], hi_o[3];
  double mean[3] = {0, 0, 0};
  int differs = 0;
  const int n = 2000;
  for (int i = 0; i < n; ++i) {
    a.Next(lo, hi);
    b.Next(lo_b, hi_b);
    other_level.Next(lo_o, hi_o);
    for (int d = 0; d < 3; ++d) {
      const double shift_voxels = (lo[d] + 1.0) / spacing[d];
      EXPECT_GE(shift_voxels, -0.5);
      EXPECT_LT(shift_voxels, 0.5);
      EXPECT_NEAR(hi[d] - lo[d], 2.0, 1e-12);
      EXPECT_EQ(lo[d], lo_b[d]);
      EXPECT_EQ(hi[d], hi_b[d]);
      differs += lo[d] != lo_o[d];
      mean[d] += shift_voxels / n;
    }
  }
  EXPECT_GT(differs, 3 * n - 10);
  // Uniform on [-1/2, 1/2): mean 0 (sd of the mean 0.0065 at n = 2000).
  for (double m : mean) EXPECT_LT(std::abs(m), 0.03);
}

// A single-voxel axis has no extent to shift along.
TEST(GridJitter, FlatAxisStaysPut) {
  GridJitter j(7, 0, 1, 8, 8);
  double lo[3], hi[3];
  j.Next(lo, hi);
  EXPECT_EQ(lo[0], -1.0);
  EXPECT_EQ(hi[0], 1.0);
}

}  // namespace
}  // namespace tessera::registration
