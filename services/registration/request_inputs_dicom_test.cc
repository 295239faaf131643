// A DICOM series directory (or a file of one) under the data roots is a
// registration input: it resolves (directories too) and reads as the volume
// ReadDicomSeries gives, equal to its NIfTI conversion.
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "common/dicom/dicom_series.h"
#include "common/dicom/dicom_test_data.h"
#include "common/nifti_io.h"
#include "services/registration/request_inputs.h"

namespace tessera::registration {
namespace {

TEST(RequestInputsDicomTest, SeriesDirectoryAsFixedImage) {
  const std::string data = dicom::DicomTestDataDir();
  if (data.empty()) GTEST_SKIP() << "no ../shared/data/dicom (set TESSERA_DICOM_DATA)";
  char real[PATH_MAX];
  ASSERT_NE(realpath(data.c_str(), real), nullptr);
  const std::string root = real;
  const int64_t limit = int64_t{1} << 30;

  auto fixed = ResolveVolumePath("mr-series-adc-prostate", "fixed", {root}, limit);
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  // The NIfTI conversion of the same series as the moving image.
  auto series = dicom::ReadDicomSeries({root + "/mr-series-adc-prostate"});
  ASSERT_TRUE(series.ok()) << series.status();
  const std::string nii = std::string(std::getenv("TEST_TMPDIR")) + "/mr.nii.gz";
  ASSERT_TRUE(WriteNifti(series->volume, nii).ok());
  auto moving = ResolveVolumePath(nii, "moving", {root, std::string(std::getenv("TEST_TMPDIR"))}, limit);
  if (!moving.ok()) {
    // TEST_TMPDIR may be a symlinked path: resolve it as a root.
    char tmp[PATH_MAX];
    ASSERT_NE(realpath(std::getenv("TEST_TMPDIR"), tmp), nullptr);
    moving = ResolveVolumePath(nii, "moving", {root, tmp}, limit);
  }
  ASSERT_TRUE(moving.ok()) << moving.status();

  RequestInputs inputs;
  inputs.fixed = *fixed;
  inputs.moving = *moving;
  auto in = MaterializeInputs(inputs, limit);
  ASSERT_TRUE(in.ok()) << in.status();
  ASSERT_EQ(in->fixed.data.shape(), in->moving.data.shape());
  ASSERT_EQ(in->fixed.data.dtype(), in->moving.data.dtype());
  EXPECT_EQ(0, std::memcmp(in->fixed.data.raw_data(), in->moving.data.raw_data(), in->fixed.data.nbytes()));
  const Mat4 a = in->fixed.geometry.IndexToWorld(), b = in->moving.geometry.IndexToWorld();
  for (int q = 0; q < 12; ++q) EXPECT_NEAR(a[q], b[q], 1e-3) << q;

  // One DICOM file of a single-file series works too; a refused series names the input.
  auto one = ResolveVolumePath("multiframe/enhanced-ct-CT0012-2frames.dcm", "fixed", {root}, limit);
  ASSERT_TRUE(one.ok()) << one.status();
  inputs.fixed = *one;
  inputs.moving = *one;
  EXPECT_TRUE(MaterializeInputs(inputs, limit).ok());
  auto tilted = ResolveVolumePath("ct-series-ge-gantry-tilt", "fixed", {root}, limit);
  ASSERT_TRUE(tilted.ok()) << tilted.status();
  inputs.fixed = *tilted;
  auto refused = MaterializeInputs(inputs, limit);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("fixed"), std::string::npos) << refused.status();
  EXPECT_NE(refused.status().message().find("gantry tilt"), std::string::npos) << refused.status();
  // A directory outside the roots stays denied.
  EXPECT_EQ(ResolveVolumePath("/usr", "fixed", {root}, limit).status().code(), absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace tessera::registration
