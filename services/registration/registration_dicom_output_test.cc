// Registration results as DICOM (RegisterRequest.output): a fixed image
// given as a DICOM series (written from the phantom with the CT phantom
// series of ../shared/data/dicom as its reference, so it has a patient and a
// study), a small CPU run, and the files of format both / dicom: the series
// reads back as warped.nii.gz within the writer's stated error and on the same
// grid, the SEG as warped_labels.nii.gz exactly, patient / study / frame of
// reference are the fixed series' (or gone, de-identified); the checks of
// OutputOptions at submit.
#include <gtest/gtest.h>

#include <dcmtk/dcmdata/dctk.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "common/dicom/dicom_seg.h"
#include "common/dicom/dicom_test_data.h"
#include "common/dicom/dicom_writer.h"
#include "common/dicom/volume_file.h"
#include "common/nifti_io.h"
#include "kernels/registration/pipeline/synthetic.h"
#include "services/registration/registration_engine.h"

namespace tessera::registration {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kSize = 24;

struct Files {
  std::string root, reference, mr_reference, fixed_dicom, moving, moving_labels;
  bool ok = false;
};

const Files& Problem() {
  static const Files* files = [] {
    auto* f = new Files;
    const std::string data = dicom::DicomTestDataDir();
    if (data.empty()) return f;
    const char* tmp = std::getenv("TEST_TMPDIR");
    f->root = fs::canonical(std::string(tmp != nullptr ? tmp : "/tmp")).string() + "/dicom_output_data";
    fs::remove_all(f->root);
    fs::create_directories(f->root);
    f->reference = fs::canonical(data + "/ct-series-philips-phantom").string();
    f->mr_reference = fs::canonical(data + "/mr-series-adc-prostate").string();
    Phantom phantom = MakePhantom(kSize).value();
    SyntheticOptions synth;
    synth.seed = 4;
    SyntheticPair pair = MakeSyntheticPair(phantom.image, &phantom.labels, synth).value();
    f->fixed_dicom = f->root + "/fixed_dicom";
    dicom::DicomWriteOptions options;
    options.reference = f->reference;
    options.same_frame_of_reference = false;
    options.series_description = "test fixed";
    EXPECT_TRUE(dicom::WriteDicomSeries(phantom.image, f->fixed_dicom, options).ok());
    f->moving = f->root + "/moving.nii.gz";
    f->moving_labels = f->root + "/moving_labels.nii.gz";
    EXPECT_TRUE(WriteNifti(pair.moving, f->moving).ok());
    EXPECT_TRUE(WriteNifti(*pair.moving_labels, f->moving_labels).ok());
    f->ok = true;
    return f;
  }();
  return *files;
}

std::shared_ptr<const RegistrationEngine> MakeEngine() {
  // The shared CT series is a data root too (an explicit reference_series).
  auto engine = RegistrationEngine::Create({Problem().root, fs::path(Problem().reference).parent_path().string()},
                                           int64_t{64} << 20, "cpu");
  EXPECT_TRUE(engine.ok()) << engine.status();
  return *engine;
}

v1::RegisterRequest QuickRequest(const std::string& format) {
  v1::RegisterRequest r;
  r.mutable_fixed()->set_path("fixed_dicom");
  r.mutable_moving()->set_path(Problem().moving);
  r.mutable_moving_labels()->set_path(Problem().moving_labels);
  v1::RegistrationOptions* o = r.mutable_options();
  o->set_metric("mse");
  o->add_scales(2);
  o->add_scales(1);
  for (int n : {10, 5}) o->add_rigid_iterations(n);
  for (int n : {10, 5}) o->add_affine_iterations(n);
  for (int n : {10, 5}) o->add_deformable_iterations(n);
  r.mutable_output()->set_format(format);
  return r;
}

google::protobuf::Any Pack(const v1::RegisterRequest& r) {
  google::protobuf::Any any;
  any.PackFrom(r);
  return any;
}

// One attribute of a DICOM file ("" when absent).
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

std::string Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

struct JobRun {
  std::string work, out_dir;
  std::vector<std::string> names;
  v1::RegistrationResult result;
};

JobRun RunJob(const v1::RegisterRequest& request, const std::string& name) {
  JobRun run;
  run.work = Problem().root + "/work_" + name;
  run.out_dir = Problem().root + "/out_" + name;
  fs::remove_all(run.work);
  fs::remove_all(run.out_dir);
  fs::create_directories(run.work);
  v1::RegisterRequest r = request;
  r.set_output_dir("out_" + name);
  jobs::EngineContext ctx("job-" + name, run.work, nullptr, absl::InfiniteFuture(), nullptr);
  absl::StatusOr<jobs::EngineOutput> out = MakeEngine()->Run(Pack(r), ctx);
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return run;
  for (const jobs::EngineFile& f : out->files) {
    run.names.push_back(f.name);
    EXPECT_EQ(static_cast<int64_t>(fs::file_size(run.work + "/" + f.name)), f.bytes) << f.name;
    EXPECT_EQ(static_cast<int64_t>(fs::file_size(run.out_dir + "/" + f.name)), f.bytes) << f.name;
  }
  EXPECT_TRUE(out->result.UnpackTo(&run.result));
  return run;
}

int CountPrefix(const std::vector<std::string>& names, const std::string& prefix) {
  int n = 0;
  for (const std::string& name : names) n += name.rfind(prefix, 0) == 0;
  return n;
}

bool Has(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

TEST(RegistrationDicomOutput, BothFormatsReadBackAsTheNiftiAndKeepTheFixedSeriesStudy) {
  if (!Problem().ok) GTEST_SKIP() << "no ../shared/data/dicom (set TESSERA_DICOM_DATA)";
  const JobRun run = RunJob(QuickRequest("both"), "both");
  for (const char* name : {"warped.nii.gz", "warped_labels.nii.gz", "0GenericAffine.mat", "0Warp.nii.gz",
                           "warped_labels_seg.dcm"}) {
    EXPECT_TRUE(Has(run.names, name)) << name;
  }
  EXPECT_EQ(CountPrefix(run.names, "warped_dicom/"), kSize);
  EXPECT_EQ(run.result.files().warped_dicom(), run.out_dir + "/warped_dicom");
  EXPECT_EQ(run.result.files().warped_labels_dicom(), run.out_dir + "/warped_labels_seg.dcm");
  EXPECT_EQ(run.result.artifacts(0), v1::REGISTRATION_ARTIFACT_WARPED);
  EXPECT_EQ(run.result.artifacts(1), v1::REGISTRATION_ARTIFACT_WARPED_LABELS);

  // The series: the NIfTI's voxels within the rescale's error, its grid within 1e-4 mm.
  absl::StatusOr<Volume> nifti = ReadNifti(run.work + "/warped.nii.gz");
  absl::StatusOr<Volume> series = ReadVolumeFile(run.work + "/warped_dicom");
  ASSERT_TRUE(nifti.ok()) << nifti.status();
  ASSERT_TRUE(series.ok()) << series.status();
  ASSERT_EQ(series->data.shape(), nifti->data.shape());
  const NDArray a = nifti->data.AsType(DType::kFloat64).value(), b = series->data.AsType(DType::kFloat64).value();
  double lo = 1e300, hi = -1e300, err = 0;
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    lo = std::min(lo, a.data<double>()[i]);
    hi = std::max(hi, a.data<double>()[i]);
    err = std::max(err, std::fabs(a.data<double>()[i] - b.data<double>()[i]));
  }
  const double stated = (hi - lo) / 131070 * 1.001 + 1e-6;  // dicom_writer.h: slope / 2
  EXPECT_LE(err, stated);
  const Mat4 ma = nifti->geometry.IndexToWorld(), mb = series->geometry.IndexToWorld();
  for (int q = 0; q < 12; ++q) EXPECT_NEAR(ma[q], mb[q], 1e-4) << q;
  bool noted = false;
  for (const std::string& line : run.result.log()) noted |= line.find("warped_dicom/: 24 slices") != std::string::npos;
  EXPECT_TRUE(noted) << "the log says what the series holds";

  // The SEG: the labels exactly.
  absl::StatusOr<Volume> labels = ReadNifti(run.work + "/warped_labels.nii.gz");
  absl::StatusOr<dicom::DicomSegVolume> seg = dicom::ReadDicomSeg(run.work + "/warped_labels_seg.dcm");
  ASSERT_TRUE(labels.ok()) << labels.status();
  ASSERT_TRUE(seg.ok()) << seg.status();
  ASSERT_EQ(seg->labels.data.shape(), labels->data.shape());
  const NDArray la = labels->data.AsType(DType::kInt32).value(), lb = seg->labels.data.AsType(DType::kInt32).value();
  int64_t differ = 0;
  for (int64_t i = 0; i < la.num_elements(); ++i) differ += la.data<int32_t>()[i] != lb.data<int32_t>()[i];
  EXPECT_EQ(differ, 0);

  // Patient, study and frame of reference: the fixed series'.
  const std::string fixed_file = FirstFile(Problem().fixed_dicom);
  for (const std::string& out : {FirstFile(run.out_dir + "/warped_dicom"), run.out_dir + "/warped_labels_seg.dcm"}) {
    for (const DcmTagKey& tag : {DCM_PatientName, DCM_PatientID, DCM_StudyInstanceUID, DCM_FrameOfReferenceUID}) {
      EXPECT_EQ(Attribute(out, tag), Attribute(fixed_file, tag)) << out << " " << DcmTag(tag).getTagName();
    }
    EXPECT_NE(Attribute(out, DCM_SeriesInstanceUID), Attribute(fixed_file, DCM_SeriesInstanceUID));
  }
  EXPECT_FALSE(Attribute(fixed_file, DCM_PatientID).empty());
  EXPECT_EQ(Attribute(FirstFile(run.out_dir + "/warped_dicom"), DCM_SeriesDescription),
            "tessera register: warped moving image");
}

TEST(RegistrationDicomOutput, DicomOnlyDeidentifiedHasNoNiftiImagesAndNoIdentity) {
  if (!Problem().ok) GTEST_SKIP() << "no ../shared/data/dicom (set TESSERA_DICOM_DATA)";
  v1::RegisterRequest request = QuickRequest("dicom");
  request.mutable_output()->set_deidentify(true);
  request.mutable_output()->set_series_description("research copy");
  const JobRun run = RunJob(request, "deid");
  EXPECT_FALSE(Has(run.names, "warped.nii.gz"));
  EXPECT_FALSE(Has(run.names, "warped_labels.nii.gz"));
  EXPECT_TRUE(Has(run.names, "0GenericAffine.mat"));  // transforms stay ITK/ANTs files
  EXPECT_TRUE(Has(run.names, "0Warp.nii.gz"));
  EXPECT_TRUE(Has(run.names, "warped_labels_seg.dcm"));
  EXPECT_EQ(CountPrefix(run.names, "warped_dicom/"), kSize);
  EXPECT_TRUE(run.result.files().warped().empty());
  EXPECT_FALSE(fs::exists(run.out_dir + "/warped.nii.gz"));
  // DownloadResult has no NIfTI to send: the artifacts say so.
  for (const int a : run.result.artifacts()) {
    EXPECT_NE(a, v1::REGISTRATION_ARTIFACT_WARPED);
    EXPECT_NE(a, v1::REGISTRATION_ARTIFACT_WARPED_LABELS);
  }
  EXPECT_GT(run.result.artifacts_size(), 0);

  const std::string fixed_file = FirstFile(Problem().fixed_dicom);
  const std::string name = Attribute(fixed_file, DCM_PatientName), id = Attribute(fixed_file, DCM_PatientID);
  const std::string study = Attribute(fixed_file, DCM_StudyInstanceUID);
  ASSERT_FALSE(id.empty());
  for (const std::string& file : run.names) {
    if (file.find(".dcm") == std::string::npos) continue;
    const std::string bytes = Bytes(run.work + "/" + file);
    EXPECT_EQ(bytes.find(id), std::string::npos) << file;
    if (!name.empty()) {
      EXPECT_EQ(bytes.find(name), std::string::npos) << file;
    }
    EXPECT_EQ(bytes.find(study), std::string::npos) << file;
    EXPECT_EQ(Attribute(run.work + "/" + file, DCM_PatientIdentityRemoved), "YES") << file;
  }
  EXPECT_EQ(Attribute(FirstFile(run.work + "/warped_dicom"), DCM_SeriesDescription), "research copy");
}

TEST(RegistrationDicomOutput, OutputOptionsAreCheckedAtSubmit) {
  if (!Problem().ok) GTEST_SKIP() << "no ../shared/data/dicom (set TESSERA_DICOM_DATA)";
  auto engine = MakeEngine();
  auto expect = [&](const v1::OutputOptions& output, absl::StatusCode code, const std::string& words) {
    v1::RegisterRequest r = QuickRequest("");
    *r.mutable_output() = output;
    const absl::Status s = engine->Validate(Pack(r));
    EXPECT_EQ(s.code(), code) << s;
    EXPECT_NE(s.message().find(words), std::string::npos) << s;
  };
  v1::OutputOptions o;
  o.set_format("dcm");
  expect(o, absl::StatusCode::kInvalidArgument, "output.format 'dcm'");
  o.Clear();
  o.set_deidentify(true);
  expect(o, absl::StatusCode::kInvalidArgument, "output.deidentify applies to DICOM outputs only");
  o.Clear();
  o.set_format("nifti");
  o.set_series_description("x");
  expect(o, absl::StatusCode::kInvalidArgument, "output.series_description");
  o.Clear();
  o.set_reference_series(Problem().reference);
  expect(o, absl::StatusCode::kInvalidArgument, "output.reference_series");
  o.set_format("dicom");
  o.set_reference_series("/usr");
  expect(o, absl::StatusCode::kPermissionDenied, "output.reference_series");
  o.set_reference_series("no-such-series");
  expect(o, absl::StatusCode::kNotFound, "output.reference_series");
  o.set_reference_series(Problem().moving);  // a NIfTI file
  expect(o, absl::StatusCode::kInvalidArgument, "is not a readable DICOM series");
  o.set_reference_series(Problem().reference);
  v1::RegisterRequest ok = QuickRequest("both");
  *ok.mutable_output() = o;
  EXPECT_TRUE(engine->Validate(Pack(ok)).ok());
}

// An explicit reference replaces the fixed series: its patient and study,
// a new frame of reference (the result is not known to lie in its space),
// Secondary Capture for an MR reference.
TEST(RegistrationDicomOutput, AnExplicitReferenceSeriesGivesItsStudy) {
  if (!Problem().ok) GTEST_SKIP() << "no ../shared/data/dicom (set TESSERA_DICOM_DATA)";
  v1::RegisterRequest request = QuickRequest("dicom");
  request.clear_moving_labels();
  request.mutable_options()->add_stages("rigid");
  request.mutable_output()->set_reference_series(Problem().mr_reference);
  const JobRun run = RunJob(request, "reference");
  const std::string out = FirstFile(run.work + "/warped_dicom");
  const std::string ref = FirstFile(Problem().mr_reference);
  EXPECT_EQ(Attribute(out, DCM_StudyInstanceUID), Attribute(ref, DCM_StudyInstanceUID));
  EXPECT_EQ(Attribute(out, DCM_PatientID), Attribute(ref, DCM_PatientID));
  EXPECT_NE(Attribute(out, DCM_StudyInstanceUID), Attribute(FirstFile(Problem().fixed_dicom), DCM_StudyInstanceUID));
  EXPECT_NE(Attribute(out, DCM_FrameOfReferenceUID), Attribute(ref, DCM_FrameOfReferenceUID));
  EXPECT_EQ(Attribute(out, DCM_SOPClassUID), UID_SecondaryCaptureImageStorage);
}

}  // namespace
}  // namespace tessera::registration
