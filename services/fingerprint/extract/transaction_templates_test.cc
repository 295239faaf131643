// The fingers of ANSI/NIST-ITL transactions: a written card (raw Type-14
// images of synthetic prints, one of them with Type-9 markup, one slap) and,
// when the shared data is present, NIST's reference ten-print card and
// latent transactions.
#include "services/fingerprint/extract/transaction_templates.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "services/fingerprint/extract/synthetic_print.h"
#include "services/fingerprint/formats/ansi_nist.h"
#include "services/fingerprint/formats/ansi_nist_testing.h"
#include "services/fingerprint/formats/fvc_data.h"
#include "services/fingerprint/formats/template_io.h"

namespace tessera {
namespace fingerprint {
namespace {

using ansi_nist::Field;
using ansi_nist::Record;
using ansi_nist::Subfield;
using ansi_nist::Transaction;

using ansi_nist_testing::F;
using ansi_nist_testing::V;

// A Type-14 record of a synthetic print: raw 8-bit, 500 ppi, finger `fgp`.
Record PrintRecord(int idc, int fgp, uint32_t finger) {
  const GrayImage img = SyntheticPrint({.finger = finger});
  Field data;
  data.number = ansi_nist::kDataField;
  data.is_binary = true;
  data.binary.assign(img.pixels.begin(), img.pixels.end());
  return Record{14, idc, {V(1, "0"), V(2, std::to_string(idc)), V(3, "1"), V(4, "SRC"), V(5, "20261206"),
                          V(6, std::to_string(img.width)), V(7, std::to_string(img.height)), V(8, "1"),
                          V(9, "500"), V(10, "500"), V(11, "NONE"), V(12, "8"), F(13, {{std::to_string(fgp)}}), data}};
}

std::string Card() {
  Transaction t;
  t.records.push_back(Record{1, 0, {V(1, "0"), V(2, "0500"), F(3, {{"1", "4"}, {"2", "0"}, {"14", "1"}, {"14", "2"}, {"14", "3"}, {"9", "2"}}),
                                    V(4, "CAR"), V(5, "20261206"), V(7, "DAI"), V(8, "ORI"), V(9, "TCN-1"),
                                    V(11, "19.69"), V(12, "19.69")}});
  t.records.push_back(Record{2, 0, {V(1, "0"), V(2, "00")}});
  t.records.push_back(PrintRecord(1, 1, 21));
  t.records.push_back(PrintRecord(2, 2, 22));
  t.records.push_back(PrintRecord(3, 13, 23));  // a four-finger slap
  // Markup for IDC 2: three minutiae in EFS units (10 um) inside a ROI.
  t.records.push_back(Record{9, 2, {V(1, "0"), V(2, "2"), V(3, "1"), V(4, "S"), F(300, {{"1500", "1800", "0", "0"}}),
                                    F(331, {{"500", "600", "90", "E"}, {"800", "900", "180", "B"}, {"1000", "700", "45", "E"}})}});
  absl::StatusOr<std::string> bytes = ansi_nist::WriteTransaction(t);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : "";
}

TEST(TransactionTemplatesTest, ACardGivesOneTemplatePerFingerMarkupFirst) {
  const std::string card = Card();
  ASSERT_TRUE(LooksLikeTransaction(card));
  absl::StatusOr<std::vector<TransactionFinger>> fingers = TemplatesFromTransaction(card);
  ASSERT_TRUE(fingers.ok()) << fingers.status();
  ASSERT_EQ(fingers->size(), 3u);
  const TransactionFinger& thumb = (*fingers)[0];
  EXPECT_TRUE(thumb.status.ok()) << thumb.status;
  EXPECT_EQ(thumb.position, 1);
  EXPECT_EQ(thumb.source, "extracted");
  EXPECT_GT(thumb.quality, 0);
  EXPECT_GE(thumb.minutiae, 8);
  // The same pixels as an image give the same template.
  GrayImage img = SyntheticPrint({.finger = 21});
  ImageInput raw;
  raw.decode.format = ImageFormat::kRaw;
  raw.decode.raw_width = img.width;
  raw.decode.raw_height = img.height;
  raw.decode.ppi = 500;
  absl::StatusOr<ImageTemplate> direct =
      TemplateFromImage(std::string(img.pixels.begin(), img.pixels.end()), raw);
  ASSERT_TRUE(direct.ok()) << direct.status();
  // ... apart from the finger position and impression type the card gives.
  absl::StatusOr<std::vector<Template>> thumb_view = ParseTemplateRecordAs(TemplateFormat::kIso19794, thumb.record);
  ASSERT_TRUE(thumb_view.ok()) << thumb_view.status();
  EXPECT_EQ((*thumb_view)[0].finger_position, 1);
  EXPECT_EQ((*thumb_view)[0].impression_type, 1);
  raw.finger_position = 1;
  raw.impression_type = 1;
  direct = TemplateFromImage(std::string(img.pixels.begin(), img.pixels.end()), raw);
  ASSERT_TRUE(direct.ok()) << direct.status();
  EXPECT_EQ(thumb.record, direct->record);

  const TransactionFinger& index = (*fingers)[1];
  EXPECT_TRUE(index.status.ok()) << index.status;
  EXPECT_EQ(index.position, 2);
  EXPECT_EQ(index.source, "markup");
  EXPECT_EQ(index.minutiae, 3);
  absl::StatusOr<std::vector<Template>> views = ParseTemplateRecordAs(TemplateFormat::kIso19794, index.record);
  ASSERT_TRUE(views.ok()) << views.status();
  ASSERT_EQ((*views)[0].minutiae.size(), 3u);
  EXPECT_EQ((*views)[0].finger_position, 2);
  // EFS: (roi_x + x) * ppi / 2540 with ppi 500: (0 + 500) * 500 / 2540 = 98.4.
  EXPECT_NEAR((*views)[0].minutiae[0].x, 98, 1);

  const TransactionFinger& slap = (*fingers)[2];
  EXPECT_EQ(slap.position, 13);
  EXPECT_EQ(slap.status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(slap.status.message().find("segmentation"), absl::string_view::npos);
}

TEST(TransactionTemplatesTest, CardCarriesTheType1FieldsAndNamesItsFingers) {
  absl::StatusOr<TransactionCard> card = ReadTransactionCard(Card());
  ASSERT_TRUE(card.ok()) << card.status();
  EXPECT_EQ(card->tcn, "TCN-1");
  EXPECT_EQ(card->tot, "CAR");
  EXPECT_EQ(card->date, "2026-12-06");
  ASSERT_EQ(card->fingers.size(), 3u);
  EXPECT_EQ(FingerTemplateIds("s", card->fingers), (std::vector<std::string>{"s_1", "s_2", "s_13"}));
  // A finger twice (a latent and its exemplar) and an unknown position.
  std::vector<TransactionFinger> fingers(3);
  fingers[0].position = 8;
  fingers[0].idc = 1;
  fingers[1].position = 8;
  fingers[1].idc = 2;
  fingers[2].position = 0;
  fingers[2].idc = 5;
  EXPECT_EQ(FingerTemplateIds("x", fingers), (std::vector<std::string>{"x_8_idc1", "x_8_idc2", "x_idc5"}));
}

TEST(TransactionTemplatesTest, MalformedTransactionsAreInvalidArgument) {
  const std::string card = Card();
  EXPECT_EQ(TemplatesFromTransaction(card.substr(0, card.size() / 2)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TemplatesFromTransaction("1.001:garbage").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(LooksLikeTransaction(absl::string_view("FMR\0", 4)));
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(TransactionTemplatesTest, NistReferenceCardAndLatent) {
  absl::StatusOr<std::string> dir = FindFingerprintDataDir();
  if (!dir.ok()) GTEST_SKIP() << dir.status();
  const std::string nist = *dir + "/nist";
  if (!std::filesystem::exists(nist + "/ansi-nist-reference/type-14-tpcard-nqm.an2")) GTEST_SKIP() << "no NIST data";
  // The ten-print card: ten rolled fingers and the two plain thumbs (FGP 11,
  // 12) extracted, the two four-finger slaps (13, 14) listed as such.
  absl::StatusOr<std::vector<TransactionFinger>> card =
      TemplatesFromTransaction(ReadFile(nist + "/ansi-nist-reference/type-14-tpcard-nqm.an2"));
  ASSERT_TRUE(card.ok()) << card.status();
  int extracted = 0, slaps = 0;
  for (const TransactionFinger& f : *card) {
    if (f.status.ok()) {
      ++extracted;
      EXPECT_GE(f.position, 1);
      EXPECT_LE(f.position, 12);
      EXPECT_GE(f.minutiae, 10) << "FGP " << f.position;
    } else {
      EXPECT_EQ(f.status.code(), absl::StatusCode::kUnimplemented) << f.status;
      ++slaps;
    }
  }
  EXPECT_EQ(extracted, 12);
  EXPECT_EQ(slaps, 2);
  // The latent with its examiner's markup: the markup is used.
  absl::StatusOr<std::vector<TransactionFinger>> latent =
      TemplatesFromTransaction(ReadFile(nist + "/libbiomeval/type9-13.an2k"));
  ASSERT_TRUE(latent.ok()) << latent.status();
  bool markup = false;
  for (const TransactionFinger& f : *latent) markup = markup || (f.status.ok() && f.source == "markup");
  EXPECT_TRUE(markup);
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
