#include "kernels/reconstruction/geometry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace tessera {
namespace recon {
namespace {

using ::testing::HasSubstr;

TEST(GeometryTest, CenteredVolumeHasMillimetreVoxelsAroundTheOrigin) {
  const VolumeGeometry v = CenteredVolume(4, 6, 2);
  EXPECT_DOUBLE_EQ(v.dx(), 1.0);
  EXPECT_DOUBLE_EQ(v.dy(), 1.0);
  EXPECT_DOUBLE_EQ(v.dz(), 1.0);
  const Vec3 c = v.VoxelCenter(0, 0, 0);
  EXPECT_DOUBLE_EQ(c.x, -1.5);
  EXPECT_DOUBLE_EQ(c.y, -2.5);
  EXPECT_DOUBLE_EQ(c.z, -0.5);
}

TEST(GeometryTest, FanBeamFollowsAstraVectorConversion) {
  const double a = 0.3;
  const ProjectionGeometry p = FanBeam2D({a}, 1.5, 8, 500, 300);
  ASSERT_EQ(p.num_views(), 1);
  EXPECT_NEAR(p.views[0].source_or_ray.x, std::sin(a) * 500, 1e-12);
  EXPECT_NEAR(p.views[0].source_or_ray.y, -std::cos(a) * 500, 1e-12);
  EXPECT_NEAR(p.views[0].det_center.x, -std::sin(a) * 300, 1e-12);
  EXPECT_NEAR(p.views[0].u.y, 1.5 * std::sin(a), 1e-12);
  // Pixel 0 of 8 is 3.5 steps left of the centre.
  const Vec3 px = p.PixelCenter(0, 0, 0);
  EXPECT_NEAR(px.x, -std::sin(a) * 300 - 3.5 * 1.5 * std::cos(a), 1e-9);
}

TEST(GeometryTest, ValidGeometriesPass) {
  CtGeometry g{CenteredVolume(64, 64), ParallelBeam2D(EvenAngles(90, M_PI), 1.0, 96)};
  EXPECT_TRUE(Validate(g).ok()) << Validate(g);
  g.projection = FanBeam2D(EvenAngles(90, 2 * M_PI), 1.0, 128, 400, 200);
  EXPECT_TRUE(Validate(g).ok()) << Validate(g);
  CtGeometry cone{CenteredVolume(32, 32, 16), ConeBeam(EvenAngles(60, 2 * M_PI), 1.0, 1.0, 24, 48, 300, 150)};
  EXPECT_TRUE(Validate(cone).ok()) << Validate(cone);
}

TEST(GeometryTest, ErrorsNameTheField) {
  CtGeometry g{CenteredVolume(64, 64), ParallelBeam2D(EvenAngles(90, M_PI), 1.0, 96)};
  g.volume.nx = 0;
  EXPECT_THAT(std::string(Validate(g).message()), HasSubstr("GridColCount"));
  g.volume = CenteredVolume(64, 64, 3);
  EXPECT_THAT(std::string(Validate(g).message()), HasSubstr("GridSliceCount 1"));
  g.volume = CenteredVolume(64, 64);
  g.volume.max_y = g.volume.min_y;
  EXPECT_THAT(std::string(Validate(g).message()), HasSubstr("WindowMinY"));
  g.volume = CenteredVolume(64, 64);
  g.projection.views[3].u = {0, 0, 0};
  EXPECT_THAT(std::string(Validate(g).message()), HasSubstr("row 3: detector step u is zero"));
  g.projection = FanBeam2D(EvenAngles(10, 2 * M_PI), 1.0, 128, 20, 200);  // source inside the volume
  EXPECT_THAT(std::string(Validate(g).message()), HasSubstr("DistanceOriginSource"));
  g.projection = ParallelBeam2D({0.0}, 1.0, 96);
  g.projection.views[0].source_or_ray.x = NAN;
  EXPECT_THAT(std::string(Validate(g).message()), HasSubstr("not finite"));
  g.projection = ParallelBeam2D({0.0}, 1.0, 96);
  g.projection.views[0].source_or_ray = g.projection.views[0].u;  // rays along the detector
  EXPECT_THAT(std::string(Validate(g).message()), HasSubstr("parallel to the detector"));
}

TEST(GeometryTest, PackViewsKeepsTwelveFloatsPerView) {
  const ProjectionGeometry p = ConeBeam(EvenAngles(3, 2 * M_PI), 1.0, 2.0, 4, 5, 300, 100);
  const std::vector<float> packed = PackViews(p);
  ASSERT_EQ(packed.size(), 3u * kFloatsPerView);
  EXPECT_FLOAT_EQ(packed[kFloatsPerView + 11], 2.0f);  // view 1, v.z
}

}  // namespace
}  // namespace recon
}  // namespace tessera
