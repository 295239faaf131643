// WriteResultVolume and PlanResultOutputs (result_volume_output.h) on random
// oblique volumes: the names ("X.nii.gz" -> X_dicom/, X_seg.dcm), each format
// writing exactly its files, the series reading back as the NIfTI's image in
// space within the stated rescale error, the SEG as the labels exactly, the
// plan's refusals naming the field.
#include "common/dicom/result_volume_output.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/dicom/dicom_seg.h"
#include "common/dicom/dicom_test_data.h"
#include "common/dicom/dicom_write_testing.h"
#include "common/dicom/volume_file.h"
#include "common/nifti_io.h"

namespace tessera::dicom {
namespace {

namespace fs = std::filesystem;
using testing::AffineDiff;
using testing::Det;
using testing::ReverseK;
using testing::TmpDir;

// Random (never all zero) values on an oblique, anisotropic grid; `positive`:
// an index frame of positive determinant (a RAS NIfTI), which DICOM reads
// back with k reversed.
Volume RandomVolume(DType type, bool positive, uint32_t seed) {
  const int64_t nx = 19, ny = 14, nz = 9;
  Volume v;
  v.data = NDArray::Allocate({nx, ny, nz}, DType::kFloat32).value();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-250.f, 900.f);
  std::uniform_int_distribution<int> label(0, 6);
  for (int64_t i = 0; i < v.data.num_elements(); ++i) {
    v.data.data<float>()[i] = type == DType::kFloat32 ? value(rng) : static_cast<float>(label(rng));
  }
  v.data = v.data.AsType(type).value();
  const double a = 0.35, c = std::cos(a), s = std::sin(a);
  v.geometry.direction = {c, -s, 0, s, c, 0, 0, 0, positive ? 1.0 : -1.0};
  v.geometry.spacing = {0.8, 1.3, 2.2};
  v.geometry.origin = {-31.5, 7.25, 12};
  return v;
}

double MaxDiff(const NDArray& a, const NDArray& b) {
  const NDArray x = a.AsType(DType::kFloat64).value(), y = b.AsType(DType::kFloat64).value();
  double d = 0;
  for (int64_t i = 0; i < x.num_elements(); ++i) d = std::max(d, std::fabs(x.data<double>()[i] - y.data<double>()[i]));
  return d;
}

std::set<std::string> Listing(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out.insert(fs::relative(e.path(), dir).string());
  }
  return out;
}

TEST(ResultVolumeOutput, Names) {
  EXPECT_EQ(DicomSeriesDirName("warped.nii.gz"), "warped_dicom");
  EXPECT_EQ(DicomSeriesDirName("reconstruction.nii"), "reconstruction_dicom");
  EXPECT_EQ(DicomSegFileName("warped_labels.nii.gz"), "warped_labels_seg.dcm");
  EXPECT_EQ(DicomSegFileName("applied.nii.gz"), "applied_seg.dcm");
}

TEST(ResultVolumeOutput, EachFormatWritesItsFiles) {
  for (const bool positive : {false, true}) {
    const Volume image = RandomVolume(DType::kFloat32, positive, positive ? 3 : 4);
    ASSERT_EQ(Det(image.geometry) > 0, positive);
    for (const char* format : {"nifti", "dicom", "both"}) {
      SCOPED_TRACE(std::string(format) + (positive ? " positive" : " negative"));
      ResultOutputRequest request;
      request.format = format;
      absl::StatusOr<ResultOutputPlan> plan = PlanResultOutputs(request, "");
      ASSERT_TRUE(plan.ok()) << plan.status();
      const std::string dir = TmpDir(std::string("formats_") + format + (positive ? "_pos" : "_neg"));
      absl::StatusOr<ResultVolumeFiles> files =
          WriteResultVolume(image, dir, "result.nii.gz", ResultVolumeKind::kImage, *plan, "tessera test");
      ASSERT_TRUE(files.ok()) << files.status();
      const std::set<std::string> listed = Listing(dir);
      EXPECT_EQ(std::set<std::string>(files->files.begin(), files->files.end()), listed);
      EXPECT_EQ(listed.count("result.nii.gz"), std::string(format) == "dicom" ? 0u : 1u);
      const int slices = static_cast<int>(std::count_if(listed.begin(), listed.end(), [](const std::string& f) {
        return f.rfind("result_dicom/", 0) == 0;
      }));
      EXPECT_EQ(slices, std::string(format) == "nifti" ? 0 : 9);
      if (std::string(format) == "nifti") continue;
      EXPECT_EQ(files->dicom, "result_dicom");
      EXPECT_NE(files->note.find("result_dicom/: 9 slices, Secondary Capture Image Storage, uint16 rescale"),
                std::string::npos)
          << files->note;
      // The same image in space, within the stated error ((max - min) / 131070).
      absl::StatusOr<Volume> back = ReadVolumeFile(dir + "/result_dicom");
      ASSERT_TRUE(back.ok()) << back.status();
      const Volume same = positive ? ReverseK(*back) : *back;
      EXPECT_LE(AffineDiff(same.geometry, image.geometry), 1e-4);
      EXPECT_LE(MaxDiff(same.data, image.data), 1150.0 / 131070 * 1.001 + 1e-4);
    }
  }
}

TEST(ResultVolumeOutput, LabelsBecomeOneSegExactly) {
  const Volume labels = RandomVolume(DType::kInt32, true, 9);
  ResultOutputRequest request;
  request.format = "both";
  request.series_description = "labels test";
  const ResultOutputPlan plan = PlanResultOutputs(request, "").value();
  const std::string dir = TmpDir("labels");
  absl::StatusOr<ResultVolumeFiles> files =
      WriteResultVolume(labels, dir, "warped_labels.nii.gz", ResultVolumeKind::kLabels, plan, "unused");
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(files->files, (std::vector<std::string>{"warped_labels.nii.gz", "warped_labels_seg.dcm"}));
  absl::StatusOr<DicomSegVolume> seg = ReadDicomSeg(dir + "/warped_labels_seg.dcm");
  ASSERT_TRUE(seg.ok()) << seg.status();
  const Volume same = ReverseK(seg->labels);
  EXPECT_LE(AffineDiff(same.geometry, labels.geometry), 1e-4);
  EXPECT_EQ(MaxDiff(same.data, labels.data), 0);
}

TEST(ResultVolumeOutput, PlanRefusalsNameTheField) {
  ResultOutputRequest request;
  request.format = "jpeg";
  absl::Status s = PlanResultOutputs(request, "", "x.").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("x.format 'jpeg'"), std::string::npos) << s;
  request.format = "nifti";
  request.series_description = "d";
  s = PlanResultOutputs(request, "").status();
  EXPECT_NE(s.message().find("output.series_description applies to DICOM outputs only"), std::string::npos) << s;
  request = {};
  request.format = "dicom";
  request.deidentify = true;
  absl::StatusOr<ResultOutputPlan> plan = PlanResultOutputs(request, "salt-1");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->deidentify.enabled);
  EXPECT_EQ(plan->deidentify.salt, "salt-1");
  EXPECT_FALSE(plan->nifti);
  EXPECT_FALSE(PlanResultOutputs(request, "").ok());  // de-identification needs the job's salt
  request.deidentify = false;
  request.reference_series = TmpDir("not_a_series");
  s = PlanResultOutputs(request, "").status();
  EXPECT_NE(s.message().find("is not a readable DICOM series"), std::string::npos) << s;
  const std::string data = DicomTestDataDir();
  if (data.empty()) return;
  request.reference_series = data + "/ct-series-philips-phantom";
  EXPECT_TRUE(PlanResultOutputs(request, "").ok());
}

}  // namespace
}  // namespace tessera::dicom
