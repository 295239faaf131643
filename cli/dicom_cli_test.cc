// `tessera describe` and `tessera convert` on the DICOM series of
// ../shared/data/dicom: the description names the series, the NIfTI written
// reads back as the same volume and affine as ReadDicomSeries gives.
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
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
