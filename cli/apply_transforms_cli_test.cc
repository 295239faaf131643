// `tessera apply-transforms` (issue 34): the verb runs the apply_transforms
// engine on files written as ANTs writes them (0Warp.nii.gz, a .mat and an ITK
// .txt) and gives what the library gives, bit for bit; point sets; bad flags
// exit with 2.
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "cli/testing/run_tessera.h"
#include "common/nifti_io.h"
#include "kernels/registration/pipeline/ants_transform_io.h"
#include "kernels/registration/pipeline/apply_transforms.h"

namespace tessera::cli {
namespace {

using testing::RunTessera;
using testing::TestTmp;

struct Files {
  std::string reference, input, labels, warp, affine, text;
  Volume reference_volume, input_volume;
};

Files WriteFiles() {
  Files f;
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> u(0, 100);
  Geometry g;
  g.spacing = {2, 2, 2.5};
  g.origin = {-20, -22, -15};
  f.input_volume = {NDArray::Allocate({20, 22, 12}, DType::kFloat32).value(), g, ""};
  for (int64_t i = 0; i < f.input_volume.data.num_elements(); ++i) f.input_volume.data.data<float>()[i] = u(rng);
  Volume labels{NDArray::Allocate({20, 22, 12}, DType::kInt16).value(), g, ""};
  for (int64_t i = 0; i < labels.data.num_elements(); ++i) labels.data.data<int16_t>()[i] = static_cast<int16_t>((i / 37) % 5);
  Geometry rg;
  rg.spacing = {2.2, 1.8, 2.5};
  rg.origin = {-19, -20, -14};
  f.reference_volume = {NDArray::Allocate({17, 21, 11}, DType::kFloat32).value(), rg, ""};
  NDArray field = NDArray::Allocate({17, 21, 11, 3}, DType::kFloat32).value();
  for (int64_t i = 0; i < field.num_elements(); ++i) field.data<float>()[i] = static_cast<float>(1.5 * std::sin(0.01 * i));
  f.reference = TestTmp("reference.nii.gz");
  f.input = TestTmp("input.nii.gz");
  f.labels = TestTmp("labels.nii.gz");
  f.warp = TestTmp("0Warp.nii.gz");
  f.affine = TestTmp("0GenericAffine.mat");
  f.text = TestTmp("shift.txt");
  EXPECT_TRUE(WriteNifti(f.reference_volume, f.reference).ok());
  EXPECT_TRUE(WriteNifti(f.input_volume, f.input).ok());
  EXPECT_TRUE(WriteNifti(labels, f.labels).ok());
  EXPECT_TRUE(registration::WriteAntsWarp(f.warp, field, rg).ok());
  const Mat4 affine = {1.02, 0.02, 0, 1.5, -0.01, 0.99, 0.03, -1, 0, 0.02, 1.01, 0.5, 0, 0, 0, 1};
  EXPECT_TRUE(registration::WriteItkAffine(f.affine, affine, {1, 2, 3}).ok());
  const Mat4 shift = {1, 0, 0, 2, 0, 1, 0, -1, 0, 0, 1, 0, 0, 0, 0, 1};
  EXPECT_TRUE(registration::WriteItkAffine(f.text, shift).ok());
  return f;
}

TEST(ApplyTransformsCli, ImageLabelsAndPointsAsTheLibrary) {
  const Files f = WriteFiles();
  const std::string out = TestTmp("applied.nii.gz");
  testing::CliResult r = RunTessera({"apply-transforms", "--reference", f.reference, "--input", f.input, "--transform",
                                     f.warp, "--transform", f.affine, "--transform", "[" + f.text + ",1]", "--device",
                                     "cpu", "--out", out});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"interpolation\": \"linear\""), std::string::npos) << r.out;
  const Volume got = ReadNifti(out).value();
  // The library on the same files.
  registration::TransformChain chain = {registration::LoadTransformFile(f.warp, false).value(),
                                        registration::LoadTransformFile(f.affine, false).value(),
                                        registration::LoadTransformFile(f.text, true).value()};
  registration::ApplyTransformsOptions o;
  o.device = "cpu";
  const Volume reference = ReadNifti(f.reference).value();
  const Volume input = ReadNifti(f.input).value();
  const registration::AppliedVolume want =
      registration::ApplyTransformsToVolume(input, registration::SpaceOf(reference), chain, o).value();
  ASSERT_EQ(got.data.nbytes(), want.volume.data.nbytes());
  EXPECT_EQ(std::memcmp(got.data.raw_data(), want.volume.data.raw_data(), got.data.nbytes()), 0);

  // Labels with generic-label: int32 labels out, uncompressed.
  const std::string labels_out = TestTmp("labels_out.nii");
  r = RunTessera({"apply-transforms", "--reference", f.reference, "--input", f.labels, "--transform", f.warp,
                  "--transform", f.affine, "--interpolation", "generic-label", "--out", labels_out});
  ASSERT_EQ(r.code, 0) << r.err;
  const Volume labels = ReadNifti(labels_out).value();
  EXPECT_EQ(labels.data.dtype(), DType::kInt32);

  // Points (LPS), extra columns kept.
  const std::string points = TestTmp("points.csv"), points_out = TestTmp("points_out.csv");
  std::ofstream(points) << "x,y,z,name\n1,2,3,a\n-4.5,0,7,b\n";
  r = RunTessera({"apply-transforms", "--points", points, "--transform", "[" + f.text + ",1]", "--out", points_out});
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream in(points_out);
  std::stringstream text;
  text << in.rdbuf();
  // The inverse of a RAS shift (2, -1, 0) moves LPS x by +2 and y by -1.
  EXPECT_EQ(text.str(), "x,y,z,name\n3,1,3,a\n-2.5,-1,7,b\n");
}

TEST(ApplyTransformsCli, BadFlagsExitWithTwo) {
  const Files f = WriteFiles();
  const std::vector<std::vector<std::string>> bad = {
      {"apply-transforms", "--reference", f.reference, "--input", f.input, "--out", TestTmp("a.nii.gz")},
      {"apply-transforms", "--reference", f.reference, "--input", f.input, "--transform", f.affine},
      {"apply-transforms", "--reference", f.reference, "--input", f.input, "--transform", f.affine, "--out",
       TestTmp("a.csv")},
      {"apply-transforms", "--reference", f.reference, "--input", f.input, "--transform", f.affine,
       "--interpolation", "cubic", "--out", TestTmp("a.nii.gz")},
      {"apply-transforms", "--reference", f.reference, "--input", f.input, "--transform", "[" + f.affine + ",2]",
       "--out", TestTmp("a.nii.gz")},
      {"apply-transforms", "--reference", f.reference, "--input", f.input, "--transform", "[" + f.warp + ",1]",
       "--out", TestTmp("a.nii.gz")},
      {"apply-transforms", "--input", f.input, "--transform", f.affine, "--out", TestTmp("a.nii.gz")},
      {"apply-transforms", "--bogus"},
  };
  for (const auto& args : bad) {
    const testing::CliResult r = RunTessera(args);
    EXPECT_EQ(r.code, 2) << args.back() << ": " << r.err;
  }
  const testing::CliResult help = RunTessera({"apply-transforms", "--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("--interpolation"), std::string::npos);
}

}  // namespace
}  // namespace tessera::cli
