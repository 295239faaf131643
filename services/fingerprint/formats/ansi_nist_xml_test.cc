// The XML encoding of ANSI/NIST-ITL transactions: NIST's reference
// transactions (shared data: skipped with a reason when absent) written as
// XML and read back, synthetic transactions with values the NIEM elements
// cannot carry, a hand-written package in the NIEM layout of NIST's 2011 XML
// reference files, and the errors malformed packages get.
#include "services/fingerprint/formats/ansi_nist_xml.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "services/fingerprint/formats/ansi_nist.h"
#include "services/fingerprint/formats/ansi_nist_testing.h"
#include "services/fingerprint/formats/ansi_nist_views.h"
#include "services/fingerprint/formats/fvc_data.h"
#include "services/fingerprint/formats/xml_tree.h"

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

// Each record's fields in number order (the XML encoding has no field order).
Transaction Sorted(Transaction t) {
  for (Record& r : t.records) {
    std::stable_sort(r.fields.begin(), r.fields.end(), [](const Field& a, const Field& b) { return a.number < b.number; });
  }
  return t;
}


int Count(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

// The typed views agree (everything but the data's address).
void ExpectSameViews(const Transaction& a, const Transaction& b) {
  auto ia = Images(a), ib = Images(b);
  ASSERT_TRUE(ia.ok() && ib.ok());
  ASSERT_EQ(ia->size(), ib->size());
  for (size_t i = 0; i < ia->size(); ++i) {
    const ImageView &x = (*ia)[i], &y = (*ib)[i];
    EXPECT_EQ(x.record_type, y.record_type);
    EXPECT_EQ(x.idc, y.idc);
    EXPECT_EQ(x.positions, y.positions);
    EXPECT_EQ(x.impression_type, y.impression_type);
    EXPECT_EQ(x.ppi, y.ppi);
    EXPECT_EQ(x.width, y.width);
    EXPECT_EQ(x.height, y.height);
    EXPECT_EQ(x.bits_per_pixel, y.bits_per_pixel);
    EXPECT_EQ(x.compression, y.compression);
    EXPECT_EQ(x.compression_code, y.compression_code);
    EXPECT_EQ(x.data, y.data);
  }
  auto ma = Minutiae(a), mb = Minutiae(b);
  ASSERT_TRUE(ma.ok() && mb.ok());
  ASSERT_EQ(ma->size(), mb->size());
  for (size_t i = 0; i < ma->size(); ++i) {
    const MinutiaeView &x = (*ma)[i], &y = (*mb)[i];
    EXPECT_EQ(x.idc, y.idc);
    EXPECT_EQ(x.format, y.format);
    ASSERT_EQ(x.legacy.size(), y.legacy.size());
    for (size_t k = 0; k < x.legacy.size(); ++k) {
      EXPECT_EQ(x.legacy[k].x, y.legacy[k].x);
      EXPECT_EQ(x.legacy[k].y, y.legacy[k].y);
      EXPECT_EQ(x.legacy[k].theta, y.legacy[k].theta);
      EXPECT_EQ(x.legacy[k].type, y.legacy[k].type);
      EXPECT_EQ(x.legacy[k].ridge_counts, y.legacy[k].ridge_counts);
    }
    ASSERT_EQ(x.efs.size(), y.efs.size());
    for (size_t k = 0; k < x.efs.size(); ++k) {
      EXPECT_EQ(x.efs[k].x, y.efs[k].x);
      EXPECT_EQ(x.efs[k].y, y.efs[k].y);
      EXPECT_EQ(x.efs[k].theta, y.efs[k].theta);
      EXPECT_EQ(x.efs[k].type, y.efs[k].type);
    }
    EXPECT_EQ(x.roi_width, y.roi_width);
    EXPECT_EQ(x.roi_x, y.roi_x);
    auto ta = MinutiaeTemplate(a, x), tb = MinutiaeTemplate(b, y);
    ASSERT_EQ(ta.ok(), tb.ok());
    if (ta.ok()) {
      EXPECT_EQ(ta->minutiae, tb->minutiae);
    }
  }
}

double Ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since).count();
}

TEST(AnsiNistXml, ReferenceFilesRoundTrip) {
  const auto files = NistFiles();
  if (files.empty()) GTEST_SKIP() << "no NIST reference transactions in the shared data";
  std::printf("%-28s %9s %9s %8s %8s %8s %8s\n", "file", "an2 bytes", "xml bytes", "named", "tsr", "write ms",
              "read ms");
  for (const auto& [name, bytes] : files) {
    SCOPED_TRACE(name);
    auto t = ParseTransaction(bytes);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_FALSE(LooksLikeXmlTransaction(bytes));
    auto start = std::chrono::steady_clock::now();
    auto xml = WriteXmlTransaction(*t);
    const double write_ms = Ms(start);
    ASSERT_TRUE(xml.ok()) << xml.status();
    EXPECT_TRUE(LooksLikeXmlTransaction(*xml));
    start = std::chrono::steady_clock::now();
    auto back = ParseXmlTransaction(*xml);
    const double read_ms = Ms(start);
    ASSERT_TRUE(back.ok()) << back.status();
    // What the traditional reader makes of the same content, fields in number order.
    auto rewritten = ParseTransaction(*WriteTransaction(*t));
    ASSERT_TRUE(rewritten.ok());
    EXPECT_EQ(back->warnings, rewritten->warnings);  // type9-13.an2k repeats 2.034
    EXPECT_EQ(*back, Sorted(*rewritten));
    EXPECT_EQ(WithoutDerived(*back), WithoutDerived(Sorted(*t)));
    ExpectSameViews(*t, *back);
    // Written again, the same document.
    auto again = WriteXmlTransaction(*back);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, *WriteXmlTransaction(Sorted(*t)));
    int fields = 0;
    for (const Record& r : t->records) fields += static_cast<int>(r.fields.size());
    const int generic = Count(*xml, "<tsr:Field ");
    std::printf("%-28s %9zu %9zu %8d %8d %8.1f %8.1f\n", name.c_str(), bytes.size(), xml->size(), fields - generic,
                generic, write_ms, read_ms);
  }
}

TEST(AnsiNistXml, ReferenceFieldsGetNiemElements) {
  const auto files = NistFiles();
  const auto it = files.find("type-14-tpcard-nqm.an2");
  if (it == files.end()) GTEST_SKIP() << "no type-14-tpcard-nqm.an2 in the shared data";
  auto t = ParseTransaction(it->second);
  ASSERT_TRUE(t.ok());
  auto xml = WriteXmlTransaction(*t);
  ASSERT_TRUE(xml.ok());
  // Only the Type-2's domain-defined 2.003 has no NIEM element.
  EXPECT_EQ(Count(*xml, "<tsr:Field "), 1);
  EXPECT_TRUE(absl::StrContains(*xml, "<itl:UserDefinedDescriptiveDetail>\n      <tsr:Fields>\n        "
                                      "<tsr:Field number=\"3\">domain defined text place holder</tsr:Field>"));
  EXPECT_EQ(Count(*xml, "<itl:PackageFingerprintImageRecord>"), 14);
  EXPECT_EQ(Count(*xml, "<biom:FingerprintImageNISTQuality>"), 20);  // 10 rolled fingers, 10 in the slaps
  EXPECT_TRUE(absl::StrContains(*xml, "<biom:TransactionMajorVersionValue>04</biom:TransactionMajorVersionValue>"));
  EXPECT_TRUE(absl::StrContains(*xml, "<nc:Date>2001-08-08</nc:Date>"));
  EXPECT_TRUE(absl::StrContains(*xml, "<nc:DateTime>2001-08-08T12:00:00Z</nc:DateTime>"));
  EXPECT_TRUE(absl::StrContains(*xml, "<biom:ImageCompressionAlgorithmText>WSQ20</biom:ImageCompressionAlgorithmText>"));
}

// Types 1, 2, 4, 9, 13, 14 and 15, with values the NIEM elements carry and
// values they cannot (which go to tsr:Fields).
Transaction Synthetic() {
  Transaction t;
  Record r1{1, 0, {V(1, "0"), V(2, "0500"), F(3, {{"1", "0"}}), V(4, "CAR"), V(5, "20261206"), V(6, "5"),
                   V(7, "DAI"), V(8, "ORI"), V(9, "TCN-1"), V(10, "TCR"), V(11, "19.69"), V(12, "19.69"),
                   F(13, {{"NORAM", ""}}), V(14, "20261206105507Z"),
                   F(15, {{"3", "UTF-8", "1.0"}, {"4", "SJIS"}}), F(16, {{"FBI", "EBTS", "10.0"}}),
                   F(17, {{"Destination & Co", "Origin <Lab>"}}), V(18, "ISO"), V(19, "a 2013 field")}};
  Record r2{2, 0, {V(1, "0"), V(2, "00"), V(3, "free text, with \"quotes\" & <markup>"), F(18, {{"a", "b"}, {"c"}}),
                   V(19, "  padded  "), V(20, "line one\r\nline two\ttabbed"), V(21, "Zürich ✓"), V(22, ""),
                   V(34, "00"), V(34, "UC")}};
  Record r9{9, 1, {V(1, "0"), V(2, "01"), V(3, "0"), V(4, "S"), F(5, {{"AFIS/FBI", "M"}}), F(6, {{"02"}, {"22"}}),
                   F(7, {{"T", "UN"}, {"U", "arch", "tent"}}), F(8, {{"20472583"}}), F(9, {{"25451862"}, {"00010002"}}),
                   V(10, "2"), V(11, "1"),
                   F(12, {{"001", "00100020090", "10", "A", "002,03"}, {"002", "00300040180", "63", "B"}}),
                   F(300, {{"200", "300", "0", "0", "0,0-199,0-199,299"}}),
                   F(331, {{"10", "20", "90", "E"}, {"30", "40", "359", "B", "5", "10"}}), F(320, {{"1", "2", "3"}})}};
  Record r14{14, 1, {V(1, "0"), V(2, "01"), V(3, "1"), V(4, "SRC"), V(5, "20261206"), V(6, "4"), V(7, "3"),
                     V(8, "1"), V(9, "500"), V(10, "500"), V(11, "NONE"), V(12, "8"), F(13, {{"2"}, {"3"}}),
                     F(14, {{"7", "TIP"}}), F(15, {{"TIP", "NA", "1", "3", "0", "2"}}), V(20, "comment"),
                     F(22, {{"2", "1"}, {"3", "255"}}), F(24, {{"2", "80", "0", "1"}}), V(31, "50"),
                     Data("abcdefghijkl")}};
  Record r13{13, 2, {V(1, "0"), V(2, "02"), V(3, "4"), V(4, "LAB"), V(5, "2026-12-06"), V(6, "2"), V(7, "2"),
                     V(8, "2"), V(9, "197"), V(10, "197"), V(11, "NONE"), V(12, "8"), F(13, {{"8"}}),
                     F(14, {{"7", "EJI"}, {"5", "FV1"}}),
                     F(15, {{"FV1", "PRX", "10", "13", "15", "17"}, {"FV2", "DST", "20", "23", "25", "27"}}),
                     F(24, {{"8", "254", "471", "5678"}}), Data("wxyz")}};
  Record r15{15, 3, {V(1, "0"), V(2, "03"), V(3, "12"), V(4, "SRC"), V(5, "20261206"), V(6, "2"), V(7, "1"),
                     V(8, "1"), V(9, "500"), V(10, "500"), V(11, "NONE"), V(12, "8"), V(13, "22"),
                     F(24, {{"22", "40", "FFF0", "1"}}), Data("pq")}};
  Record r4{4, 4, {V(1, "0"), V(2, "4"), V(3, "1"), F(4, {{"1", "255", "255", "255", "255", "255"}}), V(5, "0"),
                   V(6, "2"), V(7, "2"), V(8, "0"), Data("\x1c\x1d\x1e\x1f")}};
  Record r4b{4, 5, {V(1, "0"), V(2, "5"), V(3, "2"), F(4, {{"2", "255", "3", "255", "255", "255"}}), V(5, "1"),
                    V(6, "1"), V(7, "1"), V(8, "1"), Data(std::string("\0\xff", 2))}};
  t.records = {r1, r2, r9, r14, r13, r15, r4, r4b};
  return t;
}

TEST(AnsiNistXml, SyntheticRoundTrip) {
  const Transaction t = Synthetic();
  auto xml = WriteXmlTransaction(t);
  ASSERT_TRUE(xml.ok()) << xml.status();
  auto back = ParseXmlTransaction(*xml);
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << *xml;
  auto traditional = ParseTransaction(*WriteTransaction(t));
  ASSERT_TRUE(traditional.ok()) << traditional.status();
  EXPECT_EQ(back->warnings, traditional->warnings);  // 2.034 twice
  EXPECT_EQ(back->warnings.size(), 1u);
  EXPECT_EQ(*back, Sorted(*traditional));
  EXPECT_EQ(WithoutDerived(*back), WithoutDerived(Sorted(*traditional)));
  ExpectSameViews(*traditional, *back);
  EXPECT_EQ(back->Version(), "0500");
  EXPECT_EQ(back->records[0].Find(3)->subfields,
            (std::vector<Subfield>{
                {"1", "7"}, {"2", "00"}, {"9", "01"}, {"14", "01"}, {"13", "02"}, {"15", "03"}, {"4", "04"}, {"4", "05"}}));

  // The NIEM elements, in the schema's order.
  const std::string& x = *xml;
  for (const char* expected : {
           "<biom:TransactionDate>\n        <nc:Date>2026-12-06</nc:Date>",
           "<nc:OrganizationName>Destination &amp; Co</nc:OrganizationName>",
           "<nc:OrganizationName>Origin &lt;Lab&gt;</nc:OrganizationName>",
           "<nc:DateTime>2026-12-06T10:55:07Z</nc:DateTime>",
           "<biom:TransactionMajorVersionValue>05</biom:TransactionMajorVersionValue>\n"
           "      <biom:TransactionMinorVersionValue>00</biom:TransactionMinorVersionValue>",
           "<biom:CharacterSetCommonNameCode>SJIS</biom:CharacterSetCommonNameCode>\n"
           "        <biom:CharacterSetIndexCode>4</biom:CharacterSetIndexCode>",
           "<biom:MinutiaeFormatNISTStandardIndicator>true</biom:MinutiaeFormatNISTStandardIndicator>",
           "<biom:MinutiaePalmPositionCode>22</biom:MinutiaePalmPositionCode>",
           "<biom:PositionHorizontalCoordinateValue>0010</biom:PositionHorizontalCoordinateValue>",
           "<biom:RidgeCountValue>03</biom:RidgeCountValue>",
           "<biom:MinutiaeRidgeCountIndicator>true</biom:MinutiaeRidgeCountIndicator>",
           "<biom:ImageLocationHorizontalCoordinateMeasure>199</biom:ImageLocationHorizontalCoordinateMeasure>",
           "<biom:MinutiaDirectionUncertaintyValue>10</biom:MinutiaDirectionUncertaintyValue>",
           "<biom:FingerImpressionImage>\n      <nc:BinaryBase64Object>YWJjZGVmZ2hpamts</nc:BinaryBase64Object>",
           "<biom:FrictionRidgeImage>",
           "<biom:PalmprintImage>",
           "<biom:PalmPositionCode>22</biom:PalmPositionCode>",
           "<biom:FingerprintImagePosition>\n        <biom:FingerPositionCode>1</biom:FingerPositionCode>\n"
           "      </biom:FingerprintImagePosition>",
           "<biom:SegmentBottomVerticalCoordinateValue>2</biom:SegmentBottomVerticalCoordinateValue>",
           "<biom:NISTQualityMeasure>255</biom:NISTQualityMeasure>",
       }) {
    EXPECT_TRUE(absl::StrContains(x, expected)) << expected;
  }
  // What they cannot carry: 1.019 (no element), Type-2's fields, duplicates,
  // a Type-13 date that is not YYYYMMDD, 9.320, 14.031, and the Type-4 whose
  // FGP has a gap (4.004 written as its six bytes).
  for (const char* expected : {
           "<tsr:Field number=\"19\">a 2013 field</tsr:Field>",
           "<tsr:Field number=\"3\">free text, with \"quotes\" &amp; &lt;markup&gt;</tsr:Field>",
           "<tsr:Field number=\"19\">  padded  </tsr:Field>",
           "<tsr:Field number=\"20\">line one&#13;\nline two\ttabbed</tsr:Field>",
           "<tsr:Field number=\"22\"/>",
           "<tsr:Field number=\"34\">00</tsr:Field>",
           "<tsr:Field number=\"5\">2026-12-06</tsr:Field>",
           "<tsr:Field number=\"31\">50</tsr:Field>",
           "<tsr:Field number=\"4\">\n",
       }) {
    EXPECT_TRUE(absl::StrContains(x, expected)) << expected;
  }
  EXPECT_EQ(Count(x, "<tsr:Field number=\"4\">"), 1);
}

TEST(AnsiNistXml, WriterRefusesWhatXmlCannotCarry) {
  {
    Transaction t = Synthetic();
    t.records[1].fields[2] = V(3, std::string("bell \x07"));
    auto xml = WriteXmlTransaction(t);
    ASSERT_FALSE(xml.ok());
    EXPECT_EQ(xml.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(xml.status().message(), "Type-2 record 2 (IDC 0): field 2.003: item 'bell ?'"))
        << xml.status();
  }
  {
    Transaction t = Synthetic();
    t.records[3].fields[3] = V(4, std::string("Z\xfcrich"));  // Latin-1
    auto xml = WriteXmlTransaction(t);
    ASSERT_FALSE(xml.ok());
    EXPECT_TRUE(absl::StrContains(xml.status().message(), "Type-14 record 4 (IDC 1): field 14.004 (SRC)")) << xml.status();
  }
  {
    Transaction t = Synthetic();
    t.records.push_back({10, 6, {V(1, "0"), V(2, "06"), Data("face")}});
    auto xml = WriteXmlTransaction(t);
    ASSERT_FALSE(xml.ok());
    EXPECT_TRUE(absl::StrContains(xml.status().message(), "Type-10 record 9 (IDC 6): the XML writer covers"))
        << xml.status();
  }
  {
    Transaction t = Synthetic();
    t.records[3].fields[1] = V(2, "7");
    auto xml = WriteXmlTransaction(t);
    ASSERT_FALSE(xml.ok());
    EXPECT_TRUE(absl::StrContains(xml.status().message(), "field 14.002 (IDC): '7' differs from the record's IDC 1"));
  }
  EXPECT_FALSE(WriteXmlTransaction(Transaction{}).ok());
}

// A package as another system would write it: the biometrics namespace under
// the prefix ansi-nist, comments, CDATA, character references, wrapped
// base64, elements without a field here, a Type-10 record and an EBTS Type-2.
constexpr char kNiemSample[] = R"(<?xml version="1.0" encoding="UTF-8"?>
<!-- Hand-written in the layout of NIST's ANSI/NIST-ITL 1-2011 XML reference files. -->
<itl:NISTBiometricInformationExchangePackage
    xmlns:itl="http://biometrics.nist.gov/standard/2011"
    xmlns:ansi-nist="http://niem.gov/niem/biometrics/1.0"
    xmlns:nc="http://niem.gov/niem/niem-core/2.0"
    xmlns:ebts="http://cjis.fbi.gov/fbi_ebts/10.0"
    xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
  <itl:PackageInformationRecord>
    <ansi-nist:RecordCategoryCode>01</ansi-nist:RecordCategoryCode>
    <ansi-nist:Transaction>
      <ansi-nist:TransactionDate><nc:Date>2026-12-06</nc:Date></ansi-nist:TransactionDate>
      <ansi-nist:TransactionDestinationOrganization>
        <nc:OrganizationIdentification><nc:IdentificationID>DAI000000</nc:IdentificationID></nc:OrganizationIdentification>
        <nc:OrganizationName>Destination &amp; Co</nc:OrganizationName>
      </ansi-nist:TransactionDestinationOrganization>
      <ansi-nist:TransactionOriginatingOrganization>
        <nc:OrganizationIdentification><nc:IdentificationID>ORI000000</nc:IdentificationID></nc:OrganizationIdentification>
        <nc:OrganizationName>Origin</nc:OrganizationName>
      </ansi-nist:TransactionOriginatingOrganization>
      <ansi-nist:TransactionUTCDate><nc:DateTime>2026-12-06T10:55:07Z</nc:DateTime></ansi-nist:TransactionUTCDate>
      <ansi-nist:TransactionControlIdentification>
        <nc:IdentificationID>TCN-XML-1</nc:IdentificationID>
      </ansi-nist:TransactionControlIdentification>
      <ansi-nist:TransactionDomain>
        <ansi-nist:DomainVersionNumberIdentification><nc:IdentificationID>10.0</nc:IdentificationID></ansi-nist:DomainVersionNumberIdentification>
        <ansi-nist:TransactionDomainName>NORAM</ansi-nist:TransactionDomainName>
      </ansi-nist:TransactionDomain>
      <ansi-nist:TransactionImageResolutionDetails>
        <ansi-nist:NativeScanningResolutionValue>19.69</ansi-nist:NativeScanningResolutionValue>
        <ansi-nist:NominalTransmittingResolutionValue>19.69</ansi-nist:NominalTransmittingResolutionValue>
      </ansi-nist:TransactionImageResolutionDetails>
      <ansi-nist:TransactionMajorVersionValue>05</ansi-nist:TransactionMajorVersionValue>
      <ansi-nist:TransactionMinorVersionValue>00</ansi-nist:TransactionMinorVersionValue>
      <ansi-nist:TransactionCategoryCode>CAR</ansi-nist:TransactionCategoryCode>
      <ansi-nist:TransactionContentSummary>
        <ansi-nist:ContentFirstRecordCategoryCode>1</ansi-nist:ContentFirstRecordCategoryCode>
        <ansi-nist:ContentRecordQuantity>4</ansi-nist:ContentRecordQuantity>
        <ansi-nist:ContentRecordSummary>
          <ansi-nist:ImageReferenceIdentification><nc:IdentificationID>00</nc:IdentificationID></ansi-nist:ImageReferenceIdentification>
          <ansi-nist:RecordCategoryCode>2</ansi-nist:RecordCategoryCode>
        </ansi-nist:ContentRecordSummary>
        <ansi-nist:ContentRecordSummary>
          <ansi-nist:ImageReferenceIdentification><nc:IdentificationID>01</nc:IdentificationID></ansi-nist:ImageReferenceIdentification>
          <ansi-nist:RecordCategoryCode>10</ansi-nist:RecordCategoryCode>
        </ansi-nist:ContentRecordSummary>
        <ansi-nist:ContentRecordSummary>
          <ansi-nist:ImageReferenceIdentification><nc:IdentificationID>02</nc:IdentificationID></ansi-nist:ImageReferenceIdentification>
          <ansi-nist:RecordCategoryCode>14</ansi-nist:RecordCategoryCode>
        </ansi-nist:ContentRecordSummary>
        <ansi-nist:ContentRecordSummary>
          <ansi-nist:ImageReferenceIdentification><nc:IdentificationID>03</nc:IdentificationID></ansi-nist:ImageReferenceIdentification>
          <ansi-nist:RecordCategoryCode>9</ansi-nist:RecordCategoryCode>
        </ansi-nist:ContentRecordSummary>
      </ansi-nist:TransactionContentSummary>
    </ansi-nist:Transaction>
  </itl:PackageInformationRecord>
  <itl:PackageDescriptiveTextRecord>
    <ansi-nist:RecordCategoryCode>2</ansi-nist:RecordCategoryCode>
    <ansi-nist:ImageReferenceIdentification><nc:IdentificationID>00</nc:IdentificationID></ansi-nist:ImageReferenceIdentification>
    <itl:UserDefinedDescriptiveDetail>
      <ebts:DomainDefinedDescriptiveFields>
        <ebts:PersonName>DOE, JOHN</ebts:PersonName>
      </ebts:DomainDefinedDescriptiveFields>
    </itl:UserDefinedDescriptiveDetail>
  </itl:PackageDescriptiveTextRecord>
  <itl:PackageFacialAndSMTImageRecord>
    <ansi-nist:RecordCategoryCode>10</ansi-nist:RecordCategoryCode>
    <ansi-nist:ImageReferenceIdentification><nc:IdentificationID>01</nc:IdentificationID></ansi-nist:ImageReferenceIdentification>
    <ansi-nist:FaceImage><nc:BinaryBase64Object>ZmFjZQ==</nc:BinaryBase64Object></ansi-nist:FaceImage>
  </itl:PackageFacialAndSMTImageRecord>
  <itl:PackageFingerprintImageRecord>
    <ansi-nist:RecordCategoryCode>14</ansi-nist:RecordCategoryCode>
    <ansi-nist:ImageReferenceIdentification><nc:IdentificationID>02</nc:IdentificationID></ansi-nist:ImageReferenceIdentification>
    <ansi-nist:ProcessAnnotation><ansi-nist:ProcessName>scan</ansi-nist:ProcessName></ansi-nist:ProcessAnnotation>
    <ansi-nist:FingerImpressionImage>
      <nc:BinaryBase64Object>
        YWJjZGVm
        Z2hpamts
      </nc:BinaryBase64Object>
      <ansi-nist:ImageBitsPerPixelQuantity>8</ansi-nist:ImageBitsPerPixelQuantity>
      <ansi-nist:ImageCaptureDetail>
        <ansi-nist:CaptureDate><nc:Date>2026-12-05</nc:Date></ansi-nist:CaptureDate>
        <ansi-nist:CaptureOrganization>
          <nc:OrganizationIdentification><nc:IdentificationID>SRC</nc:IdentificationID></nc:OrganizationIdentification>
        </ansi-nist:CaptureOrganization>
      </ansi-nist:ImageCaptureDetail>
      <ansi-nist:ImageCompressionAlgorithmText><![CDATA[NONE]]></ansi-nist:ImageCompressionAlgorithmText>
      <ansi-nist:ImageHorizontalLineLengthPixelQuantity>4</ansi-nist:ImageHorizontalLineLengthPixelQuantity>
      <ansi-nist:ImageHorizontalPixelDensityValue>500</ansi-nist:ImageHorizontalPixelDensityValue>
      <ansi-nist:ImageScaleUnitsCode>1</ansi-nist:ImageScaleUnitsCode>
      <ansi-nist:ImageVerticalLineLengthPixelQuantity>&#51;</ansi-nist:ImageVerticalLineLengthPixelQuantity>
      <ansi-nist:ImageVerticalPixelDensityValue>500</ansi-nist:ImageVerticalPixelDensityValue>
      <ansi-nist:FrictionRidgeImageImpressionCaptureCategoryCode>1</ansi-nist:FrictionRidgeImageImpressionCaptureCategoryCode>
      <ansi-nist:FingerPositionCode> 2 </ansi-nist:FingerPositionCode>
      <ansi-nist:FingerprintImageNISTQuality>
        <ansi-nist:FingerPositionCode>2</ansi-nist:FingerPositionCode>
        <ansi-nist:NISTQualityMeasure>1</ansi-nist:NISTQualityMeasure>
      </ansi-nist:FingerprintImageNISTQuality>
    </ansi-nist:FingerImpressionImage>
  </itl:PackageFingerprintImageRecord>
  <itl:PackageMinutiaeRecord>
    <ansi-nist:RecordCategoryCode>9</ansi-nist:RecordCategoryCode>
    <ansi-nist:ImageReferenceIdentification><nc:IdentificationID>03</nc:IdentificationID></ansi-nist:ImageReferenceIdentification>
    <ansi-nist:MinutiaeImpressionCaptureCategoryCode>4</ansi-nist:MinutiaeImpressionCaptureCategoryCode>
    <ansi-nist:MinutiaeFormatNISTStandardIndicator>true</ansi-nist:MinutiaeFormatNISTStandardIndicator>
    <itl:Minutiae>
      <itl:MinutiaeNISTStandard>
        <itl:MinutiaDetail>
          <ansi-nist:PositionHorizontalCoordinateValue>1255</ansi-nist:PositionHorizontalCoordinateValue>
          <ansi-nist:PositionVerticalCoordinateValue>1002</ansi-nist:PositionVerticalCoordinateValue>
          <ansi-nist:MinutiaIdentification><nc:IdentificationID>1</nc:IdentificationID></ansi-nist:MinutiaIdentification>
          <ansi-nist:PositionThetaAngleMeasure>48</ansi-nist:PositionThetaAngleMeasure>
          <ansi-nist:MinutiaQualityValue> 1</ansi-nist:MinutiaQualityValue>
          <ansi-nist:MinutiaCategoryCode>A</ansi-nist:MinutiaCategoryCode>
          <ansi-nist:MinutiaRidgeCount>
            <ansi-nist:RidgeCountReferenceIdentification><nc:IdentificationID>2</nc:IdentificationID></ansi-nist:RidgeCountReferenceIdentification>
            <ansi-nist:RidgeCountValue>12</ansi-nist:RidgeCountValue>
          </ansi-nist:MinutiaRidgeCount>
        </itl:MinutiaDetail>
        <itl:MinutiaDetail>
          <ansi-nist:PositionHorizontalCoordinateValue>12</ansi-nist:PositionHorizontalCoordinateValue>
          <ansi-nist:PositionVerticalCoordinateValue>13</ansi-nist:PositionVerticalCoordinateValue>
          <ansi-nist:MinutiaIdentification><nc:IdentificationID>2</nc:IdentificationID></ansi-nist:MinutiaIdentification>
          <ansi-nist:PositionThetaAngleMeasure>134</ansi-nist:PositionThetaAngleMeasure>
          <ansi-nist:MinutiaQualityValue>63</ansi-nist:MinutiaQualityValue>
          <ansi-nist:MinutiaCategoryCode>B</ansi-nist:MinutiaCategoryCode>
        </itl:MinutiaDetail>
        <ansi-nist:MinutiaeQuantity>2</ansi-nist:MinutiaeQuantity>
        <ansi-nist:MinutiaeReadingSystem>
          <ansi-nist:ReadingSystemCodingMethodCode>M</ansi-nist:ReadingSystemCodingMethodCode>
          <ansi-nist:ReadingSystemName>EXAMINER</ansi-nist:ReadingSystemName>
        </ansi-nist:MinutiaeReadingSystem>
        <ansi-nist:MinutiaeRidgeCountIndicator>true</ansi-nist:MinutiaeRidgeCountIndicator>
      </itl:MinutiaeNISTStandard>
      <ansi-nist:MinutiaeFingerPositionCode>2</ansi-nist:MinutiaeFingerPositionCode>
    </itl:Minutiae>
    <ansi-nist:ExtendedFeatureSetMinutiae>
      <ansi-nist:FrictionRidgeImageRegionOfInterest>
        <ansi-nist:ImageSegmentWidthMeasure>2540</ansi-nist:ImageSegmentWidthMeasure>
        <ansi-nist:ImageSegmentHeightMeasure>2540</ansi-nist:ImageSegmentHeightMeasure>
        <ansi-nist:ImageSegmentHorizontalOffsetMeasure>0</ansi-nist:ImageSegmentHorizontalOffsetMeasure>
        <ansi-nist:ImageSegmentVerticalOffsetMeasure>0</ansi-nist:ImageSegmentVerticalOffsetMeasure>
      </ansi-nist:FrictionRidgeImageRegionOfInterest>
      <ansi-nist:EFSMinutia>
        <ansi-nist:ImageLocationHorizontalCoordinateMeasure>508</ansi-nist:ImageLocationHorizontalCoordinateMeasure>
        <ansi-nist:ImageLocationVerticalCoordinateMeasure>1016</ansi-nist:ImageLocationVerticalCoordinateMeasure>
        <ansi-nist:ImageLocationThetaAngleMeasure>90</ansi-nist:ImageLocationThetaAngleMeasure>
        <ansi-nist:EFSMinutiaCategoryCode>E</ansi-nist:EFSMinutiaCategoryCode>
      </ansi-nist:EFSMinutia>
      <ansi-nist:EFSMinutia>
        <ansi-nist:ImageLocationHorizontalCoordinateMeasure>1270</ansi-nist:ImageLocationHorizontalCoordinateMeasure>
        <ansi-nist:ImageLocationVerticalCoordinateMeasure>254</ansi-nist:ImageLocationVerticalCoordinateMeasure>
        <ansi-nist:ImageLocationThetaAngleMeasure>359</ansi-nist:ImageLocationThetaAngleMeasure>
        <ansi-nist:EFSMinutiaCategoryCode>B</ansi-nist:EFSMinutiaCategoryCode>
      </ansi-nist:EFSMinutia>
    </ansi-nist:ExtendedFeatureSetMinutiae>
  </itl:PackageMinutiaeRecord>
</itl:NISTBiometricInformationExchangePackage>
)";

TEST(AnsiNistXml, ReadsTheNiemLayout) {
  ASSERT_TRUE(LooksLikeXmlTransaction(kNiemSample));
  auto t = ParseXmlTransaction(kNiemSample);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->records.size(), 4u);  // the Type-10 is skipped
  const Record& r1 = t->records[0];
  EXPECT_EQ(t->Version(), "0500");
  EXPECT_EQ(r1.Find(3)->subfields, (std::vector<Subfield>{{"1", "3"}, {"2", "00"}, {"14", "02"}, {"9", "03"}}));
  EXPECT_EQ(r1.Find(4)->value(), "CAR");
  EXPECT_EQ(r1.Find(5)->value(), "20261206");
  EXPECT_EQ(r1.Find(7)->value(), "DAI000000");
  EXPECT_EQ(r1.Find(9)->value(), "TCN-XML-1");
  EXPECT_EQ(r1.Find(11)->value(), "19.69");
  EXPECT_EQ(r1.Find(13)->subfields, (std::vector<Subfield>{{"NORAM", "10.0"}}));
  EXPECT_EQ(r1.Find(14)->value(), "20261206105507Z");
  EXPECT_EQ(r1.Find(17)->subfields, (std::vector<Subfield>{{"Destination & Co", "Origin"}}));
  ASSERT_NE(r1.Find(kLenField), nullptr);  // as the traditional reader gives it
  const Record& r14 = t->records[2];
  EXPECT_EQ(r14.type, 14);
  EXPECT_EQ(r14.idc, 2);
  EXPECT_EQ(r14.Find(4)->value(), "SRC");
  EXPECT_EQ(r14.Find(5)->value(), "20261205");
  EXPECT_EQ(r14.Find(22)->subfields, (std::vector<Subfield>{{"2", "1"}}));
  const Record& r9 = t->records[3];
  EXPECT_EQ(r9.Find(4)->value(), "S");
  EXPECT_EQ(r9.Find(5)->subfields, (std::vector<Subfield>{{"EXAMINER", "M"}}));
  EXPECT_EQ(r9.Find(12)->subfields, (std::vector<Subfield>{{"1", "12551002048", "1", "A", "2,12"},
                                                          {"2", "00120013134", "63", "B"}}));

  auto images = Images(*t);
  ASSERT_TRUE(images.ok()) << images.status();
  ASSERT_EQ(images->size(), 1u);
  const ImageView& img = (*images)[0];
  EXPECT_EQ(img.positions, (std::vector<int>{2}));
  EXPECT_EQ(img.impression_type, 1);
  EXPECT_EQ(img.ppi, 500);
  EXPECT_EQ(img.width, 4);
  EXPECT_EQ(img.height, 3);
  EXPECT_EQ(img.compression, Compression::kNone);
  EXPECT_EQ(img.data, "abcdefghijkl");
  auto minutiae = Minutiae(*t);
  ASSERT_TRUE(minutiae.ok()) << minutiae.status();
  ASSERT_EQ(minutiae->size(), 1u);
  const MinutiaeView& m = (*minutiae)[0];
  EXPECT_EQ(m.impression_type, 4);
  ASSERT_EQ(m.legacy.size(), 2u);
  EXPECT_EQ(m.legacy[0].x, 1255);
  EXPECT_EQ(m.legacy[0].theta, 48);
  EXPECT_EQ(m.legacy[0].ridge_counts, (std::vector<std::string>{"2,12"}));
  ASSERT_EQ(m.efs.size(), 2u);
  EXPECT_EQ(m.roi_width, 2540);
  // The EFS minutiae as a template: no image with IDC 3, so the Type-1 NSR
  // (19.69 px/mm) and the ROI give the geometry.
  auto tpl = MinutiaeTemplate(*t, m);
  ASSERT_TRUE(tpl.ok()) << tpl.status();
  ASSERT_EQ(tpl->minutiae.size(), 2u);
  EXPECT_EQ(tpl->minutiae[0].x, 100);  // 508 units * 500.1 ppi / 2540
  EXPECT_EQ(tpl->minutiae[0].y, 200);
  EXPECT_EQ(tpl->minutiae[1].type, MinutiaType::kBifurcation);

  // What was skipped says so, with the element path.
  ASSERT_EQ(t->warnings.size(), 3u);
  EXPECT_TRUE(absl::StrContains(t->warnings[0], "Type-2 record 2 (IDC 0)")) << t->warnings[0];
  EXPECT_TRUE(absl::StrContains(t->warnings[0], "itl:UserDefinedDescriptiveDetail/ebts:DomainDefinedDescriptiveFields"))
      << t->warnings[0];
  EXPECT_TRUE(absl::StrContains(t->warnings[1], "itl:PackageFacialAndSMTImageRecord (Type-10, IDC 1): record type "
                                                "not covered by the XML reader, skipped"))
      << t->warnings[1];
  EXPECT_TRUE(absl::StrContains(t->warnings[2], "Type-14 record 3 (IDC 2)")) << t->warnings[2];
  EXPECT_TRUE(absl::StrContains(t->warnings[2], "skipped: ansi-nist:ProcessAnnotation")) << t->warnings[2];

  // And it writes back (in Tessera's prefixes) to the same model.
  auto xml = WriteXmlTransaction(*t);
  ASSERT_TRUE(xml.ok()) << xml.status();
  auto again = ParseXmlTransaction(*xml);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *t);
  EXPECT_TRUE(again->warnings.empty());
}

// The sample with `from` replaced by `to` (which must be there).
std::string Edited(absl::string_view from, absl::string_view to) {
  std::string s = kNiemSample;
  const size_t at = s.find(std::string(from));
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), std::string(to));
  return s;
}

void ExpectRefused(const std::string& xml, const std::vector<std::string>& parts) {
  auto t = ParseXmlTransaction(xml);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << t.status();
  for (const std::string& part : parts) {
    EXPECT_TRUE(absl::StrContains(t.status().message(), part)) << "missing '" << part << "' in " << t.status();
  }
}

constexpr char kPackagePath[] = "itl:NISTBiometricInformationExchangePackage";
const std::string kType14 = absl::StrCat(kPackagePath, "/itl:PackageFingerprintImageRecord");
const std::string kType9 = absl::StrCat(kPackagePath, "/itl:PackageMinutiaeRecord");
const std::string kImage = kType14 + "/ansi-nist:FingerImpressionImage";

TEST(AnsiNistXml, MalformedPackagesNameTheElement) {
  // Not XML, or not well-formed: Expat's message, line and the open elements.
  ExpectRefused("", {"ANSI/NIST XML: line 1", "no element found"});
  ExpectRefused("1.001:57", {"ANSI/NIST XML: line 1, column 1: syntax error"});
  ExpectRefused(Edited("</ansi-nist:ImageBitsPerPixelQuantity>", "</ansi-nist:ImageBitsPerPixel>"),
                {"mismatched tag", "(in " + kImage + "/ansi-nist:ImageBitsPerPixelQuantity)"});
  ExpectRefused(Edited("Destination &amp; Co", "Destination & Co"), {"not well-formed", "nc:OrganizationName"});
  ExpectRefused(Edited("<?xml version=\"1.0\" encoding=\"UTF-8\"?>",
                       "<?xml version=\"1.0\"?><!DOCTYPE x [<!ENTITY a \"aaaa\">]>"),
                {"a DOCTYPE is not accepted"});
  ExpectRefused(Edited("xmlns:nc=\"http://niem.gov/niem/niem-core/2.0\"", "xmlns:nc=\"http://a&#10;b\""),
                {"ANSI/NIST XML: line"});
  ExpectRefused(Edited("<ansi-nist:RecordCategoryCode>01", "<ansi-nist:RecordCategoryCode>01<x:y>"),
                {"unbound prefix"});
  // Not a 1-2011 package.
  {
    std::string s = kNiemSample;
    s = absl::StrReplaceAll(s, {{"http://biometrics.nist.gov/standard/2011", "http://biometrics.nist.gov/standard/2-2008"}});
    ExpectRefused(s, {"ANSI/NIST-ITL 2-2008 XML", "is not read"});
  }
  ExpectRefused("<a:Package xmlns:a=\"urn:x\"/>", {"a:Package", "is not itl:NISTBiometricInformationExchangePackage"});
  ExpectRefused(Edited("<itl:PackageDescriptiveTextRecord>", "<itl:Unknown/><itl:PackageDescriptiveTextRecord>"),
                {kPackagePath + std::string("/itl:Unknown"), "is not an ANSI/NIST-ITL record element"});
  // Records: category, IDC, image element, content summary.
  ExpectRefused(Edited("<ansi-nist:RecordCategoryCode>14</ansi-nist:RecordCategoryCode>\n    <",
                       "<ansi-nist:RecordCategoryCode>13</ansi-nist:RecordCategoryCode>\n    <"),
                {"Type-14 record 3: " + kType14 + "/ansi-nist:RecordCategoryCode", "'13' is not 14"});
  ExpectRefused(Edited("<nc:IdentificationID>02</nc:IdentificationID></ansi-nist:ImageReferenceIdentification>\n    "
                       "<ansi-nist:ProcessAnnotation>",
                       "<nc:IdentificationID>2x</nc:IdentificationID></ansi-nist:ImageReferenceIdentification>\n    "
                       "<ansi-nist:ProcessAnnotation>"),
                {"Type-14 record 3: " + kType14 + "/ansi-nist:ImageReferenceIdentification/nc:IdentificationID",
                 "field 14.002 (IDC): '2x' is not an IDC"});
  {
    std::string s = absl::StrReplaceAll(kNiemSample, {{"ansi-nist:FingerImpressionImage>", "ansi-nist:FingerImage>"}});
    ExpectRefused(s, {"Type-14 record 3 (IDC 2): " + kType14, "has no biom:FingerImpressionImage"});
  }
  ExpectRefused(Edited("<ansi-nist:ContentRecordQuantity>4", "<ansi-nist:ContentRecordQuantity>5"),
                {"Type-1 record 1: ", "ansi-nist:TransactionContentSummary", "field 1.003 (CNT)",
                 "ContentRecordQuantity says 5 records follow but 4"});
  ExpectRefused(Edited("<nc:IdentificationID>03</nc:IdentificationID></ansi-nist:ImageReferenceIdentification>\n"
                       "          <ansi-nist:RecordCategoryCode>9",
                       "<nc:IdentificationID>04</nc:IdentificationID></ansi-nist:ImageReferenceIdentification>\n"
                       "          <ansi-nist:RecordCategoryCode>9"),
                {"ansi-nist:ContentRecordSummary[4]", "field 1.003 (CNT): entry 4 (Type-9, IDC 4) differs from the "
                                                      "package's record 5 (itl:PackageMinutiaeRecord, Type-9, IDC 3)"});
  ExpectRefused(Edited("<itl:PackageInformationRecord>", "<itl:PackageDescriptiveTextRecord/><itl:PackageInformationRecord>"),
                {"must start with itl:PackageInformationRecord"});
  // Values.
  ExpectRefused(Edited("<nc:Date>2026-12-06</nc:Date>", "<nc:Date>20261206</nc:Date>"),
                {"Type-1 record 1: ", "ansi-nist:Transaction/ansi-nist:TransactionDate/nc:Date (line 12)",
                 "field 1.005 (DAT): '20261206' is not a date (YYYY-MM-DD)"});
  ExpectRefused(Edited("<ansi-nist:TransactionMinorVersionValue>00</ansi-nist:TransactionMinorVersionValue>", ""),
                {"ansi-nist:TransactionMajorVersionValue", "field 1.002 (VER): needs both"});
  ExpectRefused(Edited("Z2hpamts", "Z2hp*mts"),
                {"Type-14 record 3 (IDC 2): " + kImage + "/nc:BinaryBase64Object", "field 14.999 (DATA)",
                 "character '*'"});
  ExpectRefused(Edited("Z2hpamts", "Z2hpamt"), {"nc:BinaryBase64Object", "not whole groups of 4"});
  ExpectRefused(Edited("<ansi-nist:ImageHorizontalLineLengthPixelQuantity>4<",
                       "<ansi-nist:ImageHorizontalLineLengthPixelQuantity>4</ansi-nist:ImageHorizontalLineLengthPixelQuantity>"
                       "<ansi-nist:ImageHorizontalLineLengthPixelQuantity>5<"),
                {kImage + "/ansi-nist:ImageHorizontalLineLengthPixelQuantity[2]", "field 14.006 (HLL)",
                 "appears more than once"});
  ExpectRefused(Edited("<ansi-nist:ImageBitsPerPixelQuantity>8<", "<ansi-nist:ImageBitsPerPixelQuantity><b/>8<"),
                {kImage + "/ansi-nist:ImageBitsPerPixelQuantity/b", "field 14.012 (BPX)", "should hold a value"});
  // What only the traditional checks see: named after the field, with the record's element.
  ExpectRefused(Edited("<ansi-nist:ImageHorizontalLineLengthPixelQuantity>4<",
                       "<ansi-nist:ImageHorizontalLineLengthPixelQuantity>four<"),
                {"ANSI/NIST XML: Type-14 record 3 (IDC 2): field 14.006 (HLL): 'four' is not an image width",
                 "(in " + kType14 + ")"});
  ExpectRefused(Edited("<ansi-nist:MinutiaeQuantity>2<", "<ansi-nist:MinutiaeQuantity>3<"),
                {"Type-9 record 4 (IDC 3): field 9.012 (MRC): lists 2 minutiae; 9.010 (MIN) says 3",
                 "(in " + kType9 + ")"});
  ExpectRefused(Edited("<ansi-nist:PositionThetaAngleMeasure>134</ansi-nist:PositionThetaAngleMeasure>", ""),
                {"Type-9 record 4 (IDC 3): " + kType9 + "/itl:Minutiae/itl:MinutiaeNISTStandard/itl:MinutiaDetail[2]",
                 "field 9.012 (MRC): has no biom:PositionThetaAngleMeasure"});
  ExpectRefused(Edited(">1255<", ">12555<"),
                {"itl:MinutiaDetail[1]/ansi-nist:PositionHorizontalCoordinateValue",
                 "'12555' is not a number of at most 4 digits"});
  ExpectRefused(Edited("<ansi-nist:MinutiaeFormatNISTStandardIndicator>true<",
                       "<ansi-nist:MinutiaeFormatNISTStandardIndicator>yes<"),
                {"field 9.004 (FMT): 'yes' is not a boolean"});
  // Tessera's numbered fields.
  const std::string fields_ns = " xmlns:tsr=\"urn:tessera:ansi-nist-itl:fields:1\"";
  ExpectRefused(Edited("<itl:PackageMinutiaeRecord>",
                       "<itl:PackageMinutiaeRecord" + fields_ns + "><tsr:Fields><tsr:Field>1</tsr:Field></tsr:Fields>"),
                {kType9 + "/tsr:Fields/tsr:Field", "attribute number missing"});
  ExpectRefused(Edited("<itl:PackageMinutiaeRecord>", "<itl:PackageMinutiaeRecord" + fields_ns +
                                                          "><tsr:Fields><tsr:Field number=\"2\">1</tsr:Field></tsr:Fields>"),
                {"field 9.002 (IDC): is given by its own element"});
  ExpectRefused(Edited("<itl:PackageMinutiaeRecord>",
                       "<itl:PackageMinutiaeRecord" + fields_ns +
                           "><tsr:Fields><tsr:Field number=\"320\">a<tsr:Subfield>b</tsr:Subfield></tsr:Field></tsr:Fields>"),
                {"field 9.320: mixes text ('a') with elements"});
  ExpectRefused(Edited("<itl:PackageMinutiaeRecord>",
                       "<itl:PackageMinutiaeRecord" + fields_ns + "><tsr:Field number=\"320\">a</tsr:Field>"),
                {kType9 + "/tsr:Field", "is not where Tessera's fields go"});
  // Limits.
  {
    std::string deep;
    for (int i = 0; i < 100; ++i) deep += "<ansi-nist:x>";
    ExpectRefused(Edited("<ansi-nist:ProcessName>", deep + "<ansi-nist:ProcessName>"), {"nest deeper than 64 levels"});
  }
}

TEST(AnsiNistXml, LooksLikeXmlTransaction) {
  EXPECT_TRUE(LooksLikeXmlTransaction("<itl:NISTBiometricInformationExchangePackage xmlns:itl=\"x\">"));
  EXPECT_TRUE(LooksLikeXmlTransaction("\xEF\xBB\xBF<?xml version=\"1.0\"?>\n<!-- c -->\n<?pi x?>"
                                      "<NISTBiometricInformationExchangePackage>"));
  EXPECT_TRUE(LooksLikeXmlTransaction("<!DOCTYPE x>\n<a:NISTBiometricInformationExchangePackage/>"));
  EXPECT_FALSE(LooksLikeXmlTransaction("<?xml version=\"1.0\"?><svg/>"));
  EXPECT_FALSE(LooksLikeXmlTransaction("<?xml version=\"1.0\"?><!-- never closed"));
  EXPECT_FALSE(LooksLikeXmlTransaction("1.001:57\x1d" "1.002:0400"));
  EXPECT_FALSE(LooksLikeXmlTransaction(""));
  EXPECT_FALSE(LooksLikeXmlTransaction("<NISTBiometricInformationExchangePackage"));
}

TEST(XmlTree, NamespacesEntitiesAndPaths) {
  auto doc = ParseXmlDocument(
      "<r xmlns='urn:d' xmlns:p='urn:p'><p:a k='v&amp;w'>x &lt;&#65;&#x42;<![CDATA[<c>]]></p:a><a/><p:a/></r>");
  ASSERT_TRUE(doc.ok()) << doc.status();
  const XmlElement& root = **doc;
  EXPECT_EQ(root.ns, "urn:d");
  ASSERT_EQ(root.children.size(), 3u);
  const XmlElement& a = root.children[0];
  EXPECT_TRUE(a.Is("urn:p", "a"));
  EXPECT_EQ(a.text, "x <AB<c>");
  ASSERT_NE(a.Attribute("k"), nullptr);
  EXPECT_EQ(a.Attribute("k")->value, "v&w");
  EXPECT_EQ(a.Path(), "r/p:a[1]");
  EXPECT_EQ(root.children[1].Path(), "r/a");
  EXPECT_EQ(root.children[2].Path(), "r/p:a[2]");
  EXPECT_TRUE(IsXmlText("Zürich ✓\t\r\n"));
  EXPECT_FALSE(IsXmlText(std::string("\x01", 1)));
  EXPECT_FALSE(IsXmlText("\xc0\xaf"));          // overlong
  EXPECT_FALSE(IsXmlText("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(IsXmlText("\xef\xbf\xbe"));      // U+FFFE
  EXPECT_FALSE(IsXmlText("Z\xfcrich"));          // Latin-1
  XmlLimits small;
  small.max_elements = 3;
  EXPECT_FALSE(ParseXmlDocument("<r><a/><b/><c/></r>", small).ok());
}

}  // namespace
}  // namespace ansi_nist
}  // namespace fingerprint
}  // namespace tessera
