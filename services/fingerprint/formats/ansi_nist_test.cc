// The ANSI/NIST-ITL reader on NIST's reference transactions (shared data:
// skipped with a reason when absent) and on synthetic ones written here:
// round trips, the typed views, and the errors malformed files get.
#include "services/fingerprint/formats/ansi_nist.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "services/fingerprint/formats/ansi_nist_testing.h"
#include "services/fingerprint/formats/ansi_nist_views.h"
#include "services/fingerprint/formats/fvc_data.h"
#include "services/fingerprint/image/image_decode.h"

namespace tessera {
namespace fingerprint {
namespace ansi_nist {
namespace {

using ansi_nist_testing::NistFiles;
using ansi_nist_testing::ReadBytes;
using ansi_nist_testing::Data;
using ansi_nist_testing::F;
using ansi_nist_testing::V;
using ansi_nist_testing::WithoutDerived;


// Type-1, Type-2, Type-9 (legacy and EFS), Type-14 (raw 4x3) and Type-4.
Transaction Synthetic() {
  Transaction t;
  Record r1{1, 0, {V(1, "0"), V(2, "0500"), F(3, {{"1", "0"}}), V(4, "CAR"), V(5, "20261206"), V(7, "DAI"),
                   V(8, "ORI"), V(9, "TCN-1"), V(11, "19.69"), V(12, "19.69")}};
  Record r2{2, 0, {V(1, "0"), V(2, "00"), V(3, "free text, with : colons"), F(18, {{"a", "b"}, {"c"}})}};
  Record r9{9, 1, {V(1, "0"), V(2, "01"), V(3, "0"), V(4, "S"), V(10, "2"), V(11, "0"),
                   F(12, {{"001", "00100020090", "10", "A", "002,03"}, {"002", "00300040180", "63", "B"}}),
                   F(300, {{"200", "300", "0", "0"}}), F(331, {{"10", "20", "90", "E"}, {"30", "40", "359", "B"}})}};
  Record r14{14, 1, {V(1, "0"), V(2, "01"), V(3, "1"), V(4, "SRC"), V(5, "20261206"), V(6, "4"), V(7, "3"),
                     V(8, "1"), V(9, "500"), V(10, "500"), V(11, "NONE"), V(12, "8"), F(13, {{"2"}, {"3"}}),
                     Data("abcdefghijkl")}};
  Record r4{4, 2, {V(1, "0"), V(2, "2"), V(3, "1"), F(4, {{"1", "255", "255", "255", "255", "255"}}),
                   V(5, "0"), V(6, "2"), V(7, "2"), V(8, "0"), Data("wxyz")}};
  t.records = {r1, r2, r9, r14, r4};
  return t;
}

TEST(AnsiNist, SyntheticRoundTrip) {
  const Transaction t = Synthetic();
  auto bytes = WriteTransaction(t);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto back = ParseTransaction(*bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->warnings.empty());
  EXPECT_EQ(WithoutDerived(*back), WithoutDerived(t));
  EXPECT_EQ(back->Version(), "0500");
  // A parsed transaction writes back byte for byte.
  auto again = WriteTransaction(*back);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *bytes);
  EXPECT_EQ(*ParseTransaction(*again), *back);
  EXPECT_EQ(back->records[0].Find(3)->subfields,
            (std::vector<Subfield>{{"1", "4"}, {"2", "00"}, {"9", "01"}, {"14", "01"}, {"4", "02"}}));

  auto images = Images(*back);
  ASSERT_TRUE(images.ok()) << images.status();
  ASSERT_EQ(images->size(), 2u);
  EXPECT_EQ((*images)[0].record_type, 14);
  EXPECT_EQ((*images)[0].positions, (std::vector<int>{2, 3}));
  EXPECT_EQ((*images)[0].ppi, 500);
  EXPECT_EQ((*images)[0].data, "abcdefghijkl");
  EXPECT_EQ((*images)[1].record_type, 4);
  EXPECT_EQ((*images)[1].positions, (std::vector<int>{1}));
  EXPECT_NEAR((*images)[1].ppi, 500.1, 0.1);  // NSR 19.69 px/mm

  auto minutiae = Minutiae(*back);
  ASSERT_TRUE(minutiae.ok()) << minutiae.status();
  ASSERT_EQ(minutiae->size(), 1u);
  const MinutiaeView& m = (*minutiae)[0];
  ASSERT_EQ(m.legacy.size(), 2u);
  EXPECT_EQ(m.legacy[0].x, 10);
  EXPECT_EQ(m.legacy[0].y, 20);
  EXPECT_EQ(m.legacy[0].theta, 90);
  EXPECT_EQ(m.legacy[0].ridge_counts, (std::vector<std::string>{"002,03"}));
  ASSERT_EQ(m.efs.size(), 2u);
  EXPECT_EQ(m.efs[1].theta, 359);
  EXPECT_EQ(m.roi_height, 300);
}

TEST(AnsiNist, MinutiaeUnitsToPixels) {
  // EFS: 10 um units at 500 ppi -> x_px = units * 500 / 2540; theta as is.
  Transaction t = Synthetic();
  auto m = Minutiae(t);
  ASSERT_TRUE(m.ok()) << m.status();
  TemplateOptions big;  // the synthetic image is 4x3: give a larger one
  big.image_width = 100;
  big.image_height = 100;
  auto efs = MinutiaeTemplate(t, (*m)[0], big);
  ASSERT_TRUE(efs.ok()) << efs.status();
  ASSERT_EQ(efs->minutiae.size(), 2u);
  EXPECT_EQ(efs->minutiae[0].x, 2);  // 10 * 500 / 2540 = 1.97
  EXPECT_EQ(efs->minutiae[0].y, 4);  // 20 -> 3.94
  EXPECT_NEAR(efs->minutiae[0].angle, M_PI / 2, 1e-9);
  EXPECT_EQ(efs->minutiae[0].type, MinutiaType::kEnding);
  // Legacy: y counted up from the bottom, direction turned by 180 degrees.
  MinutiaeView legacy = (*m)[0];
  legacy.has_efs = false;
  auto tpl = MinutiaeTemplate(t, legacy, big);
  ASSERT_TRUE(tpl.ok()) << tpl.status();
  const double ppmm = 500 / 25.4;
  const int h_units = static_cast<int>(std::lround(100 / ppmm * 100));
  EXPECT_EQ(tpl->minutiae[0].x, 2);
  EXPECT_EQ(tpl->minutiae[0].y, static_cast<int>(std::lround((h_units - 1 - 20) * ppmm / 100)));
  EXPECT_NEAR(tpl->minutiae[0].angle, 3 * M_PI / 2, 1e-9);
  EXPECT_EQ(tpl->minutiae[0].quality, 87);  // NIST quality 10 of 2 (best)..63
  EXPECT_EQ(tpl->minutiae[1].quality, 0);
}

// Writes `t` after `edit`, expecting `parse` to refuse it with `message`.
void ExpectRefused(const std::string& bytes, const std::string& message) {
  auto parsed = ParseTransaction(bytes);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(parsed.status().message(), message)) << parsed.status();
}

std::string Written(const Transaction& t) {
  auto bytes = WriteTransaction(t);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : "";
}

TEST(AnsiNist, MalformedFilesNameRecordAndField) {
  {
    Transaction t = Synthetic();
    t.records[3].fields[12] = F(13, {{"77"}});
    ExpectRefused(Written(t), "Type-14 record 4 (IDC 1): field 14.013 (FGP): '77' is not a finger position");
  }
  {
    Transaction t = Synthetic();
    t.records[3].fields.pop_back();  // no image
    ExpectRefused(Written(t), "Type-14 record 4 (IDC 1): field 14.999 (DATA): missing");
  }
  {
    Transaction t = Synthetic();
    t.records[2].fields[4] = V(10, "3");
    ExpectRefused(Written(t), "Type-9 record 3 (IDC 1): field 9.012 (MRC): lists 2 minutiae; 9.010 (MIN) says 3");
  }
  {
    Transaction t = Synthetic();
    t.records[3].fields[5] = V(6, "0");
    ExpectRefused(Written(t), "field 14.006 (HLL): '0' is not an image width");
  }
  {
    Transaction t = Synthetic();
    t.records[3].fields[11] = V(12, "16");  // 4x3x16 bits > 12 bytes
    ExpectRefused(Written(t), "field 14.999 (DATA): 12 bytes; an uncompressed 4x3 image of 16 bits needs 24");
  }
  const std::string good = Written(Synthetic());
  // Truncated: the last record's length overruns.
  ExpectRefused(good.substr(0, good.size() - 1), "Type-4 record 5 (IDC 2): field 4.001 (LEN): record length 22");
  // Cut between records.
  const size_t type4_at = good.size() - 22;
  ExpectRefused(good.substr(0, type4_at), "Type-4 record 5 (IDC 2): missing: the file ends after 4 records");
  ExpectRefused(good + "x", "1 bytes after the last record");
  {  // A CNT that lies about the IDC.
    std::string b = good;
    const size_t at = b.find("14\x1f" "01");
    b[at + 4] = '5';
    ExpectRefused(b, "Type-14 record 4 (IDC 5): field 14.002 (IDC): IDC 1 differs from 5 in entry 3 of 1.003 (CNT)");
  }
  {  // ... and about the type.
    std::string b = good;
    const size_t at = b.find("\x1e" "9\x1f" "01");
    b[at + 1] = '8';
    ExpectRefused(b, "Type-8 record 3 (IDC 1): field 8.001 (LEN)");
  }
  {  // ... and about the count.
    std::string b = good;
    const size_t at = b.find("1.003:1\x1f" "4");
    b[at + 8] = '5';
    ExpectRefused(b, "field 1.003 (CNT): says 5 records follow but lists 4");
  }
  {  // A LEN larger than the file, then one not ending at an FS.
    std::string b = good;
    const size_t at = b.find("2.001:");
    const size_t end = b.find('\x1d', at);
    ExpectRefused(b.substr(0, at + 6) + "999999" + b.substr(end), "Type-2 record 2 (IDC 0): field 2.001 (LEN): record length 999999 overruns");
    std::string c = b;
    c[at + 6] = static_cast<char>(c[at + 6] - 1);  // shorter by 10: lands inside a field
    ExpectRefused(c, "field 2.001 (LEN): the record of");
  }
  ExpectRefused("", "empty");
  ExpectRefused("garbage", "Type-1 record 1: at byte 0: no field tag");
  {  // A missing IDC field.
    Transaction t = Synthetic();
    t.records[1].fields.erase(t.records[1].fields.begin() + 1);
    EXPECT_FALSE(WriteTransaction(t).ok());
  }
  {  // Separators inside an item cannot be written.
    Transaction t = Synthetic();
    t.records[1].fields[2] = V(3, "a\x1e" "b");
    auto w = WriteTransaction(t);
    ASSERT_FALSE(w.ok());
    EXPECT_TRUE(absl::StrContains(w.status().message(), "Type-2 record 2 (IDC 0): field 2.003: item")) << w.status();
  }
}

struct Expected {
  int records;
  int images;
  std::vector<int> minutiae;  // per Type-9 record
};

TEST(AnsiNist, EveryNistFileParses) {
  const auto files = NistFiles();
  if (files.empty()) GTEST_SKIP() << "no NIST files under the fingerprint data dir (FindFingerprintDataDir)";
  // Counts read off the files (1.003, 9.010 / 9.331).
  const std::map<std::string, Expected> expected = {
      {"type-13-14-latent-match.an2", {4, 2, {}}},
      {"type-14-tip-eji-wsq.an2", {7, 5, {}}},
      {"type-14-tpcard-nqm.an2", {16, 14, {}}},
      {"type-9-13-std.an2", {4, 1, {48}}},
      {"type4-slaps.an2k", {6, 4, {}}},
      {"type9-13.an2k", {4, 1, {28}}},
      {"type9-efs.an2k", {9, 0, {60, 35, 68, 37, 54, 48, 53, 59}}},  // 9.331 subfields
      {"type9.an2k", {2, 0, {28}}},
  };
  int decoded = 0;
  for (const auto& [name, bytes] : files) {
    SCOPED_TRACE(name);
    auto t = ParseTransaction(bytes);
    ASSERT_TRUE(t.ok()) << t.status();
    for (const std::string& w : t->warnings) std::printf("%s: warning: %s\n", name.c_str(), w.c_str());
    auto images = Images(*t);
    ASSERT_TRUE(images.ok()) << images.status();
    auto minutiae = Minutiae(*t);
    ASSERT_TRUE(minutiae.ok()) << minutiae.status();
    std::vector<int> counts;
    for (const MinutiaeView& m : *minutiae) {
      counts.push_back(m.has_efs ? static_cast<int>(m.efs.size()) : static_cast<int>(m.legacy.size()));
      if (m.has_legacy) {
        EXPECT_EQ(static_cast<int>(m.legacy.size()), m.declared_count);
      }
      auto tpl = MinutiaeTemplate(*t, m);
      if (tpl.ok()) {
        EXPECT_EQ(tpl->minutiae.size(), m.has_efs ? m.efs.size() : m.legacy.size());
      } else {
        EXPECT_EQ(tpl.status().code(), absl::StatusCode::kFailedPrecondition) << tpl.status();
      }
    }
    std::printf("%s: version %s, %zu records, %zu images, minutiae per Type-9:", name.c_str(),
                t->Version().c_str(), t->records.size(), images->size());
    for (int c : counts) std::printf(" %d", c);
    std::printf("\n");
    auto it = expected.find(name);
    if (it != expected.end()) {
      EXPECT_EQ(static_cast<int>(t->records.size()), it->second.records);
      EXPECT_EQ(static_cast<int>(images->size()), it->second.images);
      EXPECT_EQ(counts, it->second.minutiae);
    }
    // Images decode to the size their record states.
    for (const ImageView& img : *images) {
      SCOPED_TRACE(RecordName(img.record_type, img.record_index, img.idc));
      DecodeOptions options;
      if (img.compression == Compression::kNone) {
        options.format = ImageFormat::kRaw;
        options.raw_width = img.width;
        options.raw_height = img.height;
      } else if (img.compression != Compression::kWsq) {
        continue;
      }
      auto gray = DecodeGrayImage(img.data, options);
      ASSERT_TRUE(gray.ok()) << gray.status();
      EXPECT_EQ(gray->width, img.width);
      EXPECT_EQ(gray->height, img.height);
      ++decoded;
    }
    // Round trip: what the reader returns writes and reads back unchanged.
    auto written = WriteTransaction(*t);
    ASSERT_TRUE(written.ok()) << written.status();
    auto back = ParseTransaction(*written);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(WithoutDerived(*back), WithoutDerived(*t));
    if (t->warnings.empty()) {  // nothing was normalised: byte for byte
      EXPECT_EQ(*back, *t);
      EXPECT_TRUE(*written == bytes) << "not byte-identical";
    }
  }
  std::printf("%d images decoded\n", decoded);
}

}  // namespace
}  // namespace ansi_nist
}  // namespace fingerprint
}  // namespace tessera
