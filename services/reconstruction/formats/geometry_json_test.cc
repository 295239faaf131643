#include "services/reconstruction/formats/geometry_json.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::recon::formats {
namespace {

using ::testing::HasSubstr;

constexpr double kPi = 3.14159265358979323846;

std::string TmpPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir ? dir : "/tmp", "/", name);
}

void ExpectVecEq(const Vec3& a, const Vec3& b) {
  EXPECT_EQ(a.x, b.x);
  EXPECT_EQ(a.y, b.y);
  EXPECT_EQ(a.z, b.z);
}

void ExpectSameGeometry(const CtGeometry& a, const CtGeometry& b) {
  EXPECT_EQ(a.volume.nx, b.volume.nx);
  EXPECT_EQ(a.volume.ny, b.volume.ny);
  EXPECT_EQ(a.volume.nz, b.volume.nz);
  EXPECT_EQ(a.volume.min_x, b.volume.min_x);
  EXPECT_EQ(a.volume.max_x, b.volume.max_x);
  EXPECT_EQ(a.volume.min_y, b.volume.min_y);
  EXPECT_EQ(a.volume.max_y, b.volume.max_y);
  EXPECT_EQ(a.volume.min_z, b.volume.min_z);
  EXPECT_EQ(a.volume.max_z, b.volume.max_z);
  const ProjectionGeometry& p = a.projection;
  const ProjectionGeometry& q = b.projection;
  EXPECT_EQ(p.beam, q.beam);
  EXPECT_EQ(p.is_2d, q.is_2d);
  EXPECT_EQ(p.det_cols, q.det_cols);
  EXPECT_EQ(p.det_rows, q.det_rows);
  ASSERT_EQ(p.num_views(), q.num_views());
  for (int64_t i = 0; i < p.num_views(); ++i) {
    ExpectVecEq(p.views[i].source_or_ray, q.views[i].source_or_ray);
    ExpectVecEq(p.views[i].det_center, q.views[i].det_center);
    ExpectVecEq(p.views[i].u, q.views[i].u);
    ExpectVecEq(p.views[i].v, q.views[i].v);
  }
}

std::string ErrorOf(const std::string& json) {
  absl::StatusOr<CtGeometry> g = ParseGeometryJson(json);
  EXPECT_FALSE(g.ok()) << json;
  if (g.ok()) return "";
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(g.status().message());
}

const char* kFan = R"({"vol_geom": {"GridColCount": 64, "GridRowCount": 48,
  "option": {"WindowMinX": -40, "WindowMaxX": 24, "WindowMinY": -24, "WindowMaxY": 24}},
  "proj_geom": {"type": "fanflat", "DetectorWidth": 1.5, "DetectorCount": 100,
  "ProjectionAngles": [0.0, 0.5, 1.0], "DistanceOriginSource": 300, "DistanceOriginDetector": 200}})";

TEST(GeometryJsonTest, FanflatAsAstraPythonWritesIt) {
  absl::StatusOr<CtGeometry> g = ParseGeometryJson(kFan);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->volume.nx, 64);
  EXPECT_EQ(g->volume.ny, 48);
  EXPECT_EQ(g->volume.nz, 1);
  EXPECT_EQ(g->volume.min_x, -40);
  EXPECT_EQ(g->volume.max_x, 24);
  EXPECT_EQ(g->volume.min_z, -0.5);
  EXPECT_EQ(g->volume.max_z, 0.5);
  CtGeometry want;
  want.volume = g->volume;
  want.projection = FanBeam2D({0.0, 0.5, 1.0}, 1.5, 100, 300, 200);
  ExpectSameGeometry(*g, want);
}

TEST(GeometryJsonTest, WindowUnderOptionOrTopLevelOrDefault) {
  for (const char* vol : {R"({"GridColCount": 8, "GridRowCount": 8, "Option": {"WindowMinX": -2, "WindowMaxX": 6}})",
                          R"({"GridColCount": 8, "GridRowCount": 8, "WindowMinX": -2, "WindowMaxX": 6})"}) {
    absl::StatusOr<CtGeometry> g = ParseGeometryJson(absl::StrCat(
        R"({"vol_geom": )", vol,
        R"(, "proj_geom": {"type": "parallel", "DetectorWidth": 1, "DetectorCount": 12, "ProjectionAngles": [0]}})"));
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(g->volume.min_x, -2);
    EXPECT_EQ(g->volume.max_x, 6);
    EXPECT_EQ(g->volume.min_y, -4);  // default: centred 1 mm voxels
    EXPECT_EQ(g->volume.max_y, 4);
  }
}

TEST(GeometryJsonTest, ParallelAndAngleRangeExtension) {
  absl::StatusOr<CtGeometry> g = ParseGeometryJson(
      R"({"vol_geom": {"GridColCount": 32, "GridRowCount": 32},
          "proj_geom": {"type": "parallel", "DetectorWidth": 1.0, "DetectorCount": 48,
                        "ProjectionAngles": {"start": 0, "stop": 3.141592653589793, "count": 90}}})");
  ASSERT_TRUE(g.ok()) << g.status();
  CtGeometry want;
  want.volume = CenteredVolume(32, 32);
  want.projection = ParallelBeam2D(EvenAngles(90, kPi), 1.0, 48);
  ASSERT_EQ(g->projection.num_views(), 90);
  // start + (stop - start) i / count and range i / count may differ in the last bit.
  for (int i = 0; i < 90; ++i) {
    EXPECT_NEAR(g->projection.views[i].u.x, want.projection.views[i].u.x, 1e-15);
    EXPECT_NEAR(g->projection.views[i].source_or_ray.y, want.projection.views[i].source_or_ray.y, 1e-15);
  }
}

TEST(GeometryJsonTest, ConeMatchesBuilder) {
  absl::StatusOr<CtGeometry> g = ParseGeometryJson(
      R"({"vol_geom": {"GridColCount": 16, "GridRowCount": 16, "GridSliceCount": 12},
          "proj_geom": {"type": "cone", "DetectorSpacingX": 2.0, "DetectorSpacingY": 1.5, "DetectorRowCount": 20,
                        "DetectorColCount": 30, "ProjectionAngles": [0.1, 0.2], "DistanceOriginSource": 100,
                        "DistanceOriginDetector": 50}})");
  ASSERT_TRUE(g.ok()) << g.status();
  CtGeometry want;
  want.volume = CenteredVolume(16, 16, 12);
  want.projection = ConeBeam({0.1, 0.2}, 2.0, 1.5, 20, 30, 100, 50);
  ExpectSameGeometry(*g, want);
}

TEST(GeometryJsonTest, VectorForms) {
  absl::StatusOr<CtGeometry> par = ParseGeometryJson(
      R"({"vol_geom": {"GridColCount": 8, "GridRowCount": 8},
          "proj_geom": {"type": "parallel_vec", "DetectorCount": 10, "Vectors": [[0, 1, 0, 0, 1, 0], [1, 0, 0, 0, 0, 1]]}})");
  ASSERT_TRUE(par.ok()) << par.status();
  EXPECT_EQ(par->projection.beam, BeamKind::kParallel);
  ExpectVecEq(par->projection.views[1].source_or_ray, {1, 0, 0});
  ExpectVecEq(par->projection.views[1].u, {0, 1, 0});

  absl::StatusOr<CtGeometry> fan = ParseGeometryJson(
      R"({"vol_geom": {"GridColCount": 8, "GridRowCount": 8},
          "proj_geom": {"type": "fanflat_vec", "DetectorCount": 10, "Vectors": [[0, -50, 0, 30, 1, 0]]}})");
  ASSERT_TRUE(fan.ok()) << fan.status();
  EXPECT_EQ(fan->projection.beam, BeamKind::kFan);
  ExpectVecEq(fan->projection.views[0].source_or_ray, {0, -50, 0});
  ExpectVecEq(fan->projection.views[0].det_center, {0, 30, 0});

  absl::StatusOr<CtGeometry> cone = ParseGeometryJson(
      R"({"vol_geom": {"GridColCount": 8, "GridRowCount": 8, "GridSliceCount": 8},
          "proj_geom": {"type": "cone_vec", "DetectorRowCount": 6, "DetectorColCount": 10,
                        "Vectors": [[0, -50, 1, 0, 30, 2, 1, 0, 0, 0, 0, 1.5]]}})");
  ASSERT_TRUE(cone.ok()) << cone.status();
  EXPECT_EQ(cone->projection.beam, BeamKind::kCone);
  EXPECT_EQ(cone->projection.det_rows, 6);
  EXPECT_EQ(cone->projection.det_cols, 10);
  ExpectVecEq(cone->projection.views[0].source_or_ray, {0, -50, 1});
  ExpectVecEq(cone->projection.views[0].det_center, {0, 30, 2});
  ExpectVecEq(cone->projection.views[0].v, {0, 0, 1.5});
}

TEST(GeometryJsonTest, ErrorsNameTheField) {
  EXPECT_EQ(ErrorOf(R"({"vol_geom": {"GridColCount": 8, "GridRowCount": 8},
      "proj_geom": {"type": "fanflat", "DetectorWidth": 1, "DetectorCount": 4, "ProjectionAngles": [0],
                    "DistanceOriginDetector": 10}})"),
            "proj_geom.DistanceOriginSource: missing");
  std::string rows;
  for (int i = 0; i < 7; ++i) rows += "[0, -50, 0, 0, 30, 0, 1, 0, 0, 0, 0, 1], ";
  EXPECT_EQ(ErrorOf(absl::StrCat(R"({"vol_geom": {"GridColCount": 8, "GridRowCount": 8, "GridSliceCount": 8},
      "proj_geom": {"type": "cone_vec", "DetectorRowCount": 6, "DetectorColCount": 10, "Vectors": [)",
                                 rows, R"([0, -50, 0, 0, 30, 0, 1, 0, 0, 0, 0]]}})")),
            "proj_geom.Vectors row 7: expected 12 numbers, got 11");
  EXPECT_EQ(ErrorOf(R"({"vol_geom": {"GridColCount": -3, "GridRowCount": 8}, "proj_geom": {}})"),
            "vol_geom.GridColCount: must be a positive integer, got -3");
  EXPECT_EQ(ErrorOf(R"({"vol_geom": {"GridColCount": 2.5, "GridRowCount": 8}, "proj_geom": {}})"),
            "vol_geom.GridColCount: must be a positive integer, got 2.5");
  EXPECT_EQ(ErrorOf(R"({"vol_geom": {"GridColCount": "8", "GridRowCount": 8}, "proj_geom": {}})"),
            "vol_geom.GridColCount: must be a positive integer, got \"8\"");
  EXPECT_THAT(ErrorOf(R"({"vol_geom": {"GridColCount": 8, "GridRowCount": 8}, "proj_geom": {"type": "parallel3d"}})"),
              HasSubstr("proj_geom.type: unsupported \"parallel3d\" (supported: parallel, fanflat, cone, parallel_vec, "
                        "fanflat_vec, cone_vec)"));
  EXPECT_EQ(ErrorOf(R"({"vol_geom": {"GridColCount": 8, "GridRowCount": 8},
      "proj_geom": {"type": "parallel", "DetectorWidth": 1e999, "DetectorCount": 4, "ProjectionAngles": [0]}})"),
            "geometry JSON: number overflow parsing '1e999'");
  EXPECT_EQ(ErrorOf(R"({"vol_geom": {"GridColCount": 8, "GridRowCount": 8},
      "proj_geom": {"type": "parallel", "DetectorWidth": 1, "DetectorCount": 4, "ProjectionAngles": [0, "a"]}})"),
            "proj_geom.ProjectionAngles[1]: expected a number, got \"a\"");
  EXPECT_EQ(ErrorOf(R"({"vol_geom": {"GridColCount": 8, "GridRowCount": 8},
      "proj_geom": {"type": "parallel", "DetectorWidth": 1, "DetectorCount": 4, "ProjectionAngles": []}})"),
            "proj_geom.ProjectionAngles: empty");
  EXPECT_EQ(ErrorOf(R"({"vol_geom": {"GridColCount": 8, "GridRowCount": 8},
      "proj_geom": {"type": "parallel", "DetectorWidth": 1, "DetectorCount": 4,
                    "ProjectionAngles": {"start": 0, "count": 3}}})"),
            "proj_geom.ProjectionAngles.stop: missing");
  EXPECT_EQ(ErrorOf(R"({"vol_geom": {"GridColCount": 8, "GridRowCount": 8, "option": {"WindowMinX": 1}},
      "proj_geom": {}})"),
            "vol_geom.option.WindowMaxX: missing (WindowMinX is given)");
  EXPECT_EQ(ErrorOf(R"({"vol_geom": {"GridColCount": 8, "GridRowCount": 8, "option": {"WindowMinX": 1,
      "WindowMaxX": 0}}, "proj_geom": {}})"),
            "vol_geom.option.WindowMinX/WindowMaxX: min must be below max, got [1, 0]");
  EXPECT_THAT(ErrorOf(R"({"vol_geom": {"GridColCount": 8, "GridRowCount": 8, "WindowMinY": -1, "WindowMaxY": 1,
      "Option": {"WindowMinY": -1, "WindowMaxY": 1}}, "proj_geom": {}})"),
              HasSubstr("given both in vol_geom.Option and in vol_geom"));
  EXPECT_EQ(ErrorOf(R"({"proj_geom": {}})"), "vol_geom: missing");
  EXPECT_THAT(ErrorOf("[1, 2]"), HasSubstr("expected an object with vol_geom and proj_geom"));
  // Geometry checks after parsing still name the field.
  EXPECT_THAT(ErrorOf(R"({"vol_geom": {"GridColCount": 64, "GridRowCount": 64},
      "proj_geom": {"type": "fanflat", "DetectorWidth": 1, "DetectorCount": 4, "ProjectionAngles": [0],
                    "DistanceOriginSource": 10, "DistanceOriginDetector": 10}})"),
              HasSubstr("lies inside the volume"));
  EXPECT_THAT(ErrorOf(R"({"vol_geom": {"GridColCount": 8, "GridRowCount": 8, "GridSliceCount": 3},
      "proj_geom": {"type": "parallel", "DetectorWidth": 1, "DetectorCount": 4, "ProjectionAngles": [0]}})"),
              HasSubstr("needs a 2-D volume"));
}

TEST(GeometryJsonTest, SyntaxErrorsGiveLineAndColumn) {
  const std::string message = ErrorOf("{\"vol_geom\": {\"GridColCount\": 8,\n  \"GridRowCount\": 8,,\n}}");
  EXPECT_THAT(message, HasSubstr("geometry JSON: parse error at line 2, column 21"));
}

CtGeometry RandomVectorGeometry(BeamKind beam, std::mt19937_64* rng) {
  std::uniform_real_distribution<double> u(-1, 1);
  CtGeometry g;
  const bool is_2d = beam != BeamKind::kCone;
  g.volume = CenteredVolume(13, 7, is_2d ? 1 : 5);
  g.volume.min_x = -6.3 + u(*rng);
  g.volume.max_z = 2.5 + 0.1 * u(*rng);
  if (is_2d) g.volume.min_z = -0.25;  // a non-default slab keeps its z window
  ProjectionGeometry& p = g.projection;
  p.beam = beam;
  p.is_2d = is_2d;
  p.det_cols = 17;
  p.det_rows = is_2d ? 1 : 9;
  for (int i = 0; i < 11; ++i) {
    const double a = 0.3 * i + 0.01 * u(*rng);
    ProjectionVectors w;
    const double z = is_2d ? 0 : 0.1 * u(*rng);
    w.source_or_ray = {std::sin(a) * (beam == BeamKind::kParallel ? 1 : 100.0 / 3), -std::cos(a) * 97.1, z};
    w.det_center = {-std::sin(a) * 50.7 + u(*rng), std::cos(a) * 50.3, z};
    w.u = {std::cos(a) * 1.1, std::sin(a) * 1.1, is_2d ? 0 : 0.01 * u(*rng)};
    if (!is_2d) w.v = {0.01 * u(*rng), 0.02 * u(*rng), 0.7 + 0.1 * u(*rng)};
    p.views.push_back(w);
  }
  return g;
}

TEST(GeometryJsonTest, WriteParseRoundTripsExactly) {
  std::mt19937_64 rng(7);
  for (BeamKind beam : {BeamKind::kParallel, BeamKind::kFan, BeamKind::kCone}) {
    const CtGeometry g = RandomVectorGeometry(beam, &rng);
    ASSERT_TRUE(Validate(g).ok()) << Validate(g);
    const std::string text = WriteGeometryJson(g);
    absl::StatusOr<CtGeometry> back = ParseGeometryJson(text);
    ASSERT_TRUE(back.ok()) << back.status() << "\n" << text;
    ExpectSameGeometry(*back, g);
  }
  // Angle-based geometries come back in vector form, ray for ray.
  CtGeometry fan;
  fan.volume = CenteredVolume(32, 32);
  fan.projection = FanBeam2D(EvenAngles(7, 2 * kPi), 1.3, 40, 200, 100);
  const std::string text = WriteGeometryJson(fan);
  EXPECT_THAT(text, HasSubstr("\"fanflat_vec\""));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("GridSliceCount")));  // ASTRA's 2-D vol_geom
  absl::StatusOr<CtGeometry> back = ParseGeometryJson(text);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameGeometry(*back, fan);
}

TEST(GeometryJsonTest, FileRoundTripAndFileErrors) {
  CtGeometry cone;
  cone.volume = CenteredVolume(8, 8, 8);
  cone.projection = ConeBeam(EvenAngles(5, 2 * kPi), 1, 1, 10, 12, 60, 30);
  const std::string path = TmpPath("cone.json");
  ASSERT_TRUE(WriteGeometryJsonFile(cone, path).ok());
  absl::StatusOr<CtGeometry> back = ReadGeometryJson(path);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameGeometry(*back, cone);

  EXPECT_EQ(ReadGeometryJson(TmpPath("absent.json")).status().code(), absl::StatusCode::kNotFound);

  const std::string bad = TmpPath("bad.json");
  std::ofstream(bad) << R"({"vol_geom": {"GridColCount": 0, "GridRowCount": 8}, "proj_geom": {}})";
  absl::Status s = ReadGeometryJson(bad).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(s.message()), bad + ": vol_geom.GridColCount: must be a positive integer, got 0");

  const std::string huge = TmpPath("huge.json");
  { std::ofstream(huge) << "{}"; }
  ASSERT_EQ(truncate(huge.c_str(), kMaxGeometryJsonBytes + 1), 0);  // sparse: no real disk use
  s = ReadGeometryJson(huge).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("exceeds the 64 MiB limit"));
  std::remove(huge.c_str());
}

}  // namespace
}  // namespace tessera::recon::formats
