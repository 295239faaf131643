// `tessera fp` with subjects: cards enrolled from ANSI/NIST files get their
// TCN as subject and per-finger positions; plain files take --subject and
// --finger; a card file is searched as a ten-print card; subjects are listed,
// shown and deleted; bad flags are usage errors.
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "cli/testing/run_tessera.h"
#include "services/fingerprint/extract/transaction_testing.h"

namespace tessera::cli {
namespace {

using fingerprint::SyntheticPrintOptions;
using testing::RunTessera;
using testing::TestTmp;

std::string WriteCard(const std::string& name, const std::string& tcn, int subject, int impression) {
  std::vector<fingerprint::ansi_nist::Record> records;
  for (int f = 1; f <= 3; ++f) {
    SyntheticPrintOptions o;
    o.finger = static_cast<uint32_t>(100 * subject + f);
    o.impression = static_cast<uint32_t>(impression);
    records.push_back(fingerprint::transaction_testing::PrintRecord(f, f, o));
  }
  absl::StatusOr<std::string> bytes = fingerprint::transaction_testing::TransactionBytes("CAR", tcn, std::move(records));
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  const std::string path = TestTmp(name);
  std::ofstream(path, std::ios::binary) << *bytes;
  return path;
}

TEST(FpSubjectsCliTest, CardsSubjectsAndTenPrintSearch) {
  const std::string gallery = TestTmp("fp_subjects_gallery");
  const std::string card1 = WriteCard("card1.an2", "TCN-ONE", 1, 0);
  const std::string card2 = WriteCard("card2.an2", "TCN-TWO", 2, 0);
  testing::CliResult r = RunTessera({"fp", "enroll", "--gallery", gallery, "--attr", "case=K1", card1, card2});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"enrolled\": 6"), std::string::npos) << r.out;

  r = RunTessera({"fp", "subjects", "--gallery", gallery});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("{\"subject\": \"TCN-ONE\", \"templates\": 3}"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("{\"subject\": \"TCN-TWO\", \"templates\": 3}"), std::string::npos) << r.out;

  r = RunTessera({"fp", "subject", "--gallery", gallery, "TCN-TWO"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"id\": \"card2_2\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"finger_name\": \"right index\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"case\": \"K1\""), std::string::npos) << r.out;

  // Another impression of subject 2's card: a ten-print search finds TCN-TWO first.
  const std::string probe = WriteCard("probe.an2", "Q", 2, 1);
  r = RunTessera({"fp", "search", "--gallery", gallery, "--top", "2", probe});
  ASSERT_EQ(r.code, 0) << r.err;
  const size_t mode = r.out.find("\"mode\": \"ten-print\"");
  ASSERT_NE(mode, std::string::npos) << r.out;
  EXPECT_LT(r.out.find("\"subject\": \"TCN-TWO\""), r.out.find("\"subject\": \"TCN-ONE\"")) << r.out;

  // Charting the probe card's right index against the enrolled one.
  r = RunTessera({"fp", "chart", "--probe", probe, "--probe-finger", "2", "--gallery", gallery, "--candidate",
                  "card2_2", "--out", TestTmp("chart.png")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"source\": \"gallery\""), std::string::npos) << r.out;
  EXPECT_EQ(RunTessera({"fp", "chart", "--probe", probe, "--probe-finger", "2", "--gallery", gallery, "--candidate",
                        "missing", "--out", TestTmp("chart2.png")})
                .code,
            1);

  // A plain template file with --subject/--finger, then a filtered search.
  r = RunTessera({"fp", "enroll", "--gallery", gallery, "--subject", "S3", "--finger", "7", "--ids", "s3_7", card1});
  EXPECT_EQ(r.code, 0) << r.err;  // a transaction: --subject names its subject
  r = RunTessera({"fp", "subject", "--gallery", gallery, "S3"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"id\": \"s3_7_1\""), std::string::npos) << r.out;

  r = RunTessera({"fp", "delete-subject", "--gallery", gallery, "TCN-ONE", "nobody"});
  EXPECT_EQ(r.code, 1);  // "nobody" has no templates
  EXPECT_NE(r.out.find("\"deleted_templates\": 3"), std::string::npos) << r.out;
  r = RunTessera({"fp", "subjects", "--gallery", gallery});
  EXPECT_EQ(r.out.find("TCN-ONE"), std::string::npos) << r.out;

  EXPECT_EQ(RunTessera({"fp", "search", "--gallery", gallery, "--finger-positions", "x", probe}).code, 2);
  EXPECT_EQ(RunTessera({"fp", "search", "--gallery", gallery, "--fusion", "median", probe}).code, 2);
  EXPECT_EQ(RunTessera({"fp", "enroll", "--gallery", gallery, "--attr", "novalue", card1}).code, 2);
}

// A card converted to the XML encoding reads as the same transaction and
// enrolls the same fingers.
TEST(FpSubjectsCliTest, XmlCardConvertsAndEnrolls) {
  const std::string card = WriteCard("xcard.an2", "TCN-XML", 4, 0);
  const std::string xml = TestTmp("xcard.xml"), back = TestTmp("xcard_back.an2");
  testing::CliResult r = RunTessera({"fp", "nist", "convert", card, xml});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"encoding\": \"xml\""), std::string::npos) << r.out;
  ASSERT_EQ(RunTessera({"fp", "nist", "convert", xml, back}).code, 0);
  const testing::CliResult a = RunTessera({"fp", "nist", "show", card});
  const testing::CliResult b = RunTessera({"fp", "nist", "show", back});
  ASSERT_EQ(a.code, 0) << a.err;
  // The same records and fields (the file name differs).
  EXPECT_EQ(a.out.substr(a.out.find("\"version\"")), b.out.substr(b.out.find("\"version\"")));
  const std::string gallery = TestTmp("fp_xml_gallery");
  r = RunTessera({"fp", "enroll", "--gallery", gallery, xml});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"enrolled\": 3"), std::string::npos) << r.out;
  r = RunTessera({"fp", "subject", "--gallery", gallery, "TCN-XML"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(RunTessera({"fp", "nist", "convert", card, xml, "--to", "json"}).code, 2);
}

}  // namespace
}  // namespace tessera::cli
