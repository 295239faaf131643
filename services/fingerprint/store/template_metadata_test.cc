#include "services/fingerprint/store/template_metadata.h"

#include <string>

#include "gtest/gtest.h"

namespace tessera {
namespace fingerprint {
namespace {

TemplateMetadata Full() {
  TemplateMetadata m;
  m.subject_id = "subject-42";
  m.finger_position = 7;
  m.impression_type = 1;
  m.capture_date = "2024-02-29";
  m.source_tcn = "TCN-2024-0001";
  m.attributes = {{"agency", "NIST"}, {"case", "A-17"}};
  return m;
}

TEST(TemplateMetadataTest, BlockRoundTrips) {
  const TemplateMetadata m = Full();
  ASSERT_TRUE(ValidateTemplateMetadata(m).ok());
  std::string block = "prefix";
  AppendMetadataBlock(m, &block);
  size_t pos = 6;
  TemplateMetadata back;
  ASSERT_TRUE(ReadMetadataBlock(block, &pos, &back));
  EXPECT_EQ(pos, block.size());
  EXPECT_EQ(back, m);
}

TEST(TemplateMetadataTest, CutBlockIsMalformed) {
  std::string block;
  AppendMetadataBlock(Full(), &block);
  for (size_t n = 0; n < block.size(); ++n) {
    size_t pos = 0;
    TemplateMetadata back;
    EXPECT_FALSE(ReadMetadataBlock(block.substr(0, n), &pos, &back)) << n;
  }
  block[0] = 9;  // an unknown block version
  size_t pos = 0;
  TemplateMetadata back;
  EXPECT_FALSE(ReadMetadataBlock(block, &pos, &back));
}

TEST(TemplateMetadataTest, RefusesBadFields) {
  auto refused = [](TemplateMetadata m, const std::string& needle) {
    const absl::Status s = ValidateTemplateMetadata(m);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << needle;
    EXPECT_NE(std::string(s.message()).find(needle), std::string::npos) << s;
  };
  TemplateMetadata m = Full();
  m.subject_id = std::string(300, 'a');
  refused(m, "subject id");
  m = Full();
  m.subject_id = "a\nb";
  refused(m, "subject id");
  m = Full();
  m.finger_position = 256;
  refused(m, "finger position");
  m = Full();
  m.impression_type = -2;
  refused(m, "impression type");
  m = Full();
  m.capture_date = "2023-02-29";  // not a leap year
  refused(m, "capture date");
  m = Full();
  m.capture_date = "20240229";  // must be normalized first
  refused(m, "YYYY-MM-DD");
  m = Full();
  m.attributes = {{"b", "1"}, {"a", "2"}};
  refused(m, "out of order");
  m = Full();
  m.attributes = {{"", "1"}};
  refused(m, "empty");
  m = Full();
  m.attributes.assign(33, {"k", "v"});
  refused(m, "at most 32");
}

TEST(TemplateMetadataTest, NormalizesDatesAndAttributes) {
  std::string out;
  ASSERT_TRUE(NormalizeCaptureDate("20240229", &out).ok());
  EXPECT_EQ(out, "2024-02-29");
  ASSERT_TRUE(NormalizeCaptureDate("1999-12-31", &out).ok());
  EXPECT_EQ(out, "1999-12-31");
  EXPECT_FALSE(NormalizeCaptureDate("2024-13-01", &out).ok());
  EXPECT_FALSE(NormalizeCaptureDate("2024-1-01", &out).ok());
  EXPECT_FALSE(NormalizeCaptureDate("yesterday", &out).ok());
  std::vector<std::pair<std::string, std::string>> attrs = {{"z", "1"}, {"a", "2"}};
  ASSERT_TRUE(NormalizeAttributes(&attrs).ok());
  EXPECT_EQ(attrs.front().first, "a");
  attrs.push_back({"a", "3"});
  EXPECT_FALSE(NormalizeAttributes(&attrs).ok());
}

TEST(TemplateMetadataTest, FilterAcceptsAndKeys) {
  TemplateFilter f;
  EXPECT_TRUE(f.empty());
  EXPECT_TRUE(f.Accepts(Full()));
  f.finger_positions = {8, 7, 7};
  EXPECT_TRUE(f.Accepts(Full()));
  f.impression_types = {0};
  EXPECT_FALSE(f.Accepts(Full()));
  f.impression_types = {1, 0};
  EXPECT_TRUE(f.Accepts(Full()));
  EXPECT_EQ(f.Key(), "fgp=7,8;imp=0,1");
  f.finger_positions = {300};
  EXPECT_FALSE(ValidateTemplateFilter(f).ok());
  EXPECT_EQ(FingerPositionName(1), "right thumb");
  EXPECT_EQ(FingerPositionName(10), "left little");
  EXPECT_EQ(FingerPositionName(77), "FGP 77");
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
