// `tessera describe` and `tessera convert` on the DICOM series of
// ../shared/data/dicom: the description names the series, the NIfTI written
// reads back as the same volume and affine as ReadDicomSeries gives.
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

#include "cli/testing/run_tessera.h"
#include "common/dicom/dicom_series.h"
#include "common/dicom/dicom_test_data.h"
#include "common/nifti_io.h"

namespace tessera::cli {
namespace {

using testing::RunTessera;
using testing::TestTmp;

class DicomCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = dicom::DicomTestDataDir();
    if (data_.empty()) GTEST_SKIP() << "no ../shared/data/dicom (set TESSERA_DICOM_DATA)";
  }
  std::string data_;
};

TEST_F(DicomCliTest, DescribeSeries) {
  testing::CliResult r = RunTessera({"describe", data_ + "/ct-series-philips-phantom"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("DICOM CT series, 10 files, 512x512x10 int16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("orientation LAS"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("affine (RAS"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("study "), std::string::npos) << r.out;

  // A mixed set is refused with the list, and --series picks one.
  r = RunTessera({"describe", data_ + "/pet"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("2 series"), std::string::npos) << r.err;
  r = RunTessera({"describe", "--series", "2", data_ + "/pet"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("DICOM PT series, 1 files"), std::string::npos) << r.out;

  r = RunTessera({"describe", data_ + "/ct-series-ge-gantry-tilt"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("gantry tilt"), std::string::npos) << r.err;
}

TEST_F(DicomCliTest, ConvertToNifti) {
  const std::string out = TestTmp("mr.nii.gz");
  testing::CliResult r = RunTessera({"convert", data_ + "/mr-series-adc-prostate", out});
  ASSERT_EQ(r.code, 0) << r.err;
  auto nii = ReadNifti(out);
  ASSERT_TRUE(nii.ok()) << nii.status();
  auto series = dicom::ReadDicomSeries({data_ + "/mr-series-adc-prostate"});
  ASSERT_TRUE(series.ok()) << series.status();
  ASSERT_EQ(nii->data.shape(), series->volume.data.shape());
  ASSERT_EQ(nii->data.dtype(), series->volume.data.dtype());
  EXPECT_EQ(0, std::memcmp(nii->data.raw_data(), series->volume.data.raw_data(), nii->data.nbytes()));
  const Mat4 a = nii->geometry.IndexToWorld(), b = series->volume.geometry.IndexToWorld();
  for (int q = 0; q < 12; ++q) EXPECT_NEAR(a[q], b[q], 1e-3) << q;

  r = RunTessera({"convert", data_ + "/mr-series-adc-prostate", TestTmp("mr.dcm")});
  EXPECT_EQ(r.code, 2);
  r = RunTessera({"convert", TestTmp("nothing-here"), out});
  EXPECT_EQ(r.code, 1);
}

// NIfTI -> `tessera convert ... DIR/` -> DICOM series: reads back as the same
// volume and affine (a LAS volume, as DICOM reads), keeping the reference's study.
TEST_F(DicomCliTest, ConvertNiftiToDicom) {
  const std::string nii = TestTmp("ct.nii");
  const std::string ref = data_ + "/ct-series-philips-phantom";
  testing::CliResult r = RunTessera({"convert", ref, nii});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string dir = TestTmp("ct_dicom") + "/";
  r = RunTessera({"convert", "--reference", ref, "--series-description", "cli round trip", nii, dir});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("10 DICOM files"), std::string::npos) << r.out;
  auto back = dicom::ReadDicomSeries({dir});
  ASSERT_TRUE(back.ok()) << back.status();
  auto orig = dicom::ReadDicomSeries({ref});
  ASSERT_TRUE(orig.ok()) << orig.status();
  ASSERT_EQ(back->volume.data.shape(), orig->volume.data.shape());
  ASSERT_EQ(back->volume.data.dtype(), orig->volume.data.dtype());
  EXPECT_EQ(0, std::memcmp(back->volume.data.raw_data(), orig->volume.data.raw_data(), orig->volume.data.nbytes()));
  const Mat4 a = back->volume.geometry.IndexToWorld(), b = orig->volume.geometry.IndexToWorld();
  for (int q = 0; q < 12; ++q) EXPECT_NEAR(a[q], b[q], 1e-4) << q;
  EXPECT_EQ(back->info.study_instance_uid, orig->info.study_instance_uid);
  EXPECT_NE(back->info.series_instance_uid, orig->info.series_instance_uid);
  EXPECT_EQ(back->info.series_description, "cli round trip");

  r = RunTessera({"convert", "--to", "png", nii, dir});
  EXPECT_EQ(r.code, 2);
}

// Labels NIfTI -> `tessera convert --to seg` -> a SEG that `describe` lists
// and `convert` turns back into the same labels; --deidentify keeps none of
// the reference's identity.
TEST_F(DicomCliTest, ConvertLabelsToSegAndBack) {
  const std::string ref = data_ + "/ct-series-philips-phantom";
  auto ct = dicom::ReadDicomSeries({ref});
  ASSERT_TRUE(ct.ok()) << ct.status();
  Volume labels;
  labels.geometry = ct->volume.geometry;
  labels.data = NDArray::Allocate(ct->volume.data.shape(), DType::kInt16).value();
  const NDArray hu = ct->volume.data.AsType(DType::kFloat32).value();
  for (int64_t i = 0; i < hu.num_elements(); ++i) {
    labels.data.data<int16_t>()[i] = hu.data<float>()[i] > 300 ? 12 : (hu.data<float>()[i] > -300 ? 3 : 0);
  }
  const std::string nii = TestTmp("labels.nii.gz");
  ASSERT_TRUE(WriteNifti(labels, nii).ok());
  const std::string seg = TestTmp("seg_out") + "/labels.dcm";
  testing::CliResult r = RunTessera({"convert", "--to", "seg", "--reference", ref, nii, seg});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("DICOM Segmentation"), std::string::npos) << r.out;
  r = RunTessera({"describe", seg});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("DICOM SEG, 2 segments, 512x512x10 int32"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("label 12 \"label 12\""), std::string::npos) << r.out;
  const std::string back_path = TestTmp("labels_back.nii.gz");
  r = RunTessera({"convert", seg, back_path});
  ASSERT_EQ(r.code, 0) << r.err;
  auto back = ReadNifti(back_path);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->data.shape(), labels.data.shape());
  const NDArray back16 = back->data.AsType(DType::kInt16).value();
  EXPECT_EQ(0, std::memcmp(back16.raw_data(), labels.data.raw_data(), labels.data.nbytes()));
  const Mat4 a = back->geometry.IndexToWorld(), b = labels.geometry.IndexToWorld();
  for (int q = 0; q < 12; ++q) EXPECT_NEAR(a[q], b[q], 1e-4) << q;

  // De-identified SEG and series: the phantom's PatientID and StudyInstanceUID appear in no byte.
  const std::string deid_seg = TestTmp("seg_deid") + "/labels.dcm";
  r = RunTessera({"convert", "--to", "seg", "--deidentify", "--reference", ref, nii, deid_seg});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("de-identified"), std::string::npos) << r.out;
  const std::string deid_dir = TestTmp("series_deid") + "/";
  r = RunTessera({"convert", "--deidentify", "--reference", ref, nii, deid_dir});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const std::string& file : {deid_seg, deid_dir + "IM00001.dcm"}) {
    std::ifstream in(file, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_FALSE(bytes.empty()) << file;
    EXPECT_EQ(bytes.find("PLASTIC"), std::string::npos) << file;
    EXPECT_EQ(bytes.find(ct->info.study_instance_uid), std::string::npos) << file;
    EXPECT_NE(bytes.find("ANON-"), std::string::npos) << file;
  }
  // One salt file for two runs: the SEG names the de-identified series' new study.
  const std::string salt = TestTmp("salt.key");
  std::ofstream(salt) << "a secret of this job";
  const std::string salted_seg = TestTmp("seg_salted") + "/labels.dcm";
  const std::string salted_dir = TestTmp("series_salted") + "/";
  r = RunTessera({"convert", "--to", "seg", "--deidentify", "--deidentify-salt-file", salt, "--reference", ref, nii,
                  salted_seg});
  ASSERT_EQ(r.code, 0) << r.err;
  r = RunTessera({"convert", "--deidentify", "--deidentify-salt-file", salt, "--reference", ref, nii, salted_dir});
  ASSERT_EQ(r.code, 0) << r.err;
  auto salted_series = dicom::ReadDicomSeries({salted_dir});
  ASSERT_TRUE(salted_series.ok()) << salted_series.status();
  const std::string new_study = salted_series->info.study_instance_uid;
  EXPECT_NE(new_study, ct->info.study_instance_uid);
  {
    std::ifstream in(salted_seg, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NE(bytes.find(new_study), std::string::npos) << "the SEG is not in study " << new_study;
  }
  // --deidentify is for DICOM outputs only; a SEG needs integer labels.
  r = RunTessera({"convert", "--deidentify", ref, TestTmp("plain.nii")});
  EXPECT_EQ(r.code, 2);
  r = RunTessera({"convert", "--to", "seg", ref, TestTmp("ct_as_seg.dcm")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("[0, 2^31)"), std::string::npos) << r.err;
}

// `tessera register` reads a DICOM series wherever it reads a NIfTI path: the
// series registered to its own NIfTI conversion gives the identity.
TEST_F(DicomCliTest, RegisterFromDicom) {
  const std::string nii = TestTmp("mr_moving.nii.gz");
  testing::CliResult r = RunTessera({"convert", data_ + "/mr-series-adc-prostate", nii});
  ASSERT_EQ(r.code, 0) << r.err;
  char real[PATH_MAX];
  ASSERT_NE(realpath((data_ + "/mr-series-adc-prostate").c_str(), real), nullptr);
  const std::string out = TestTmp("reg_out");
  r = RunTessera({"register", "--fixed", real, "--moving", nii, "--stages", "rigid", "--scales", "4,2", "--out", out,
                  "--device", "cpu"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"affine_ras\":[1,0,0,"), std::string::npos) << r.out;
  auto warped = ReadNifti(out + "/warped.nii.gz");
  ASSERT_TRUE(warped.ok()) << warped.status();
  EXPECT_EQ(warped->data.shape(), (Shape{256, 256, 20}));
}

}  // namespace
}  // namespace tessera::cli
