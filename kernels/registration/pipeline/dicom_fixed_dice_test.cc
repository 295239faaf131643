// Issue 34: "registration from DICOM gives the same Dice as from the
// equivalent NIfTI". Colin27 (mricron-data, 3 mm, integer intensities so the
// DICOM writer stores them exactly) and its AAL labels are the fixed image;
// the moving image is a synthetic warp of it (synthetic.h). The fixed image
// and labels go through WriteDicomSeries and back through ReadVolumeFile (the
// reader every registration input uses), and the same registration runs
// from each:
//   - LPS-handed index frame (k reversed, negative determinant, as every
//     DICOM series reads back): the DICOM copy is voxel for voxel the NIfTI,
//     so the runs are identical: the same Dice to the last bit;
//   - RAS-handed (Colin's own, positive determinant): the DICOM copy is the
//     same image in space with k reversed (dicom_writer.h, "Handedness"), so
//     the pyramid and sampled iterations see another voxel order and Dice
//     agrees within a tolerance (0.01), not bitwise.
// Prints the numbers recorded in bench/results/2026-12-06-cpu-dicom-registration.md.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "common/dicom/dicom_writer.h"
#include "common/dicom/volume_file.h"
#include "kernels/registration/pipeline/registration_job.h"
#include "kernels/registration/pipeline/testing/colin_problem.h"

namespace tessera::registration {
namespace {

namespace fs = std::filesystem;

// Integer intensities (int16): what a CT or MR series stores, exact in DICOM.
Volume Rounded(const Volume& v, DType type) {
  Volume out = v;
  NDArray f = v.data.AsType(DType::kFloat64).value();
  for (int64_t i = 0; i < f.num_elements(); ++i) f.data<double>()[i] = std::round(f.data<double>()[i]);
  out.data = f.AsType(type).value();
  return out;
}

// The same image with k reversed: the k column negated, the origin at the
// last slice (an index frame of the other handedness).
Volume ReverseK(const Volume& v) {
  Volume out = v;
  out.data = NDArray::Allocate(v.data.shape(), v.data.dtype()).value();  // copies share storage
  const int64_t nx = v.data.dim(0), ny = v.data.dim(1), nz = v.data.dim(2);
  const size_t slice = static_cast<size_t>(nx * ny) * SizeOf(v.data.dtype());
  for (int64_t k = 0; k < nz; ++k) {
    std::memcpy(static_cast<char*>(out.data.raw_data()) + k * slice,
                static_cast<const char*>(v.data.raw_data()) + (nz - 1 - k) * slice, slice);
  }
  Mat4 m = v.geometry.IndexToWorld();
  for (int r = 0; r < 3; ++r) {
    m[4 * r + 3] += m[4 * r + 2] * (nz - 1);
    m[4 * r + 2] = -m[4 * r + 2];
  }
  out.geometry = Geometry::FromAffine(m).value();
  return out;
}

double Determinant(const Mat4& m) {
  return m[0] * (m[5] * m[10] - m[6] * m[9]) - m[1] * (m[4] * m[10] - m[6] * m[8]) +
         m[2] * (m[4] * m[9] - m[5] * m[8]);
}

// Through the DICOM writer and back through the reader of every registration input.
Volume ThroughDicom(const Volume& v, const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  fs::remove_all(dir);
  absl::StatusOr<dicom::DicomWriteResult> written = dicom::WriteDicomSeries(v, dir);
  EXPECT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->max_abs_error, 0);  // integers: exact
  std::string format;
  absl::StatusOr<Volume> read = ReadVolumeFile(dir, &format);
  EXPECT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(format, "DICOM");
  return *std::move(read);
}

struct Outcome {
  double dice_before = 0, dice_after = 0, seconds = 0;
};

Outcome Register(const Volume& fixed, const Volume& fixed_labels, const ColinProblem& p) {
  RegistrationInputs inputs;
  inputs.fixed = fixed;
  inputs.moving = p.pair.moving;
  inputs.fixed_labels = fixed_labels;
  inputs.moving_labels = *p.pair.moving_labels;
  EXPECT_TRUE(ToIntegerLabels(*inputs.fixed_labels).ok());
  EXPECT_TRUE(ToIntegerLabels(*inputs.moving_labels).ok());
  RegistrationPlan plan = PlanRegistration(QuickColinOptions(Metric::kLncc, {20, 10})).value();
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<RegistrationSummary> s = RunRegistration(inputs, plan, "", false);
  EXPECT_TRUE(s.ok()) << s.status();
  Outcome o;
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!s.ok()) return o;
  o.dice_before = s->dice_before.value_or(NAN);
  o.dice_after = s->dice_after.value_or(NAN);
  return o;
}

class DicomFixedDiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists("/usr/share/mricron/templates/ch2.nii.gz")) GTEST_SKIP() << "no mricron-data";
    problem_ = MakeColinProblem(IntensityChange::kGamma, 7, 3);
    problem_.fixed = Rounded(problem_.fixed, DType::kInt16);
    problem_.fixed_labels = Rounded(problem_.fixed_labels, DType::kInt16);
  }
  ColinProblem problem_;
};

TEST_F(DicomFixedDiceTest, LpsHandedFixedGivesTheSameDiceBitForBit) {
  const Volume fixed = ReverseK(problem_.fixed), labels = ReverseK(problem_.fixed_labels);
  ASSERT_LT(Determinant(fixed.geometry.IndexToWorld()), 0);
  const Volume dicom_fixed = ThroughDicom(fixed, "lps_fixed"), dicom_labels = ThroughDicom(labels, "lps_labels");
  ASSERT_EQ(dicom_fixed.data.shape(), fixed.data.shape());
  ASSERT_EQ(0, std::memcmp(dicom_fixed.data.raw_data(), fixed.data.raw_data(), fixed.data.nbytes()));
  const Mat4 a = fixed.geometry.IndexToWorld(), b = dicom_fixed.geometry.IndexToWorld();
  for (int q = 0; q < 12; ++q) ASSERT_NEAR(a[q], b[q], 1e-4) << q;

  const Outcome nifti = Register(fixed, labels, problem_);
  const Outcome dicom = Register(dicom_fixed, dicom_labels, problem_);
  std::printf("LPS-handed fixed %s: NIfTI Dice %.6f -> %.6f (%.2f s), DICOM Dice %.6f -> %.6f (%.2f s)\n",
              ShapeToString(fixed.data.shape()).c_str(), nifti.dice_before, nifti.dice_after, nifti.seconds,
              dicom.dice_before, dicom.dice_after, dicom.seconds);
  EXPECT_GT(nifti.dice_after, nifti.dice_before + 0.05);
  EXPECT_EQ(dicom.dice_before, nifti.dice_before);
  EXPECT_EQ(dicom.dice_after, nifti.dice_after);
}

TEST_F(DicomFixedDiceTest, RasHandedFixedGivesTheSameDiceWithinATolerance) {
  const Volume& fixed = problem_.fixed;
  const Volume& labels = problem_.fixed_labels;
  ASSERT_GT(Determinant(fixed.geometry.IndexToWorld()), 0);
  const Volume dicom_fixed = ThroughDicom(fixed, "ras_fixed"), dicom_labels = ThroughDicom(labels, "ras_labels");
  // The same image in space, k reversed.
  const Volume back = ReverseK(dicom_fixed);
  ASSERT_EQ(0, std::memcmp(back.data.raw_data(), fixed.data.raw_data(), fixed.data.nbytes()));
  const Mat4 a = fixed.geometry.IndexToWorld(), b = back.geometry.IndexToWorld();
  for (int q = 0; q < 12; ++q) ASSERT_NEAR(a[q], b[q], 1e-4) << q;

  const Outcome nifti = Register(fixed, labels, problem_);
  const Outcome dicom = Register(dicom_fixed, dicom_labels, problem_);
  std::printf("RAS-handed fixed %s: NIfTI Dice %.6f -> %.6f (%.2f s), DICOM Dice %.6f -> %.6f (%.2f s), "
              "|difference| %.6f\n",
              ShapeToString(fixed.data.shape()).c_str(), nifti.dice_before, nifti.dice_after, nifti.seconds,
              dicom.dice_before, dicom.dice_after, dicom.seconds, std::fabs(dicom.dice_after - nifti.dice_after));
  EXPECT_GT(nifti.dice_after, nifti.dice_before + 0.05);
  EXPECT_NEAR(dicom.dice_before, nifti.dice_before, 1e-4);  // header placement: the same points in space
  EXPECT_NEAR(dicom.dice_after, nifti.dice_after, 0.01);
}

}  // namespace
}  // namespace tessera::registration
