// Our DICOM reader beside Debian's dcm2niix (the reference converter) on
// every series of ../shared/data/dicom: the same voxels and the same affine
// (its NIfTI sform, read back with our NIfTI reader) within 1e-3 mm. Skipped
// when dcm2niix is not on PATH or the data is absent.
#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/dicom/dicom_series.h"
#include "common/dicom/dicom_test_data.h"
#include "common/nifti_io.h"

namespace tessera::dicom {
namespace {

bool HaveDcm2niix() { return std::system("command -v dcm2niix >/dev/null 2>&1") == 0; }

std::string TmpDir(const std::string& name) {
  const char* t = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(t ? t : "/tmp", "/", name);
  std::system(absl::StrCat("rm -rf '", dir, "' && mkdir -p '", dir, "'").c_str());
  return dir;
}

// Every voxel as a double (NDArray::AsType), for comparing volumes of any type.
std::vector<double> Values(const NDArray& a) {
  absl::StatusOr<NDArray> d = a.AsType(DType::kFloat64);
  if (!d.ok()) return std::vector<double>(a.num_elements(), NAN);
  return std::vector<double>(d->data<double>(), d->data<double>() + d->num_elements());
}

struct Case {
  std::string name;
  std::vector<std::string> files;  // relative to the data dir: copied for dcm2niix, read by us
  std::string dir;                 // or a whole directory (read by us as a directory)
};

// Converts with dcm2niix; the path of its single NIfTI output.
std::string RunDcm2niix(const std::string& in_dir, const std::string& name) {
  const std::string out = TmpDir("out_" + name);
  const std::string cmd = absl::StrCat("dcm2niix -z n -b n -f out -o '", out, "' '", in_dir, "' > '", out,
                                       ".log' 2>&1");
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return out + "/out.nii";
}

void Compare(const Case& c, const std::string& data) {
  SCOPED_TRACE(c.name);
  std::string in_dir;
  std::vector<std::string> ours;
  if (!c.dir.empty()) {
    in_dir = data + "/" + c.dir;
    ours = {in_dir};
  } else {
    in_dir = TmpDir("in_" + c.name);
    for (const std::string& f : c.files) {
      const std::string path = f[0] == '/' ? f : data + "/" + f;
      ASSERT_EQ(std::system(absl::StrCat("cp '", path, "' '", in_dir, "/'").c_str()), 0);
      ours.push_back(path);
    }
  }
  const std::string nii = RunDcm2niix(in_dir, c.name);
  auto ref = ReadNifti(nii);
  ASSERT_TRUE(ref.ok()) << ref.status();
  auto got = ReadDicomSeries(ours);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->volume.data.shape(), ref->data.shape());
  double max_diff = 0, max_rel = 0;
  const std::vector<double> got_values = Values(got->volume.data), ref_values = Values(ref->data);
  for (int64_t i = 0; i < ref->data.num_elements(); ++i) {
    const double a = got_values[i], b = ref_values[i];
    max_diff = std::max(max_diff, std::abs(a - b));
    max_rel = std::max(max_rel, std::abs(a - b) / std::max(1.0, std::abs(b)));
  }
  const Mat4 ma = got->volume.geometry.IndexToWorld(), mb = ref->geometry.IndexToWorld();
  double affine_diff = 0;
  for (int q = 0; q < 12; ++q) affine_diff = std::max(affine_diff, std::abs(ma[q] - mb[q]));
  std::printf("DCM2NIIX %s: %s ours %s, dcm2niix %s; max voxel diff %g (relative %g); max affine diff %g mm; %s\n",
              c.name.c_str(), ShapeToString(ref->data.shape()).c_str(),
              std::string(DTypeName(got->volume.data.dtype())).c_str(),
              std::string(DTypeName(ref->data.dtype())).c_str(), max_diff, max_rel, affine_diff,
              got->volume.geometry.AxisCodes().c_str());
  // Integer data equal; rescaled (float) data to float32 rounding of the slope.
  EXPECT_LE(max_rel, 1e-5);
  EXPECT_LE(affine_diff, 1e-3);
}

class Dcm2niixCompareTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = DicomTestDataDir();
    if (data_.empty()) GTEST_SKIP() << "no ../shared/data/dicom (set TESSERA_DICOM_DATA)";
    if (!HaveDcm2niix()) GTEST_SKIP() << "dcm2niix is not on PATH (apt-get install dcm2niix)";
  }
  std::string data_;
};

TEST_F(Dcm2niixCompareTest, CtPhilipsPhantom) { Compare({"ct-philips", {}, "ct-series-philips-phantom"}, data_); }
TEST_F(Dcm2niixCompareTest, MrAdcProstateShuffledNames) {
  Compare({"mr-adc", {}, "mr-series-adc-prostate"}, data_);
}
TEST_F(Dcm2niixCompareTest, KnownGeometrySingleFrame) {
  Compare({"kg-image", {}, "known-geometry-24x38x3/image"}, data_);
}
TEST_F(Dcm2niixCompareTest, KnownGeometryMultiFrame) {
  Compare({"kg-multiframe", {}, "known-geometry-24x38x3/multiframe"}, data_);
}
TEST_F(Dcm2niixCompareTest, EnhancedCtTwoFrames) {
  Compare({"enhanced-ct", {"multiframe/enhanced-ct-CT0012-2frames.dcm"}, ""}, data_);
}
TEST_F(Dcm2niixCompareTest, PetSlices) {
  Compare({"pet-1", {"pet/pet-acrin-flt-breast-1.dcm"}, ""}, data_);
  Compare({"pet-2", {"pet/pet-acrin-flt-breast-2.dcm"}, ""}, data_);
}

TEST_F(Dcm2niixCompareTest, GantryTiltIsRefused) {
  auto got = ReadDicomSeries({data_ + "/ct-series-ge-gantry-tilt"});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(got.status().message().find("tilt"), std::string::npos) << got.status();
  std::printf("DCM2NIIX gantry tilt: %s\n", std::string(got.status().message()).c_str());
}

// Debian's python3-pydicom test files: its CT and MR slices, the MR slice in
// several transfer syntaxes, and a truncated one (skipped without the package).
constexpr char kPydicomFiles[] = "/usr/lib/python3/dist-packages/pydicom/data/test_files";

TEST_F(Dcm2niixCompareTest, PydicomCtAndMr) {
  const std::string dir = kPydicomFiles;
  struct stat st;
  if (stat((dir + "/CT_small.dcm").c_str(), &st) != 0) GTEST_SKIP() << "no python3-pydicom test files in " << dir;
  for (const char* name : {"CT_small.dcm", "MR_small.dcm", "MR_small_implicit.dcm", "MR_small_bigendian.dcm",
                           "MR_small_expb.dcm", "MR_small_RLE.dcm"}) {
    Compare({absl::StrCat("pydicom-", name), {dir + "/" + name}, ""}, data_);
  }
  // The same MR slice in every transfer syntax gives the same volume (JPEG-LS
  // only here: Debian's dcm2niix has no JPEG-LS decoder).
  auto plain = ReadDicomSeries({dir + "/MR_small.dcm"});
  ASSERT_TRUE(plain.ok()) << plain.status();
  for (const char* name : {"MR_small_implicit.dcm", "MR_small_bigendian.dcm", "MR_small_RLE.dcm",
                           "MR_small_jpeg_ls_lossless.dcm"}) {
    auto other = ReadDicomSeries({dir + "/" + name});
    ASSERT_TRUE(other.ok()) << name << ": " << other.status();
    ASSERT_EQ(other->volume.data.nbytes(), plain->volume.data.nbytes()) << name;
    EXPECT_EQ(0, std::memcmp(other->volume.data.raw_data(), plain->volume.data.raw_data(), plain->volume.data.nbytes()))
        << name;
  }
  auto truncated = ReadDicomSeries({dir + "/MR_truncated.dcm"});
  ASSERT_FALSE(truncated.ok());
  EXPECT_EQ(truncated.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(truncated.status().message().find("MR_truncated.dcm"), std::string::npos) << truncated.status();
  // JPEG 2000: DCMTK has no decoder; refused naming the transfer syntax.
  auto j2k = ReadDicomSeries({dir + "/MR_small_jp2klossless.dcm"});
  ASSERT_FALSE(j2k.ok());
  EXPECT_NE(j2k.status().message().find("JPEG 2000"), std::string::npos) << j2k.status();
  std::printf("DCM2NIIX jpeg2000: %s\n", std::string(j2k.status().message()).c_str());
}

}  // namespace
}  // namespace tessera::dicom
