// Issue 34: `tessera register --fixed-mask --moving-mask --initial-transform`
// (the flags `tessera job submit register` shares): a run with both masks
// and an ANTs affine as start transform succeeds, its summary's initial loss
// is below the centre-of-mass start's, and a malformed transform file is a
// usage error naming initial_transform.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/testing/run_tessera.h"
#include "common/nifti_io.h"
#include "kernels/registration/pipeline/ants_transform_io.h"
#include "kernels/registration/pipeline/space.h"
#include "kernels/registration/pipeline/synthetic.h"

namespace tessera::cli {
namespace {

using testing::RunTessera;
using testing::TestTmp;

TEST(RegisterMasksCli, MasksAndInitialTransform) {
  registration::Phantom p = registration::MakePhantom(20).value();
  const double a = 0.15;
  const Mat4 t = {std::cos(a), -std::sin(a), 0, 4, std::sin(a), std::cos(a), 0, -3, 0, 0, 1, 2, 0, 0, 0, 1};
  Volume moving = p.image;
  moving.geometry = Geometry::FromAffine(registration::Multiply(t, p.image.geometry.IndexToWorld())).value();
  Volume moving_mask = p.labels;
  moving_mask.geometry = moving.geometry;
  const std::string fixed = TestTmp("fixed.nii.gz"), moving_path = TestTmp("moving.nii.gz");
  const std::string fixed_mask = TestTmp("fixed_mask.nii.gz"), moving_mask_path = TestTmp("moving_mask.nii.gz");
  const std::string affine = TestTmp("0GenericAffine.mat"), broken = TestTmp("broken.mat");
  ASSERT_TRUE(WriteNifti(p.image, fixed).ok());
  ASSERT_TRUE(WriteNifti(moving, moving_path).ok());
  ASSERT_TRUE(WriteNifti(p.labels, fixed_mask).ok());
  ASSERT_TRUE(WriteNifti(moving_mask, moving_mask_path).ok());
  ASSERT_TRUE(registration::WriteItkAffine(affine, t).ok());
  std::ofstream(broken) << "MATLAB 5.0 MAT-file, truncated";

  const std::vector<std::string> base = {"register", "--fixed", fixed, "--moving", moving_path, "--metric", "mse",
                                         "--stages", "rigid", "--scales", "1", "--device", "cpu", "--quiet"};
  auto with = [&](std::vector<std::string> extra, const std::string& out) {
    std::vector<std::string> args = base;
    args.push_back("--out");
    args.push_back(TestTmp(out));
    args.insert(args.end(), extra.begin(), extra.end());
    return RunTessera(args);
  };
  testing::CliResult com = with({}, "com");
  ASSERT_EQ(com.code, 0) << com.err;
  testing::CliResult given = with({"--fixed-mask", fixed_mask, "--moving-mask", moving_mask_path,
                                   "--initial-transform", affine},
                                  "given");
  ASSERT_EQ(given.code, 0) << given.err;
  const auto com_json = nlohmann::json::parse(com.out), given_json = nlohmann::json::parse(given.out);
  EXPECT_LT(given_json["initial_loss"].get<double>(), com_json["initial_loss"].get<double>()) << given.out;

  testing::CliResult bad = with({"--initial-transform", broken}, "bad");
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_NE(bad.err.find("initial_transform"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace tessera::cli
