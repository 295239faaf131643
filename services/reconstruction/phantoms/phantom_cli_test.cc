// `tessera phantom` as users run it: geometry -> ct / pet, outputs read back
// with the formats library against the same geometry, and flag errors.
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/testing/run_tessera.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/reconstruction/formats/geometry_json.h"
#include "services/reconstruction/formats/recon_nifti.h"

namespace tessera::recon::phantoms {
namespace {

using ::testing::HasSubstr;

using cli::testing::CliResult;

std::string Tmp(const std::string& name) { return cli::testing::TestTmp(name); }
std::string ReadAll(const std::string& path) { return cli::testing::ReadWholeFile(path); }

CliResult Phantom(std::vector<std::string> args) {
  args.insert(args.begin(), "phantom");
  return cli::testing::RunTessera(args);
}

TEST(PhantomCliTest, CtFromAReadyMadeGeometry) {
  CliResult r = Phantom({"geometry", "--type", "fanflat", "--size", "32", "--views", "40", "--out", Tmp("fan.json")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("fan 2-D, 40 views"));
  absl::StatusOr<CtGeometry> g = formats::ReadGeometryJson(Tmp("fan.json"));
  ASSERT_TRUE(g.ok()) << g.status();

  r = Phantom({"ct", "--geometry", Tmp("fan.json"), "--supersample", "2", "--sinogram-out", Tmp("s.nii.gz"),
               "--volume-out", Tmp("v.nii.gz")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("s.nii.gz: sinogram"));
  absl::StatusOr<NDArray> sino = formats::ReadSinogram(Tmp("s.nii.gz"), g->projection);
  ASSERT_TRUE(sino.ok()) << sino.status();
  float max = 0;
  for (int64_t i = 0; i < sino->num_elements(); ++i) max = std::max(max, sino->data<float>()[i]);
  EXPECT_GT(max, 5.0f);  // through the skull (value 1) twice and the brain
  absl::StatusOr<NDArray> volume = formats::ReadVolume(Tmp("v.nii.gz"), g->volume);
  ASSERT_TRUE(volume.ok()) << volume.status();
  EXPECT_FLOAT_EQ(volume->data<float>()[16 + 32 * 8], 0.2f);  // (0.5, -7.5) mm: brain
}

TEST(PhantomCliTest, PetCountsAndMaps) {
  CliResult r = Phantom({"geometry", "--type", "parallel", "--size", "24", "--out", Tmp("par.json")});
  ASSERT_EQ(r.code, 0) << r.err;
  absl::StatusOr<CtGeometry> g = formats::ReadGeometryJson(Tmp("par.json"));
  ASSERT_TRUE(g.ok()) << g.status();
  r = Phantom({"pet", "--geometry", Tmp("par.json"), "--counts", "5e4", "--seed", "3", "--sinogram-out",
               Tmp("p.nii.gz"), "--activity-out", Tmp("a.nii.gz"), "--attenuation-out", Tmp("mu.nii.gz"),
               "--factors-out", Tmp("f.nii.gz")});
  ASSERT_EQ(r.code, 0) << r.err;
  formats::SinogramOptions counts;
  counts.counts = true;
  absl::StatusOr<NDArray> prompts = formats::ReadSinogram(Tmp("p.nii.gz"), g->projection, counts);
  ASSERT_TRUE(prompts.ok()) << prompts.status();
  double total = 0;
  for (int64_t i = 0; i < prompts->num_elements(); ++i) total += prompts->data<float>()[i];
  EXPECT_NEAR(total, 5e4, 5 * std::sqrt(5e4));
  formats::VolumeReadOptions maps;
  maps.nonnegative = true;
  EXPECT_TRUE(formats::ReadVolume(Tmp("a.nii.gz"), g->volume, maps).ok());
  EXPECT_TRUE(formats::ReadVolume(Tmp("mu.nii.gz"), g->volume, maps).ok());
  EXPECT_TRUE(formats::ReadSinogram(Tmp("f.nii.gz"), g->projection, counts).ok());
}

TEST(PhantomCliTest, BadFlagsAndFilesAreReported) {
  CliResult r = Phantom({"ct", "--sinogram-out", Tmp("x.nii")});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("tessera phantom ct: --geometry is required"));
  r = Phantom({"geometry", "--type", "helical", "--out", Tmp("x.json")});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("geometry type must be parallel, fanflat or cone"));
  { std::ofstream(Tmp("broken.json")) << R"({"vol_geom": {"GridColCount": -3, "GridRowCount": 8}, "proj_geom": {}})"; }
  r = Phantom({"ct", "--geometry", Tmp("broken.json"), "--sinogram-out", Tmp("x.nii")});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("vol_geom.GridColCount: must be a positive integer, got -3"));
  r = Phantom({"pet", "--geometry", Tmp("broken.json"), "--noise", "gauss", "--sinogram-out", Tmp("x.nii")});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--noise must be poisson or none"));
  r = Phantom({"spect"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("unknown subcommand 'spect'"));
  r = Phantom({"mri"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--out-dir is required"));
  r = Phantom({"mri", "--size", "30", "--kind", "cartesian", "--acceleration", "4", "--out-dir", Tmp("m")});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("acceleration must be in [1, 8] and divide the size 30"));
  r = Phantom({"us", "--kind", "wire", "--out", Tmp("u.h5")});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("kind 'wire' is not one of points, cyst"));
}

}  // namespace
}  // namespace tessera::recon::phantoms
