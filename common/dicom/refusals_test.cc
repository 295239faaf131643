// Each refusal names its reason: copies of the known-geometry series edited
// with DCMTK (one slice re-oriented, moved, duplicated, or replaced by an
// image of another size in the same series).
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/dicom/dicom_series.h"
#include "common/dicom/dicom_test_data.h"

namespace tessera::dicom {
namespace {

class RefusalsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = DicomTestDataDir();
    if (data_.empty()) GTEST_SKIP() << "no ../shared/data/dicom (set TESSERA_DICOM_DATA)";
    auto s = ReadDicomSeries({data_ + "/known-geometry-24x38x3/image"});
    ASSERT_TRUE(s.ok()) << s.status();
    files_ = s->info.files;  // in slice order
    ASSERT_EQ(files_.size(), 3u);
    series_uid_ = s->info.series_instance_uid;
  }

  // Copies the series into a fresh directory, applying `edit` to slice `k`.
  std::string EditedCopy(const std::string& name, int k, const std::function<void(DcmDataset*)>& edit) {
    const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
    EXPECT_EQ(std::system(absl::StrCat("rm -rf '", dir, "' && mkdir -p '", dir, "'").c_str()), 0);
    for (int i = 0; i < static_cast<int>(files_.size()); ++i) {
      DcmFileFormat ff;
      EXPECT_TRUE(ff.loadFile(files_[i].c_str()).good());
      if (i == k) edit(ff.getDataset());
      EXPECT_TRUE(ff.saveFile(absl::StrCat(dir, "/", i, ".dcm").c_str(), EXS_LittleEndianExplicit).good());
    }
    return dir;
  }

  std::string Refusal(const std::string& dir) {
    auto s = ReadDicomSeries({dir});
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(s.status().message());
  }

  std::string data_, series_uid_;
  std::vector<std::string> files_;
};

TEST_F(RefusalsTest, MultipleOrientations) {
  const std::string dir = EditedCopy("orient", 1, [](DcmDataset* ds) {
    ds->putAndInsertString(DCM_ImageOrientationPatient, "0\\1\\0\\0\\0\\-1");
  });
  const std::string why = Refusal(dir);
  EXPECT_NE(why.find("multiple orientations"), std::string::npos) << why;
}

TEST_F(RefusalsTest, UnevenSpacing) {
  const std::string dir = EditedCopy("uneven", 1, [](DcmDataset* ds) {
    OFString ipp;
    ds->findAndGetOFStringArray(DCM_ImagePositionPatient, ipp);
    double x, y, z;
    ASSERT_EQ(std::sscanf(ipp.c_str(), "%lf\\%lf\\%lf", &x, &y, &z), 3);
    ds->putAndInsertString(DCM_ImagePositionPatient, absl::StrCat(x, "\\", y, "\\", z + 0.7).c_str());
  });
  const std::string why = Refusal(dir);
  EXPECT_NE(why.find("uneven slice spacing"), std::string::npos) << why;
  EXPECT_NE(why.find("3.2, 1.8"), std::string::npos) << why;
}

TEST_F(RefusalsTest, DuplicatePositions) {
  DcmFileFormat first;
  ASSERT_TRUE(first.loadFile(files_[0].c_str()).good());
  OFString ipp0;
  first.getDataset()->findAndGetOFStringArray(DCM_ImagePositionPatient, ipp0);
  const std::string dir = EditedCopy("dup", 1, [&](DcmDataset* ds) {
    ds->putAndInsertString(DCM_ImagePositionPatient, ipp0.c_str());
  });
  const std::string why = Refusal(dir);
  EXPECT_NE(why.find("duplicate slice positions"), std::string::npos) << why;
}

TEST_F(RefusalsTest, InconsistentDimensions) {
  const std::string dir = EditedCopy("dims", 2, [](DcmDataset* ds) {
    // Half the rows (and the pixel data cut to match).
    Uint16 rows = 0, cols = 0;
    ds->findAndGetUint16(DCM_Rows, rows);
    ds->findAndGetUint16(DCM_Columns, cols);
    const Uint16* pixels = nullptr;
    ASSERT_TRUE(ds->findAndGetUint16Array(DCM_PixelData, pixels).good());
    std::vector<Uint16> half(pixels, pixels + static_cast<size_t>(rows / 2) * cols);
    ds->putAndInsertUint16(DCM_Rows, rows / 2);
    ds->putAndInsertUint16Array(DCM_PixelData, half.data(), half.size());
  });
  const std::string why = Refusal(dir);
  EXPECT_NE(why.find("inconsistent dimensions"), std::string::npos) << why;
}

TEST_F(RefusalsTest, TwoSlicesAreNeverMissingOne) {
  const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/gap");
  ASSERT_EQ(std::system(absl::StrCat("rm -rf '", dir, "' && mkdir -p '", dir, "' && cp '", files_[0], "' '",
                                     files_[2], "' '", dir, "/'").c_str()),
            0);
  // Two slices 5 mm apart read as a 2-slice volume (nothing to compare the gap
  // with); the CT phantom case in dicom_series_test covers a hole in a run.
  auto s = ReadDicomSeries({dir});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_NEAR(s->volume.geometry.spacing[2], 5.0, 1e-6);
}

}  // namespace
}  // namespace tessera::dicom
