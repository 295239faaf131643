// `tessera recon` as users run it: a phantom sinogram from `tessera phantom`,
// reconstructed to .nii.gz and .nii, the JSON summary on stdout, and the exit
// codes and messages of bad requests (2: the request; 1: anything else).
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/testing/run_tessera.h"
#include "common/nifti_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

using cli::testing::CliResult;
using cli::testing::RunTessera;

std::string Tmp(const std::string& name) { return cli::testing::TestTmp(name); }
CliResult Tessera(const std::vector<std::string>& args) { return RunTessera(args); }

TEST(ReconCliTest, PhantomThenReconstruct) {
  ASSERT_EQ(Tessera({"phantom", "geometry", "--type", "parallel", "--size", "48", "--out", Tmp("g.json")}).code, 0);
  CliResult r = Tessera({"phantom", "ct", "--geometry", Tmp("g.json"), "--sinogram-out", Tmp("s.nii.gz")});
  ASSERT_EQ(r.code, 0) << r.err;

  r = Tessera({"recon", "ct", "--geometry", Tmp("g.json"), "--sinogram", Tmp("s.nii.gz"), "--out", Tmp("fbp.nii.gz")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"method\":\"fbp\""));
  EXPECT_THAT(r.err, HasSubstr("views back-projected"));
  absl::StatusOr<Volume> v = ReadNifti(Tmp("fbp.nii.gz"));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->data.shape(), (Shape{48, 48, 1}));

  r = Tessera({"recon", "ct", "--geometry", Tmp("g.json"), "--sinogram", Tmp("s.nii.gz"), "--method", "cgls",
               "--iterations", "3", "--deterministic", "--quiet", "--out", Tmp("cgls.nii")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"residualNorms\""));
  EXPECT_TRUE(ReadNifti(Tmp("cgls.nii")).ok());
}

TEST(ReconCliTest, BadRequestsExitTwoWithTheField) {
  ASSERT_EQ(Tessera({"phantom", "geometry", "--type", "fanflat", "--size", "32", "--out", Tmp("f.json")}).code, 0);
  ASSERT_EQ(Tessera({"phantom", "ct", "--geometry", Tmp("f.json"), "--sinogram-out", Tmp("f.nii.gz")}).code, 0);
  CliResult r = Tessera({"recon", "ct", "--geometry", Tmp("f.json"), "--sinogram", Tmp("f.nii.gz"), "--method", "fdk",
                      "--out", Tmp("x.nii.gz")});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("ct.method"));
  r = Tessera({"recon", "ct", "--geometry", Tmp("f.json"), "--sinogram", Tmp("f.nii.gz"), "--method", "sart",
               "--relaxation", "3", "--out", Tmp("x.nii.gz")});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("ct.relaxation"));
  r = Tessera({"recon", "ct", "--geometry", Tmp("f.json"), "--sinogram", Tmp("missing.nii.gz"), "--out",
               Tmp("x.nii.gz")});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("sinogram"));
  r = Tessera({"recon", "ct", "--geometry", Tmp("f.json"), "--sinogram", Tmp("f.nii.gz"), "--out", Tmp("x.png")});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr(".nii.gz or .nii"));
  r = Tessera({"recon", "mri", "--geometry", Tmp("f.json")});
  EXPECT_EQ(r.code, 2);
  r = Tessera({"recon", "pet", "--geometry", Tmp("f.json"), "--out", Tmp("x.nii.gz")});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("sinogram and listmode"));
}

}  // namespace
}  // namespace tessera
