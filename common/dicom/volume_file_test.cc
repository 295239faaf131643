// ReadVolumeFile: NIfTI and DICOM (directory, zip-less single file) paths give
// the same volume.
#include <cstdlib>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "common/dicom/dicom_series.h"
#include "common/dicom/dicom_test_data.h"
#include "common/dicom/volume_file.h"
#include "common/nifti_io.h"

namespace tessera {
namespace {

TEST(VolumeFileTest, NiftiAndDicomPaths) {
  const std::string data = dicom::DicomTestDataDir();
  if (data.empty()) GTEST_SKIP() << "no ../shared/data/dicom (set TESSERA_DICOM_DATA)";
  std::string format;
  auto from_dicom = ReadVolumeFile(data + "/known-geometry-24x38x3/image", &format);
  ASSERT_TRUE(from_dicom.ok()) << from_dicom.status();
  EXPECT_EQ(format, "DICOM");
  const std::string nii = std::string(std::getenv("TEST_TMPDIR")) + "/kg.nii.gz";
  ASSERT_TRUE(WriteNifti(*from_dicom, nii).ok());
  auto from_nifti = ReadVolumeFile(nii, &format);
  ASSERT_TRUE(from_nifti.ok()) << from_nifti.status();
  EXPECT_EQ(format, "NIfTI-1");
  ASSERT_EQ(from_nifti->data.shape(), from_dicom->data.shape());
  EXPECT_EQ(0, std::memcmp(from_nifti->data.raw_data(), from_dicom->data.raw_data(), from_dicom->data.nbytes()));
  auto one_file = ReadVolumeFile(data + "/multiframe/enhanced-ct-CT0012-2frames.dcm", &format);
  ASSERT_TRUE(one_file.ok()) << one_file.status();
  EXPECT_EQ(one_file->data.shape(), (Shape{512, 512, 2}));
  auto tilted = ReadVolumeFile(data + "/ct-series-ge-gantry-tilt");
  EXPECT_EQ(tilted.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera
