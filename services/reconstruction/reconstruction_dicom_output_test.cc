// ReconstructRequest.output: a small cone-beam FDK reconstruction written as
// reconstruction_dicom/ (Secondary Capture keeping the study of the CT
// phantom series of ../shared/data/dicom as reference, and a new study
// without one), reading back as reconstruction.nii.gz within the writer's
// stated error and on its grid; format dicom keeps the NIfTI out of
// output_dir (the job's results keep it: DownloadResult reads it); the
// refusals at resolve time.
#include <gtest/gtest.h>

#include <dcmtk/dcmdata/dctk.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "common/dicom/dicom_test_data.h"
#include "common/dicom/volume_file.h"
#include "common/nifti_io.h"
#include "common/testing/temp_files.h"
#include "services/reconstruction/formats/example_geometry.h"
#include "services/reconstruction/formats/geometry_json.h"
#include "services/reconstruction/formats/recon_nifti.h"
#include "services/reconstruction/phantoms/analytic_sinogram.h"
#include "services/reconstruction/phantoms/phantom.h"
#include "services/reconstruction/reconstruction_request.h"
#include "services/reconstruction/reconstruction_run.h"

namespace tessera::reconstruction {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kSize = 16;

// geometry.json and an exact cone-beam sinogram of a 3-D Shepp-Logan phantom.
std::string MakeConeCase() {
  const std::string dir = ::tessera::testing::FreshTestDir("cone_dicom");
  absl::StatusOr<std::string> json = recon::formats::ExampleGeometryJson("cone", kSize);
  EXPECT_TRUE(json.ok()) << json.status();
  std::ofstream(dir + "/geometry.json") << *json;
  absl::StatusOr<recon::CtGeometry> g = recon::formats::ParseGeometryJson(*json);
  EXPECT_TRUE(g.ok()) << g.status();
  const double fov = 0.9 * static_cast<double>(kSize);
  absl::StatusOr<NDArray> sinogram =
      recon::phantoms::AnalyticSinogram(recon::phantoms::SheppLogan3D(fov, fov), *g, 1);
  EXPECT_TRUE(sinogram.ok()) << sinogram.status();
  EXPECT_TRUE(recon::formats::WriteSinogram(*sinogram, g->projection, dir + "/sinogram.nii.gz").ok());
  return dir;
}

v1::ReconstructRequest FdkRequest(const std::string& dir) {
  v1::ReconstructRequest r;
  r.mutable_geometry()->set_path(dir + "/geometry.json");
  r.mutable_sinogram()->set_path(dir + "/sinogram.nii.gz");
  r.mutable_ct()->set_method("fdk");
  r.set_device("cpu");
  return r;
}

absl::StatusOr<ReconOutcome> RunIn(const v1::ReconstructRequest& request, const std::string& work) {
  absl::StatusOr<ReconSpec> spec = ResolveReconstructRequest(request, {"/"}, int64_t{1} << 32, "cpu");
  if (!spec.ok()) return spec.status();
  fs::remove_all(work);
  fs::create_directories(work);
  ReconRunContext ctx;
  ctx.work_dir = work;
  return RunReconstruction(*spec, ctx);
}

std::string Attribute(const std::string& file, const DcmTagKey& tag) {
  DcmFileFormat ff;
  EXPECT_TRUE(ff.loadFile(file.c_str()).good()) << file;
  OFString value;
  ff.getDataset()->findAndGetOFStringArray(tag, value);
  return value.c_str();
}

std::string FirstFile(const std::string& dir) {
  std::set<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) files.insert(e.path().string());
  return files.empty() ? "" : *files.begin();
}

// The series is the NIfTI's image in space: every series voxel centre is a
// NIfTI voxel centre (within 1e-4 mm; dicom_writer.h's handedness rule may
// reverse k) and holds its value within the linear uint16 rescale's error
// ((max - min) / 131070).
void ExpectSeriesEqualsNifti(const std::string& series_dir, const std::string& nifti_path) {
  absl::StatusOr<Volume> nifti = ReadNifti(nifti_path);
  absl::StatusOr<Volume> series = ReadVolumeFile(series_dir);
  ASSERT_TRUE(nifti.ok()) << nifti.status();
  ASSERT_TRUE(series.ok()) << series.status();
  ASSERT_EQ(series->data.shape(), nifti->data.shape());
  const NDArray a = nifti->data.AsType(DType::kFloat64).value(), b = series->data.AsType(DType::kFloat64).value();
  double lo = 1e300, hi = -1e300;
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    lo = std::min(lo, a.data<double>()[i]);
    hi = std::max(hi, a.data<double>()[i]);
  }
  const Mat4 to_world = series->geometry.IndexToWorld();
  const Mat4 to_nifti = InvertAffine(nifti->geometry.IndexToWorld()).value();
  const int64_t n[3] = {a.dim(0), a.dim(1), a.dim(2)};
  double err = 0, off_grid = 0;
  for (int64_t k = 0; k < n[2]; ++k) {
    for (int64_t j = 0; j < n[1]; ++j) {
      for (int64_t i = 0; i < n[0]; ++i) {
        double w[3], q[3];
        for (int r = 0; r < 3; ++r) w[r] = to_world[4 * r] * i + to_world[4 * r + 1] * j + to_world[4 * r + 2] * k + to_world[4 * r + 3];
        for (int r = 0; r < 3; ++r) q[r] = to_nifti[4 * r] * w[0] + to_nifti[4 * r + 1] * w[1] + to_nifti[4 * r + 2] * w[2] + to_nifti[4 * r + 3];
        int64_t at[3];
        for (int r = 0; r < 3; ++r) {
          at[r] = std::llround(q[r]);
          off_grid = std::max(off_grid, std::fabs(q[r] - at[r]));
          ASSERT_TRUE(at[r] >= 0 && at[r] < n[r]) << "series voxel outside the NIfTI grid";
        }
        err = std::max(err, std::fabs(b.data<double>()[i + n[0] * (j + n[1] * k)] -
                                      a.data<double>()[at[0] + n[0] * (at[1] + n[1] * at[2])]));
      }
    }
  }
  EXPECT_LE(off_grid * nifti->geometry.spacing[0], 1e-4);
  EXPECT_LE(err, (hi - lo) / 131070 * 1.001 + 1e-6);
}

TEST(ReconstructionDicomOutput, DicomWithACtReferenceIsACtSeriesOfItsStudy) {
  const std::string data = dicom::DicomTestDataDir();
  if (data.empty()) GTEST_SKIP() << "no ../shared/data/dicom (set TESSERA_DICOM_DATA)";
  const std::string reference = fs::canonical(data + "/ct-series-philips-phantom").string();
  const std::string dir = MakeConeCase();
  v1::ReconstructRequest request = FdkRequest(dir);
  request.set_output_dir(dir + "/out");
  request.mutable_output()->set_format("dicom");
  request.mutable_output()->set_reference_series(reference);
  absl::StatusOr<ReconOutcome> out = RunIn(request, dir + "/work");
  ASSERT_TRUE(out.ok()) << out.status();

  const std::vector<std::string>& files = out->work_files;
  EXPECT_EQ(std::count_if(files.begin(), files.end(),
                          [](const std::string& f) { return f.rfind("reconstruction_dicom/", 0) == 0; }),
            kSize);
  EXPECT_EQ(out->result.files_size(), static_cast<int>(files.size()));
  // The job keeps its NIfTI (DownloadResult, volume_sha256); output_dir gets the series only.
  EXPECT_TRUE(fs::exists(dir + "/work/reconstruction.nii.gz"));
  EXPECT_FALSE(fs::exists(dir + "/out/reconstruction.nii.gz"));
  EXPECT_EQ(out->result.output_path(), dir + "/out/reconstruction_dicom");
  ExpectSeriesEqualsNifti(dir + "/out/reconstruction_dicom", dir + "/work/reconstruction.nii.gz");

  const std::string first = FirstFile(dir + "/out/reconstruction_dicom");
  // Attenuation in 1/mm is not HU: Secondary Capture even with a CT reference.
  EXPECT_EQ(Attribute(first, DCM_SOPClassUID), UID_SecondaryCaptureImageStorage);
  EXPECT_EQ(Attribute(first, DCM_SeriesDescription), "tessera recon ct fdk");
  const std::string ref = FirstFile(reference);
  EXPECT_EQ(Attribute(first, DCM_StudyInstanceUID), Attribute(ref, DCM_StudyInstanceUID));
  EXPECT_EQ(Attribute(first, DCM_PatientID), Attribute(ref, DCM_PatientID));
  EXPECT_NE(Attribute(first, DCM_FrameOfReferenceUID), Attribute(ref, DCM_FrameOfReferenceUID));
}

TEST(ReconstructionDicomOutput, BothWithoutAReferenceIsANewStudy) {
  const std::string dir = MakeConeCase();
  v1::ReconstructRequest request = FdkRequest(dir);
  request.set_output_dir(dir + "/out");
  request.mutable_output()->set_format("both");
  request.mutable_output()->set_series_description("phantom FDK");
  absl::StatusOr<ReconOutcome> out = RunIn(request, dir + "/work");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(fs::exists(dir + "/out/reconstruction.nii.gz"));
  EXPECT_EQ(out->result.output_path(), dir + "/out/reconstruction.nii.gz");
  ExpectSeriesEqualsNifti(dir + "/work/reconstruction_dicom", dir + "/work/reconstruction.nii.gz");
  const std::string first = FirstFile(dir + "/out/reconstruction_dicom");
  EXPECT_EQ(Attribute(first, DCM_SOPClassUID), UID_SecondaryCaptureImageStorage);
  EXPECT_EQ(Attribute(first, DCM_SeriesDescription), "phantom FDK");
  EXPECT_EQ(Attribute(first, DCM_PatientID), "");
}

TEST(ReconstructionDicomOutput, OutputOptionsAreCheckedWhenResolved) {
  const std::string dir = MakeConeCase();
  auto refused = [&](const v1::OutputOptions& output) {
    v1::ReconstructRequest request = FdkRequest(dir);
    *request.mutable_output() = output;
    return ResolveReconstructRequest(request, {"/"}, int64_t{1} << 32, "cpu").status();
  };
  v1::OutputOptions o;
  o.set_format("png");
  EXPECT_EQ(refused(o).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused(o).message().find("output.format"), std::string::npos) << refused(o);
  o.set_format("");
  o.set_deidentify(true);
  EXPECT_NE(refused(o).message().find("output.deidentify applies to DICOM outputs only"), std::string::npos)
      << refused(o);
  o.set_format("dicom");
  o.set_reference_series(dir + "/geometry.json");
  EXPECT_EQ(refused(o).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused(o).message().find("output.reference_series"), std::string::npos) << refused(o);
  o.set_reference_series(dir + "/missing");
  EXPECT_EQ(refused(o).code(), absl::StatusCode::kNotFound) << refused(o);
}

}  // namespace
}  // namespace tessera::reconstruction
