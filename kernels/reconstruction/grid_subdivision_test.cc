// CPU semantics of the reconstruction-grid subdivision: the finer geometry
// keeps the field of view (and the 2-D slice), bad factors and grids beyond
// the voxel limit are refused naming ct.voxel_subdivision, and the block
// average is the mean of each block (checked against a direct sum, and as
// the inverse of block repetition).
#include "kernels/reconstruction/grid_subdivision.h"

#include <gtest/gtest.h>

#include <vector>

#include "common/testing/device_array.h"

namespace tessera {
namespace recon {
namespace {

CtGeometry Parallel2D(int64_t n) { return CtGeometry{CenteredVolume(n, n), ParallelBeam2D(EvenAngles(6, 3.14159), 1.0, n + 4)}; }

TEST(GridSubdivisionTest, FinerGridKeepsTheFieldOfView) {
  const CtGeometry g = Parallel2D(10);
  absl::StatusOr<CtGeometry> f = SubdividedGeometry(g, 3);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->volume.nx, 30);
  EXPECT_EQ(f->volume.ny, 30);
  EXPECT_EQ(f->volume.nz, 1);  // a 2-D geometry keeps its one slice
  EXPECT_DOUBLE_EQ(f->volume.min_x, g.volume.min_x);
  EXPECT_DOUBLE_EQ(f->volume.max_y, g.volume.max_y);
  EXPECT_DOUBLE_EQ(f->volume.dx(), g.volume.dx() / 3);
  EXPECT_EQ(f->projection.det_cols, g.projection.det_cols);
  const BlockShape s = SubdivisionBlocks(g, 3);
  EXPECT_EQ(s.fine_size(), f->volume.size());
  EXPECT_EQ(s.fz, 1);
}

TEST(GridSubdivisionTest, ConeGeometriesAreSubdividedAlongZToo) {
  CtGeometry g{CenteredVolume(8, 6, 4), ConeBeam(EvenAngles(4, 6.28), 1.0, 1.0, 12, 10, 100, 50)};
  ASSERT_TRUE(Validate(g).ok());
  absl::StatusOr<CtGeometry> f = SubdividedGeometry(g, 2);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->volume.nz, 8);
  EXPECT_DOUBLE_EQ(f->volume.max_z, g.volume.max_z);
  EXPECT_EQ(SubdivisionBlocks(g, 2).fz, 2);
  EXPECT_EQ(SubdivisionBlocks(g, 2).fine_size(), f->volume.size());
}

TEST(GridSubdivisionTest, BadFactorsAndHugeGridsNameTheField) {
  const CtGeometry g = Parallel2D(10);
  for (int bad : {0, -1, 65}) {
    absl::StatusOr<CtGeometry> f = SubdividedGeometry(g, bad);
    ASSERT_FALSE(f.ok()) << bad;
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(f.status().message().find("ct.voxel_subdivision"), std::string::npos) << f.status();
  }
  // 2048^3 is within the voxel limit (2^34), 4096^3 is not.
  CtGeometry cone{CenteredVolume(2048, 2048, 2048), ConeBeam(EvenAngles(4, 6.28), 1.0, 1.0, 16, 16, 5000, 2000)};
  ASSERT_TRUE(Validate(cone).ok());
  absl::StatusOr<CtGeometry> f = SubdividedGeometry(cone, 2);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(f.status().message().find("4096x4096x4096"), std::string::npos) << f.status();
  EXPECT_NE(f.status().message().find("ct.voxel_subdivision 2"), std::string::npos) << f.status();
}

TEST(GridSubdivisionTest, BlockAverageIsTheMeanOfEachBlock) {
  const Stream cpu = Stream::Cpu();
  // 2 x 1 coarse voxels of 2 x 3 fine ones: rows of 4 fine voxels.
  const BlockShape s{2, 1, 1, 2, 3, 1};
  const std::vector<float> fine{1, 2, 10, 20,  //
                                3, 4, 30, 40,  //
                                5, 6, 50, 60};
  std::vector<float> out(2, -1);
  ASSERT_TRUE(BlockAverage(cpu, fine.data(), s, out.data()).ok());
  EXPECT_FLOAT_EQ(out[0], 3.5f);
  EXPECT_FLOAT_EQ(out[1], 35.0f);
  EXPECT_FALSE(BlockAverage(cpu, fine.data(), BlockShape{2, 1, 1, 0, 1, 1}, out.data()).ok());
}

TEST(GridSubdivisionTest, BlockAverageMatchesADirectSumAndInvertsRepetition) {
  const Stream cpu = Stream::Cpu();
  const BlockShape s{5, 4, 3, 2, 3, 2};
  const std::vector<float> fine = ::tessera::testing::RandomUniform<float>(s.fine_size(), -1, 2, 7);
  std::vector<float> out(s.coarse_size());
  ASSERT_TRUE(BlockAverage(cpu, fine.data(), s, out.data()).ok());
  const int64_t fnx = s.nx * s.fx, fny = s.ny * s.fy;
  std::vector<double> sums(s.coarse_size(), 0.0);
  for (int64_t z = 0; z < s.nz * s.fz; ++z) {
    for (int64_t y = 0; y < fny; ++y) {
      for (int64_t x = 0; x < fnx; ++x) {
        sums[((z / s.fz) * s.ny + y / s.fy) * s.nx + x / s.fx] += fine[(z * fny + y) * fnx + x];
      }
    }
  }
  for (int64_t v = 0; v < s.coarse_size(); ++v) EXPECT_NEAR(out[v], sums[v] / 12, 1e-6) << v;
  // Repeating each coarse voxel over its block and averaging gives it back.
  std::vector<float> repeated(s.fine_size());
  for (int64_t z = 0; z < s.nz * s.fz; ++z) {
    for (int64_t y = 0; y < fny; ++y) {
      for (int64_t x = 0; x < fnx; ++x) repeated[(z * fny + y) * fnx + x] = out[((z / s.fz) * s.ny + y / s.fy) * s.nx + x / s.fx];
    }
  }
  std::vector<float> back(s.coarse_size());
  ASSERT_TRUE(BlockAverage(cpu, repeated.data(), s, back.data()).ok());
  for (int64_t v = 0; v < s.coarse_size(); ++v) EXPECT_NEAR(back[v], out[v], 1e-6f * std::abs(out[v]) + 1e-7f) << v;
}

}  // namespace
}  // namespace recon
}  // namespace tessera
