// The files we write reproduce our warped image when applied the way ANTs
// applies them (checked with an independent CPU resampler that reads the
// files back from disk), and the inverse warp inverts the warp.
#include "kernels/registration/pipeline/outputs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include <sys/stat.h>

#include "common/nifti_io.h"
#include "kernels/registration/pipeline/ants_transform_io.h"
#include "kernels/registration/pipeline/synthetic.h"

namespace tessera::registration {
namespace {

TEST(Outputs, AntsCompositionReproducesWarpedImage) {
  auto ch2 = ReadNifti("/usr/share/mricron/templates/ch2.nii.gz");
  ASSERT_TRUE(ch2.ok()) << ch2.status();
  Volume fixed = DownsampleImage(*ch2, 3).value();
  // A moving image on a different grid: other spacing, origin and direction.
  SyntheticOptions synth;
  synth.seed = 21;
  Volume moving = MakeSyntheticPair(fixed, nullptr, synth).value().moving;
  moving.geometry.origin[0] += 7;
  moving.geometry.origin[2] -= 3;
  RegistrationOptions options;
  options.metric = Metric::kLncc;
  options.scales = {2, 1};
  options.rigid_iterations = {20, 10};
  options.affine_iterations = {20, 10};
  options.deformable_iterations = {30, 15};
  options.device = "cpu";
  auto result = Register(fixed, moving, options);
  ASSERT_TRUE(result.ok()) << result.status();
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/out";
  auto files = WriteRegistrationOutputs(*result, fixed, dir, nullptr, true);
  ASSERT_TRUE(files.ok()) << files.status();

  Mat4 affine = ReadItkAffine(files->affine).value();
  Volume warp = ReadAntsWarp(files->warp).value();
  Volume warped = ReadNifti(files->warped).value();
  NDArray ants = ApplyAntsTransformsCpu(moving, fixed, affine, warp.data).value();
  double max_diff = 0, max_value = 0;
  for (int64_t i = 0; i < ants.num_elements(); ++i) {
    max_diff = std::max(max_diff, std::abs(double{ants.data<float>()[i]} - warped.data.data<float>()[i]));
    max_value = std::max(max_value, std::abs(double{warped.data.data<float>()[i]}));
  }
  std::printf("max |ANTs-composed - warped| = %g (max intensity %g)\n", max_diff, max_value);
  EXPECT_GT(max_value, 10);
  EXPECT_LT(max_diff, 1e-2 * max_value);

  // w(y + v'(y)) composition: x + v(x) + w(x + v(x)) == x for the inverse.
  Volume inverse = ReadAntsWarp(files->inverse_warp).value();
  const int64_t n[3] = {fixed.data.dim(0), fixed.data.dim(1), fixed.data.dim(2)};
  const int64_t voxels = n[0] * n[1] * n[2];
  double worst = 0;
  const float* v = warp.data.data<float>();
  const float* w = inverse.data.data<float>();
  // Where v is small relative to spacing, w ~ -v; check the mean residual.
  double sum = 0;
  for (int64_t i = 0; i < 3 * voxels; ++i) {
    sum += std::abs(v[i] + w[i]);
    worst = std::max(worst, double{std::abs(v[i])});
  }
  EXPECT_LT(sum / (3 * voxels), 0.5 * std::max(1e-3, worst));
}

TEST(Outputs, InvertDisplacementInvertsASmoothField) {
  Geometry g;
  g.spacing = {2, 2, 2};
  NDArray v = NDArray::Allocate({20, 20, 20, 3}, DType::kFloat32).value();
  const int64_t voxels = 8000;
  for (int64_t k = 0; k < 20; ++k) {
    for (int64_t j = 0; j < 20; ++j) {
      for (int64_t i = 0; i < 20; ++i) {
        const int64_t at = i + 20 * (j + 20 * k);
        v.data<float>()[at] = static_cast<float>(2.0 * std::sin(j * 0.2));
        v.data<float>()[voxels + at] = static_cast<float>(1.5 * std::cos(k * 0.25));
        v.data<float>()[2 * voxels + at] = static_cast<float>(1.0 * std::sin(i * 0.3));
      }
    }
  }
  NDArray w = InvertDisplacement(v, g, 30).value();
  // Interior check: y + w(y) + v(y + w(y)) == y.  v is analytic, so evaluate it exactly.
  double worst = 0;
  for (int64_t k = 4; k < 16; ++k) {
    for (int64_t j = 4; j < 16; ++j) {
      for (int64_t i = 4; i < 16; ++i) {
        const int64_t at = i + 20 * (j + 20 * k);
        const double q[3] = {2.0 * i + w.data<float>()[at], 2.0 * j + w.data<float>()[voxels + at],
                             2.0 * k + w.data<float>()[2 * voxels + at]};
        const double vq[3] = {2.0 * std::sin(q[1] / 2 * 0.2), 1.5 * std::cos(q[2] / 2 * 0.25),
                              1.0 * std::sin(q[0] / 2 * 0.3)};
        worst = std::max({worst, std::abs(w.data<float>()[at] + vq[0]), std::abs(w.data<float>()[voxels + at] + vq[1]),
                          std::abs(w.data<float>()[2 * voxels + at] + vq[2])});
      }
    }
  }
  EXPECT_LT(worst, 0.05);  // mm; trilinear sampling of v on a 2 mm grid
}

// A small hand-made result: identity affine, a smooth displacement.
RegistrationResult SmallResult(const Volume& fixed) {
  RegistrationResult r;
  r.affine_ras = Mat4{1, 0, 0, 2, 0, 1, 0, 0, 0, 0, 1, -1, 0, 0, 0, 1};
  r.warped = fixed;
  r.displacement_ras = *NDArray::Allocate({fixed.data.dim(0), fixed.data.dim(1), fixed.data.dim(2), 3}, DType::kFloat32);
  float* v = r.displacement_ras.data<float>();
  for (int64_t i = 0; i < r.displacement_ras.num_elements(); ++i) v[i] = static_cast<float>(0.5 * std::sin(0.01 * i));
  return r;
}

TEST(Outputs, WriterOverlapsTransformFilesWithLabelsAndReportsErrors) {
  Volume fixed;
  fixed.data = *NDArray::Allocate({24, 20, 16}, DType::kFloat32);
  for (int64_t i = 0; i < fixed.data.num_elements(); ++i) fixed.data.data<float>()[i] = static_cast<float>(i % 97);
  const RegistrationResult result = SmallResult(fixed);
  NDArray labels = *NDArray::Allocate({24, 20, 16}, DType::kInt32);
  for (int64_t i = 0; i < labels.num_elements(); ++i) labels.data<int32_t>()[i] = static_cast<int32_t>(i % 5);

  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/overlap";
  auto writer = OutputWriter::Start(result, fixed, dir, /*inverse_warp=*/true);
  ASSERT_TRUE(writer.ok()) << writer.status();
  auto files = (*writer)->Finish(&labels);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(files->warped_labels, dir + "/warped_labels.nii.gz");
  for (const std::string* path : {&files->warped, &files->affine, &files->warp, &files->inverse_warp}) {
    EXPECT_FALSE(path->empty());
  }
  Volume warp = ReadAntsWarp(files->warp).value();
  for (int64_t i = 0; i < warp.data.num_elements(); ++i) {
    ASSERT_EQ(warp.data.data<float>()[i], result.displacement_ras.data<float>()[i]) << i;
  }
  Volume back = ReadNifti(files->warped_labels).value();
  ASSERT_EQ(back.data.nbytes(), labels.nbytes());
  EXPECT_EQ(std::memcmp(back.data.raw_data(), labels.raw_data(), labels.nbytes()), 0);

  // A background write that fails (a directory sits where 0Warp.nii.gz goes)
  // is reported by Finish, and no file appears under its final name (the warp
  // is written beside the other files, so they may be complete: the job
  // fails as a whole).
  const std::string bad = std::string(std::getenv("TEST_TMPDIR")) + "/blocked";
  ASSERT_EQ(mkdir(bad.c_str(), 0755), 0);
  ASSERT_EQ(mkdir((bad + "/0Warp.nii.gz").c_str(), 0755), 0);
  auto blocked = OutputWriter::Start(result, fixed, bad, false);
  ASSERT_TRUE(blocked.ok());
  auto failed = (*blocked)->Finish(nullptr);
  EXPECT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("0Warp.nii.gz"), absl::string_view::npos) << failed.status();
  struct stat st;
  ASSERT_EQ(stat((bad + "/0Warp.nii.gz").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode)) << "the failed write left no file under the warp's name";

  // A writer dropped without Finish (the caller failed elsewhere) waits for its thread.
  { auto dropped = OutputWriter::Start(result, fixed, dir + "_dropped", false); }
}

}  // namespace
}  // namespace tessera::registration
