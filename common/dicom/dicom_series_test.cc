// ReadDicomSeries on the real series of ../shared/data/dicom (skipped when
// absent): sorting, single- vs multi-frame, series selection, zips, bad input
// (non-DICOM, truncated, no pixel data) and truncations of one real slice.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/dicom/dicom_series.h"
#include "common/dicom/dicom_test_data.h"
#include "common/dicom/test_zip.h"
#include "common/dicom/zip_reader.h"

#include <zlib.h>

namespace tessera::dicom {
namespace {

std::string Tmp(const std::string& name) {
  const char* t = std::getenv("TEST_TMPDIR");
  return absl::StrCat(t ? t : "/tmp", "/", name);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

class DicomSeriesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = DicomTestDataDir();
    if (data_.empty()) GTEST_SKIP() << "no ../shared/data/dicom (set TESSERA_DICOM_DATA)";
  }
  std::string data_;
};

TEST_F(DicomSeriesTest, CtPhantomGeometryAndValues) {
  auto s = ReadDicomSeries({data_ + "/ct-series-philips-phantom"});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->volume.data.shape(), (Shape{512, 512, 10}));
  EXPECT_EQ(s->volume.data.dtype(), DType::kInt16);  // slope 1, intercept -1024
  EXPECT_NEAR(s->volume.geometry.spacing[2], 5.0, 1e-6);
  EXPECT_EQ(s->info.modality, "CT");
  EXPECT_EQ(s->info.num_files, 10);
  EXPECT_EQ(s->volume.geometry.AxisCodes(), "LAS");
  // Files in slice order (I10 ... I100 by position, not by name).
  ASSERT_EQ(s->info.files.size(), 10u);
}

TEST_F(DicomSeriesTest, PeekModalityReadsOneHeader) {
  EXPECT_EQ(PeekDicomModality(data_ + "/ct-series-philips-phantom"), "CT");
  EXPECT_EQ(PeekDicomModality(data_ + "/ct-series-philips-phantom/I10.dcm"), "CT");
  EXPECT_EQ(PeekDicomModality(data_ + "/mr-series-adc-prostate"), "MR");
  EXPECT_EQ(PeekDicomModality(data_ + "/no-such-series"), "");
  EXPECT_EQ(PeekDicomModality(data_ + "/SOURCES.txt"), "");
}

TEST_F(DicomSeriesTest, ShuffledNamesSortAlongTheNormal) {
  auto dir = ReadDicomSeries({data_ + "/mr-series-adc-prostate"});
  ASSERT_TRUE(dir.ok()) << dir.status();
  // The same files given in reverse name order give the same volume.
  std::vector<std::string> files;
  for (int i = 19; i >= 0; --i) files.push_back(absl::StrCat(data_, "/mr-series-adc-prostate/0000", i < 10 ? "0" : "", i, ".dcm"));
  auto list = ReadDicomSeries(files);
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(dir->volume.data.nbytes(), list->volume.data.nbytes());
  EXPECT_EQ(0, std::memcmp(dir->volume.data.raw_data(), list->volume.data.raw_data(), dir->volume.data.nbytes()));
  EXPECT_EQ(dir->info.files, list->info.files);
  // Sorted order is not name order.
  std::vector<std::string> sorted = dir->info.files;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(sorted, dir->info.files);
}

TEST_F(DicomSeriesTest, MultiFrameEqualsSingleFrame) {
  auto single = ReadDicomSeries({data_ + "/known-geometry-24x38x3/image"});
  auto multi = ReadDicomSeries({data_ + "/known-geometry-24x38x3/multiframe"});
  ASSERT_TRUE(single.ok()) << single.status();
  ASSERT_TRUE(multi.ok()) << multi.status();
  EXPECT_EQ(single->volume.data.shape(), multi->volume.data.shape());
  EXPECT_EQ(single->volume.data.dtype(), multi->volume.data.dtype());
  ASSERT_EQ(single->volume.data.nbytes(), multi->volume.data.nbytes());
  EXPECT_EQ(0, std::memcmp(single->volume.data.raw_data(), multi->volume.data.raw_data(), single->volume.data.nbytes()));
  const Mat4 a = single->volume.geometry.IndexToWorld(), b = multi->volume.geometry.IndexToWorld();
  for (int q = 0; q < 16; ++q) EXPECT_NEAR(a[q], b[q], 1e-6) << q;
}

TEST_F(DicomSeriesTest, MixedSeriesRefusedUnlessSelected) {
  const std::vector<std::string> both = {data_ + "/pet/pet-acrin-flt-breast-1.dcm", data_ + "/pet/pet-acrin-flt-breast-2.dcm"};
  auto mixed = ReadDicomSeries(both);
  ASSERT_FALSE(mixed.ok());
  EXPECT_EQ(mixed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(mixed.status().message().find("2 series"), std::string::npos) << mixed.status();
  EXPECT_NE(mixed.status().message().find("(1 files)"), std::string::npos) << mixed.status();
  DicomReadOptions o;
  o.series = "2";
  auto second = ReadDicomSeries(both, o);
  ASSERT_TRUE(second.ok()) << second.status();
  auto alone = ReadDicomSeries({both[0]});
  ASSERT_TRUE(alone.ok());
  o.series = alone->info.series_instance_uid;
  auto by_uid = ReadDicomSeries(both, o);
  ASSERT_TRUE(by_uid.ok()) << by_uid.status();
  EXPECT_EQ(by_uid->info.series_instance_uid, alone->info.series_instance_uid);
  o.series = "7";
  EXPECT_EQ(ReadDicomSeries(both, o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(DicomSeriesTest, GantryTiltRefusedWithTheAngle) {
  auto s = ReadDicomSeries({data_ + "/ct-series-ge-gantry-tilt"});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("gantry tilt"), std::string::npos) << s.status();
  EXPECT_NE(s.status().message().find("18.5"), std::string::npos) << s.status();
}

TEST_F(DicomSeriesTest, MissingSliceRefused) {
  std::vector<std::string> files;
  for (int i : {10, 20, 30, 50, 60}) files.push_back(absl::StrCat(data_, "/ct-series-philips-phantom/I", i, ".dcm"));
  auto s = ReadDicomSeries(files);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("missing slices"), std::string::npos) << s.status();
}

void WriteZip(const std::string& zip, const std::vector<std::pair<std::string, std::string>>& files) {
  const std::string bytes = ZipBytes(files);
  ASSERT_FALSE(bytes.empty());
  WriteAll(zip, bytes);
}

TEST_F(DicomSeriesTest, ZipOfASeries) {
  const std::string zip = Tmp("ct.zip");
  std::vector<std::pair<std::string, std::string>> members = {{"series/", ""}, {"series/LICENSE.txt", "text"}};
  for (int i = 10; i <= 100; i += 10) {
    members.push_back({absl::StrCat("series/I", i, ".dcm"),
                       ReadAll(absl::StrCat(data_, "/ct-series-philips-phantom/I", i, ".dcm"))});
  }
  WriteZip(zip, members);
  ASSERT_TRUE(LooksLikeZip(zip));
  auto from_zip = ReadDicomSeries({zip});
  ASSERT_TRUE(from_zip.ok()) << from_zip.status();
  auto from_dir = ReadDicomSeries({data_ + "/ct-series-philips-phantom"});
  ASSERT_TRUE(from_dir.ok());
  ASSERT_EQ(from_zip->volume.data.nbytes(), from_dir->volume.data.nbytes());
  EXPECT_EQ(0, std::memcmp(from_zip->volume.data.raw_data(), from_dir->volume.data.raw_data(), from_dir->volume.data.nbytes()));
  EXPECT_EQ(from_zip->info.num_files, 10);
}

TEST_F(DicomSeriesTest, ByteLimit) {
  DicomReadOptions o;
  o.max_bytes = 3 << 20;  // the CT phantom's 10 files hold ~5.2 MB
  auto s = ReadDicomSeries({data_ + "/ct-series-philips-phantom"}, o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kResourceExhausted) << s.status();
  o.max_bytes = 8 << 20;
  EXPECT_TRUE(ReadDicomSeries({data_ + "/ct-series-philips-phantom"}, o).ok());
}

TEST_F(DicomSeriesTest, BadInputNamesTheFile) {
  const std::string text = Tmp("notes.txt");
  WriteAll(text, "this is not DICOM\n");
  auto s = ReadDicomSeries({text});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(text), std::string::npos) << s.status();

  const std::string slice = ReadAll(data_ + "/ct-series-philips-phantom/I10.dcm");
  const std::string truncated = Tmp("truncated.dcm");
  WriteAll(truncated, slice.substr(0, slice.size() / 2));
  s = ReadDicomSeries({truncated});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(truncated), std::string::npos) << s.status();

  // A directory of only non-DICOM files.
  const std::string empty_dir = Tmp("no_dicom");
  std::system(absl::StrCat("mkdir -p '", empty_dir, "'").c_str());
  WriteAll(empty_dir + "/a.txt", "x");
  s = ReadDicomSeries({empty_dir});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);

  EXPECT_EQ(ReadDicomSeries({Tmp("does-not-exist")}).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(DicomSeriesTest, NoPixelDataNamesTheFile) {
  // The known-geometry SEG's source directory has a DICOM SEG; use a slice
  // with its pixel data element cut off instead: everything before (7FE0,0010).
  const std::string slice = ReadAll(data_ + "/ct-series-philips-phantom/I10.dcm");
  const std::string tag("\xE0\x7F\x10\x00", 4);
  const size_t at = slice.rfind(tag);
  ASSERT_NE(at, std::string::npos);
  const std::string path = Tmp("no_pixels.dcm");
  WriteAll(path, slice.substr(0, at));
  auto s = ReadDicomSeries({path});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(path), std::string::npos) << s.status();
  EXPECT_NE(s.status().message().find("pixel data"), std::string::npos) << s.status();
}

// Every truncation of a real slice's header region, and a sample of the rest:
// an error naming the file or a volume, never a crash.
TEST_F(DicomSeriesTest, TruncationsNeverCrash) {
  const std::string slice = ReadAll(data_ + "/mr-series-adc-prostate/000000.dcm");
  ASSERT_GT(slice.size(), 2000u);
  const std::string path = Tmp("cut.dcm");
  int refused = 0, read = 0;
  for (size_t len = 0; len < slice.size(); len += (len < 2048 ? 1 : 997)) {
    WriteAll(path, slice.substr(0, len));
    auto s = ReadDicomSeries({path});
    if (s.ok()) {
      ++read;
    } else {
      ++refused;
      EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << len << ": " << s.status();
      EXPECT_NE(s.status().message().find(path), std::string::npos) << len << ": " << s.status();
    }
  }
  std::printf("truncations: %d refused, %d read\n", refused, read);
  EXPECT_EQ(read, 0);
  // Byte flips in the header region.
  for (size_t at = 0; at < 1500 && at < slice.size(); at += 3) {
    std::string bad = slice;
    bad[at] = static_cast<char>(bad[at] ^ 0xA5);
    WriteAll(path, bad);
    (void)ReadDicomSeries({path});  // any answer but a crash
  }
}

}  // namespace
}  // namespace tessera::dicom
