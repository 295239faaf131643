#include "services/reconstruction/formats/example_geometry.h"

#include <cmath>

#include "gtest/gtest.h"
#include "services/reconstruction/formats/geometry_json.h"
#include "services/reconstruction/phantoms/analytic_sinogram.h"
#include "services/reconstruction/phantoms/phantom.h"

namespace tessera::recon::formats {
namespace {

// Every view sees the whole volume: rays through the outermost detector
// columns miss the volume's bounding circle (a cylinder along z in 3-D), the
// central ray hits it.
void ExpectVolumeSeenWhole(const CtGeometry& g) {
  const VolumeGeometry& v = g.volume;
  const double radius = 0.5 * std::hypot(v.max_x - v.min_x, v.max_y - v.min_y);
  phantoms::Phantom ball = phantoms::Disc(radius, 1.0, g.projection.is_2d);
  if (!g.projection.is_2d) ball.ellipsoids[0].semi_axes.z = 1e6;
  const ProjectionGeometry& p = g.projection;
  for (int64_t view = 0; view < p.num_views(); view += 7) {
    Vec3 o, d;
    const double mid_row = 0.5 * (p.det_rows - 1), mid_col = 0.5 * (p.det_cols - 1);
    phantoms::DetectorRay(p, view, mid_col, mid_row, &o, &d);
    EXPECT_GT(phantoms::LineIntegral(ball, o, d), 0);
    for (double col : {0.0, static_cast<double>(p.det_cols - 1)}) {
      phantoms::DetectorRay(p, view, col, mid_row, &o, &d);
      EXPECT_EQ(phantoms::LineIntegral(ball, o, d), 0) << "view " << view << " col " << col;
    }
    if (!p.is_2d) {
      // Rows: the central column's outermost rays clear the top and bottom
      // faces where those are nearest the source (the rays diverge from z = 0).
      const ProjectionVectors& w = p.views[view];
      const double dso = std::hypot(w.source_or_ray.x, w.source_or_ray.y);
      const double dsd = std::hypot(w.det_center.x - w.source_or_ray.x, w.det_center.y - w.source_or_ray.y);
      const double z_edge = std::fabs(p.PixelCenter(view, mid_col, 0).z);
      EXPECT_GE(z_edge * (dso - radius) / dsd, 0.5 * (v.max_z - v.min_z)) << "view " << view;
    }
  }
}

TEST(ExampleGeometryTest, EachTypeParsesAndCoversTheVolume) {
  for (const char* type : {"parallel", "fanflat", "cone"}) {
    absl::StatusOr<std::string> json = ExampleGeometryJson(type, 32);
    ASSERT_TRUE(json.ok()) << json.status();
    absl::StatusOr<CtGeometry> g = ParseGeometryJson(*json);
    ASSERT_TRUE(g.ok()) << type << ": " << g.status() << "\n" << *json;
    EXPECT_EQ(g->volume.nx, 32);
    EXPECT_EQ(g->volume.nz, std::string(type) == "cone" ? 32 : 1);
    EXPECT_EQ(g->projection.num_views(), std::string(type) == "parallel" ? 51 : 101);  // ceil(pi/2 N), ceil(pi N)
    ExpectVolumeSeenWhole(*g);
  }
  absl::StatusOr<std::string> few = ExampleGeometryJson("fanflat", 16, 9);
  ASSERT_TRUE(few.ok());
  EXPECT_EQ(ParseGeometryJson(*few)->projection.num_views(), 9);
}

TEST(ExampleGeometryTest, RefusesBadRequests) {
  EXPECT_EQ(ExampleGeometryJson("helical", 32).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ExampleGeometryJson("cone", 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ExampleGeometryJson("cone", 32, 200000).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::recon::formats
