// Template formats on the real FVC2002 templates and on hand-made records:
// parsing, strict rejection with named fields, and round trips between ISO,
// ANSI and xyt with the quantization each format implies:
//   ISO angle unit 360/256 = 1.40625 deg, ANSI 2 deg, xyt 1 deg; x, y,
//   quality exact everywhere; types exact between ISO and ANSI, lost in xyt.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "services/fingerprint/formats/fvc_data.h"
#include "services/fingerprint/formats/template.h"
#include "services/fingerprint/formats/template_ansi378.h"
#include "services/fingerprint/formats/template_io.h"
#include "services/fingerprint/formats/template_iso19794.h"
#include "services/fingerprint/formats/template_xyt.h"

namespace tessera {
namespace fingerprint {
namespace {

constexpr double kDeg = M_PI / 180.0;

double AngleDistance(double a, double b) {
  double d = std::fabs(NormalizeAngle(a) - NormalizeAngle(b));
  return std::min(d, 2 * M_PI - d);
}

// The minutiae of `got` are those of `want`: x, y, type and quality exact,
// angles within 1 degree (ANSI's 2-degree unit). The counts must agree.
void ExpectSameMinutiaeWithin1Degree(const Template& got, const Template& want) {
  ASSERT_EQ(got.minutiae.size(), want.minutiae.size());
  for (size_t i = 0; i < want.minutiae.size(); ++i) {
    const Minutia& g = got.minutiae[i];
    const Minutia& w = want.minutiae[i];
    EXPECT_EQ(g.x, w.x) << "minutia " << i;
    EXPECT_EQ(g.y, w.y) << "minutia " << i;
    EXPECT_EQ(g.type, w.type) << "minutia " << i;
    EXPECT_EQ(g.quality, w.quality) << "minutia " << i;
    EXPECT_LE(AngleDistance(g.angle, w.angle), 1.0 * kDeg + 1e-12) << "minutia " << i;
  }
}

std::string DataDir() {
  auto dir = FindFingerprintDataDir();
  EXPECT_TRUE(dir.ok()) << dir.status();
  return dir.ok() ? *dir : std::string();
}

const std::vector<FvcImpression>& Db(int db) {
  static std::map<int, std::vector<FvcImpression>>* cache = new std::map<int, std::vector<FvcImpression>>();
  auto it = cache->find(db);
  if (it == cache->end()) {
    auto loaded = LoadFvc2002(DataDir(), db);
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    it = cache->emplace(db, loaded.ok() ? *std::move(loaded) : std::vector<FvcImpression>()).first;
  }
  return it->second;
}

Template SmallTemplate() {
  Template t;
  t.width = 300;
  t.height = 400;
  t.capture_equipment = 0x1abc;
  t.finger_position = 7;
  t.view_number = 2;
  t.impression_type = 1;
  t.finger_quality = 61;
  t.minutiae = {{10, 20, 0.0, MinutiaType::kEnding, 50},
                {299, 399, 359 * kDeg, MinutiaType::kBifurcation, 100},
                {0, 0, 90 * kDeg, MinutiaType::kOther, 0}};
  return t;
}

// ---------------------------------------------------------------------------
// Real data.

TEST(TemplateRealData, All320TemplatesParse) {
  // Minutiae totals per DB counted independently from the raw bytes.
  const int expected_total[5] = {0, 2719, 3257, 2114, 2124};
  for (int db = 1; db <= 4; ++db) {
    const auto& imps = Db(db);
    ASSERT_EQ(imps.size(), 80u) << "DB" << db;
    int total = 0, endings = 0, bifurcations = 0, min_n = 1000, max_n = 0;
    for (const FvcImpression& imp : imps) {
      const Template& t = imp.view;
      EXPECT_EQ(t.width, 300);
      EXPECT_EQ(t.height, 400);
      EXPECT_EQ(t.x_resolution, 197);
      EXPECT_EQ(t.y_resolution, 197);
      const int n = static_cast<int>(t.minutiae.size());
      min_n = std::min(min_n, n);
      max_n = std::max(max_n, n);
      total += n;
      for (const Minutia& m : t.minutiae) {
        EXPECT_GE(m.x, 0);
        EXPECT_LT(m.x, 300);
        EXPECT_GE(m.y, 0);
        EXPECT_LT(m.y, 400);
        EXPECT_GE(m.angle, 0);
        EXPECT_LT(m.angle, 2 * M_PI);
        EXPECT_NE(m.type, MinutiaType::kOther);  // this extractor labels every minutia
        endings += m.type == MinutiaType::kEnding;
        bifurcations += m.type == MinutiaType::kBifurcation;
        EXPECT_EQ(m.quality, 0);  // not reported by this extractor
      }
      EXPECT_TRUE(ValidateTemplate(t).ok()) << imp.path;
    }
    EXPECT_EQ(total, expected_total[db]) << "DB" << db;
    EXPECT_GE(min_n, 10);
    EXPECT_LE(max_n, 80);
    EXPECT_EQ(endings + bifurcations, total);
    std::printf("DB%d: 80 templates, %d minutiae (%d..%d per template), %d endings, %d bifurcations\n", db, total,
                min_n, max_n, endings, bifurcations);
  }
}

TEST(TemplateRealData, TruncatedFilesAreDataLoss) {
  const std::string dir = DataDir() + "/invalid/";
  for (const char* name :
       {"101_1_truncate_1_byte.iso", "101_1_truncate_2_bytes.iso", "101_1_truncate_3_bytes.iso"}) {
    auto bytes = ReadFileBytes(dir + name);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    EXPECT_EQ(SniffTemplateFormat(*bytes), TemplateFormat::kIso19794) << name;
    auto parsed = ParseTemplateRecord(*bytes);
    ASSERT_FALSE(parsed.ok()) << name;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss) << parsed.status();
    EXPECT_NE(parsed.status().message().find("record length field says 30 bytes"), std::string::npos)
        << parsed.status();
    // The file API names the path.
    auto from_file = ReadTemplateFile(dir + name);
    ASSERT_FALSE(from_file.ok());
    EXPECT_NE(from_file.status().message().find(name), std::string::npos) << from_file.status();
    // Restoring the missing bytes (a zero-minutia view and an empty extended
    // data block) gives a valid record.
    std::vector<uint8_t> fixed = *bytes;
    fixed.resize(30, 0);
    auto ok = ParseIso19794(fixed);
    ASSERT_TRUE(ok.ok()) << ok.status();
    EXPECT_EQ(ok->size(), 1u);
    EXPECT_TRUE((*ok)[0].minutiae.empty());
  }
}

TEST(TemplateRealData, IsoRoundTripIsByteExact) {
  for (int db = 1; db <= 4; ++db) {
    for (const FvcImpression& imp : Db(db)) {
      auto original = ReadFileBytes(imp.path);
      ASSERT_TRUE(original.ok());
      auto written = WriteIso19794({imp.view});
      ASSERT_TRUE(written.ok()) << written.status();
      EXPECT_EQ(*written, *original) << imp.path;
    }
  }
}

TEST(TemplateRealData, IsoAnsiXytRoundTrips) {
  int angle_exact_after_ansi = 0, total = 0;
  for (int db = 1; db <= 4; ++db) {
    for (const FvcImpression& imp : Db(db)) {
      const Template& iso = imp.view;
      // ISO -> ANSI: exact but for angles (2-degree units: within 1 degree).
      auto ansi_bytes = WriteAnsi378({iso});
      ASSERT_TRUE(ansi_bytes.ok()) << ansi_bytes.status();
      EXPECT_EQ(SniffTemplateFormat(*ansi_bytes), TemplateFormat::kAnsi378);
      auto ansi = ParseTemplateRecord(*ansi_bytes);
      ASSERT_TRUE(ansi.ok()) << ansi.status();
      ASSERT_EQ(ansi->size(), 1u);
      const Template& a = (*ansi)[0];
      ASSERT_EQ(a.minutiae.size(), iso.minutiae.size());
      EXPECT_EQ(a.width, iso.width);
      EXPECT_EQ(a.height, iso.height);
      EXPECT_EQ(a.x_resolution, iso.x_resolution);
      ExpectSameMinutiaeWithin1Degree(a, iso);
      // ANSI is idempotent: writing what was read gives the same bytes.
      auto ansi_again = WriteAnsi378(*ansi);
      ASSERT_TRUE(ansi_again.ok());
      EXPECT_EQ(*ansi_again, *ansi_bytes);
      // ANSI -> ISO: back on the 1.40625-degree grid, at most one unit away.
      auto iso_again = ParseIso19794(*WriteIso19794(*ansi));
      ASSERT_TRUE(iso_again.ok()) << iso_again.status();
      for (size_t i = 0; i < iso.minutiae.size(); ++i) {
        const double d = AngleDistance((*iso_again)[0].minutiae[i].angle, iso.minutiae[i].angle);
        EXPECT_LE(d, 360.0 / 256 * kDeg + 1e-12);
        angle_exact_after_ansi += d < 1e-12;
        ++total;
      }
      // ANSI -> xyt (top-left): x, y, quality exact; theta within 0.5 degree
      // of the ANSI angle; types are not representable.
      auto xyt_text = WriteXyt(a);
      ASSERT_TRUE(xyt_text.ok()) << xyt_text.status();
      XytOptions size;
      size.width = a.width;
      size.height = a.height;
      auto from_xyt = ParseXyt(*xyt_text, size);
      ASSERT_TRUE(from_xyt.ok()) << from_xyt.status();
      ASSERT_EQ(from_xyt->minutiae.size(), a.minutiae.size());
      for (size_t i = 0; i < a.minutiae.size(); ++i) {
        EXPECT_EQ(from_xyt->minutiae[i].x, a.minutiae[i].x);
        EXPECT_EQ(from_xyt->minutiae[i].y, a.minutiae[i].y);
        EXPECT_EQ(from_xyt->minutiae[i].quality, a.minutiae[i].quality);
        EXPECT_EQ(from_xyt->minutiae[i].type, MinutiaType::kOther);
        EXPECT_LE(AngleDistance(from_xyt->minutiae[i].angle, a.minutiae[i].angle), 0.5 * kDeg + 1e-12);
      }
      // ISO -> xyt -> ISO directly: within half a degree plus half an ISO unit.
      auto direct = ParseXyt(*WriteXyt(iso), size);
      ASSERT_TRUE(direct.ok());
      Template typed = *direct;
      auto iso3 = ParseIso19794(*WriteIso19794({typed}));
      ASSERT_TRUE(iso3.ok());
      for (size_t i = 0; i < iso.minutiae.size(); ++i) {
        EXPECT_LE(AngleDistance((*iso3)[0].minutiae[i].angle, iso.minutiae[i].angle),
                  (0.5 + 360.0 / 512) * kDeg + 1e-12);
      }
    }
  }
  std::printf("ISO->ANSI->ISO: %d of %d angles unchanged, the rest moved by one 1.40625-degree unit\n",
              angle_exact_after_ansi, total);
  EXPECT_GT(angle_exact_after_ansi, total / 2);
}

TEST(TemplateRealData, NistConventionFlipsYAndTurnsTheta) {
  const Template& iso = Db(1)[0].view;
  XytOptions nist;
  nist.convention = XytConvention::kNist;
  auto text = WriteXyt(iso, nist);
  ASSERT_TRUE(text.ok());
  // First minutia of 101_1: x=165, y=48, ISO angle 107 units (150.47 deg).
  EXPECT_EQ(text->substr(0, text->find('\n')), "165 352 330 0");
  nist.height = 400;
  nist.width = 300;
  auto back = ParseXyt(*text, nist);
  ASSERT_TRUE(back.ok()) << back.status();
  for (size_t i = 0; i < iso.minutiae.size(); ++i) {
    EXPECT_EQ(back->minutiae[i].x, iso.minutiae[i].x);
    EXPECT_EQ(back->minutiae[i].y, iso.minutiae[i].y);
    EXPECT_LE(AngleDistance(back->minutiae[i].angle, iso.minutiae[i].angle), 0.5 * kDeg + 1e-12);
  }
  // Without the height the NIST convention cannot be undone.
  XytOptions no_height;
  no_height.convention = XytConvention::kNist;
  EXPECT_EQ(ParseXyt(*text, no_height).status().code(), absl::StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------
// Hand-made records.

TEST(TemplateFormats, FieldsSurviveIsoAndAnsi) {
  Template t = SmallTemplate();
  t.cbeff_product_id = 0x00330101;
  t.extended_data = {{0x0001, std::string("\x03\x01\x02", 3)}, {0x0102, ""}};
  Template second = t;
  second.finger_position = 2;
  second.view_number = 0;
  second.minutiae.pop_back();
  second.extended_data.clear();
  for (TemplateFormat format : {TemplateFormat::kIso19794, TemplateFormat::kAnsi378}) {
    auto bytes = WriteTemplateRecord(format, {t, second});
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    EXPECT_EQ(SniffTemplateFormat(*bytes), format);
    auto views = ParseTemplateRecord(*bytes);
    ASSERT_TRUE(views.ok()) << views.status();
    ASSERT_EQ(views->size(), 2u);
    for (int v = 0; v < 2; ++v) {
      const Template& want = v == 0 ? t : second;
      const Template& got = (*views)[v];
      EXPECT_EQ(got.width, want.width);
      EXPECT_EQ(got.height, want.height);
      EXPECT_EQ(got.capture_equipment, want.capture_equipment);
      EXPECT_EQ(got.cbeff_product_id, format == TemplateFormat::kAnsi378 ? want.cbeff_product_id : 0u);
      EXPECT_EQ(got.finger_position, want.finger_position);
      EXPECT_EQ(got.view_number, want.view_number);
      EXPECT_EQ(got.impression_type, want.impression_type);
      EXPECT_EQ(got.finger_quality, want.finger_quality);
      EXPECT_EQ(got.extended_data, want.extended_data);
      ExpectSameMinutiaeWithin1Degree(got, want);
    }
  }
}

TEST(TemplateFormats, AngleQuantization) {
  Template t = SmallTemplate();
  t.minutiae = {{1, 1, 359.5 * kDeg, MinutiaType::kEnding, 0},  // wraps to 0 in ANSI and ISO
                {1, 1, 1.0 * kDeg, MinutiaType::kEnding, 0},    // ANSI: odd degree rounds (to 2)
                {1, 1, 2 * M_PI * 107 / 256, MinutiaType::kEnding, 0}};
  auto iso = ParseIso19794(*WriteIso19794({t}));
  auto ansi = ParseAnsi378(*WriteAnsi378({t}));
  ASSERT_TRUE(iso.ok() && ansi.ok());
  EXPECT_EQ((*iso)[0].minutiae[0].angle, 0.0);
  EXPECT_EQ((*ansi)[0].minutiae[0].angle, 0.0);
  EXPECT_NEAR((*ansi)[0].minutiae[1].angle, 2 * kDeg, 1e-12);
  EXPECT_DOUBLE_EQ((*iso)[0].minutiae[2].angle, 2 * M_PI * 107 / 256);
}

TEST(TemplateFormats, AnsiLongLengthForm) {
  Template t = SmallTemplate();
  t.extended_data = {{0x0100, std::string(60000, 'v')}};
  Template u = t;
  u.view_number = 1;
  auto bytes = WriteAnsi378({t, u});
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  ASSERT_GT(bytes->size(), 65535u);
  EXPECT_EQ((*bytes)[8], 0);
  EXPECT_EQ((*bytes)[9], 0);
  EXPECT_EQ(SniffTemplateFormat(*bytes), TemplateFormat::kAnsi378);
  auto back = ParseTemplateRecord(*bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)[1].extended_data, u.extended_data);
  // ISO records over 64 KiB are recognised too.
  auto iso_bytes = WriteIso19794({t, u});
  ASSERT_TRUE(iso_bytes.ok());
  EXPECT_EQ(SniffTemplateFormat(*iso_bytes), TemplateFormat::kIso19794);
  EXPECT_TRUE(ParseTemplateRecord(*iso_bytes).ok());
}

// Applies `edit` to a fresh ISO (or ANSI) record of SmallTemplate() and
// expects `code` with `needle` in the message.
void ExpectRejected(TemplateFormat format, const std::function<void(std::vector<uint8_t>&)>& edit,
                    absl::StatusCode code, const std::string& needle) {
  std::vector<uint8_t> bytes = *WriteTemplateRecord(format, {SmallTemplate()});
  edit(bytes);
  auto parsed = format == TemplateFormat::kIso19794 ? ParseIso19794(bytes) : ParseAnsi378(bytes);
  ASSERT_FALSE(parsed.ok()) << "accepted; wanted " << needle;
  EXPECT_EQ(parsed.status().code(), code) << parsed.status();
  EXPECT_NE(parsed.status().message().find(needle), std::string::npos) << parsed.status();
}

TEST(TemplateFormats, IsoRejectsInconsistentRecords) {
  using C = absl::StatusCode;
  const auto iso = TemplateFormat::kIso19794;
  // Record layout: header 24, view header at 24..27, minutiae from 28, 6 each.
  ExpectRejected(iso, [](auto& b) { b[4] = '3'; }, C::kInvalidArgument, "unsupported version");
  ExpectRejected(iso, [](auto& b) { b.pop_back(); }, C::kDataLoss, "record length field says");
  ExpectRejected(iso, [](auto& b) { b.push_back(0); }, C::kInvalidArgument, "1 bytes follow the record");
  ExpectRejected(iso, [](auto& b) { b[11] = 10; }, C::kInvalidArgument, "smaller than the 24-byte header");
  ExpectRejected(iso, [](auto& b) { b[14] = b[15] = 0; }, C::kInvalidArgument, "image width 0");
  ExpectRejected(iso, [](auto& b) { b[19] = b[18] = 0; }, C::kInvalidArgument, "x resolution is 0");
  ExpectRejected(iso, [](auto& b) { b[22] = 0; }, C::kInvalidArgument, "number of finger views is 0");
  ExpectRejected(iso, [](auto& b) { b[22] = 2; }, C::kInvalidArgument, "finger view 1 header");
  ExpectRejected(iso, [](auto& b) { b[23] = 1; }, C::kInvalidArgument, "reserved header byte");
  ExpectRejected(iso, [](auto& b) { b[24] = 11; }, C::kInvalidArgument, "finger position 11");
  ExpectRejected(iso, [](auto& b) { b[26] = 101; }, C::kInvalidArgument, "finger quality 101");
  ExpectRejected(iso, [](auto& b) { b[27] = 4; }, C::kInvalidArgument, "4 minutiae");
  ExpectRejected(iso, [](auto& b) { b[27] = 2; }, C::kInvalidArgument, "6 bytes after the last finger view");
  ExpectRejected(iso, [](auto& b) { b[28] |= 0xc0; }, C::kInvalidArgument, "minutia 0: reserved type code");
  ExpectRejected(iso, [](auto& b) { b[30] |= 0x40; }, C::kInvalidArgument, "reserved bits above y");
  ExpectRejected(iso, [](auto& b) { b[29] = 0x2c; b[28] = (b[28] & 0xc0) | 0x01; }, C::kInvalidArgument,
                 "x=300 outside the image width 300");
  ExpectRejected(iso, [](auto& b) { b[31] = 0x90; b[30] = 0x01; }, C::kInvalidArgument,
                 "y=400 outside the image height 400");
  ExpectRejected(iso, [](auto& b) { b[33] = 101; }, C::kInvalidArgument, "minutia 0: quality 101");
}

TEST(TemplateFormats, ExtendedDataMustTileItsBlock) {
  using C = absl::StatusCode;
  Template t = SmallTemplate();
  t.extended_data = {{0x0002, "abcd"}};
  std::vector<uint8_t> good = *WriteIso19794({t});
  const size_t ext = good.size() - 10;  // block length (2), type (2), area length (2), data (4)
  ASSERT_EQ(good[ext + 1], 8);
  ASSERT_EQ(good[ext + 5], 8);
  auto with = [&](size_t at, uint8_t value) {
    std::vector<uint8_t> b = good;
    b[at] = value;
    return ParseIso19794(b).status();
  };
  EXPECT_EQ(with(ext + 5, 3).code(), C::kInvalidArgument);   // area shorter than its header
  EXPECT_EQ(with(ext + 5, 11).code(), C::kInvalidArgument);  // area past its block
  EXPECT_NE(with(ext + 5, 11).message().find("extended data area 0"), std::string::npos);
  EXPECT_EQ(with(ext + 5, 6).code(), C::kInvalidArgument);   // leaves 2 bytes, too few for a header
  EXPECT_EQ(with(ext + 1, 12).code(), C::kInvalidArgument);  // block longer than the record
  EXPECT_TRUE(ParseIso19794(good).ok());
}

TEST(TemplateFormats, AnsiRejectsInconsistentRecords) {
  using C = absl::StatusCode;
  const auto ansi = TemplateFormat::kAnsi378;
  // Layout: length at 8..9, product id 10..13, header to 26, view header 26..29, minutiae from 30.
  ExpectRejected(ansi, [](auto& b) { b.pop_back(); }, C::kDataLoss, "record length field says");
  ExpectRejected(ansi, [](auto& b) { b[32 + 2] = 180; }, C::kInvalidArgument, "angle 180 outside 0..179");
  ExpectRejected(ansi, [](auto& b) { b[29] = 5; }, C::kInvalidArgument, "5 minutiae");
  ExpectRejected(ansi, [](auto& b) { b[16] = b[17] = 0; }, C::kInvalidArgument, "image width 0");
}

TEST(TemplateFormats, WritersValidate) {
  auto code_of = [](Template t) { return WriteIso19794({t}).status().code(); };
  Template t = SmallTemplate();
  EXPECT_EQ(code_of(t), absl::StatusCode::kOk);
  t.minutiae[0].x = 300;
  EXPECT_EQ(code_of(t), absl::StatusCode::kInvalidArgument);
  t = SmallTemplate();
  t.minutiae[0].quality = 101;
  EXPECT_EQ(code_of(t), absl::StatusCode::kInvalidArgument);
  t = SmallTemplate();
  t.minutiae[0].angle = NAN;
  EXPECT_EQ(code_of(t), absl::StatusCode::kInvalidArgument);
  t = SmallTemplate();
  t.width = 20000;
  EXPECT_EQ(code_of(t), absl::StatusCode::kInvalidArgument);
  t = SmallTemplate();
  t.minutiae.resize(256);
  EXPECT_EQ(code_of(t), absl::StatusCode::kInvalidArgument);
  t = SmallTemplate();
  t.finger_position = 11;
  EXPECT_EQ(code_of(t), absl::StatusCode::kInvalidArgument);
  Template other = SmallTemplate();
  other.width = 301;
  EXPECT_EQ(WriteAnsi378({SmallTemplate(), other}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteIso19794({}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteTemplateRecord(TemplateFormat::kXyt, {t, t}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TemplateXyt, ParsesCommentsBlankLinesAndCrlf) {
  const std::string text = "# mindtct -m1\r\n\r\n10 20 90 55\r\n  11\t21 0 60\n\n12 22 359 0";
  auto t = ParseXyt(text);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->minutiae.size(), 3u);
  EXPECT_EQ(t->minutiae[1].x, 11);
  EXPECT_EQ(t->minutiae[1].y, 21);
  EXPECT_EQ(t->minutiae[1].quality, 60);
  EXPECT_NEAR(t->minutiae[0].angle, M_PI / 2, 1e-12);
  EXPECT_EQ(t->width, 13);  // derived: max x + 1
  EXPECT_EQ(t->height, 23);
  EXPECT_EQ(SniffTemplateFormat(std::vector<uint8_t>(text.begin(), text.end())), TemplateFormat::kXyt);
  auto three = ParseXyt("1 2 3\n4 5 6\n");
  ASSERT_TRUE(three.ok());
  EXPECT_EQ(three->minutiae[1].quality, 0);
  auto empty = ParseXyt("");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->minutiae.empty());
  // Whitespace sniffs as xyt with no minutiae; it writes back as empty text,
  // which only the format-specific parser accepts (found by libFuzzer).
  const std::vector<uint8_t> space = {' '};
  auto blank = ParseTemplateRecord(space);
  ASSERT_TRUE(blank.ok()) << blank.status();
  auto written = WriteTemplateRecord(TemplateFormat::kXyt, *blank);
  ASSERT_TRUE(written.ok());
  EXPECT_TRUE(written->empty());
  EXPECT_FALSE(ParseTemplateRecord(*written).ok());
  EXPECT_TRUE(ParseTemplateRecordAs(TemplateFormat::kXyt, *written).ok());
}

TEST(TemplateXyt, RejectsBadLines) {
  auto expect_bad = [](const std::string& text, const std::string& needle, XytOptions o = {}) {
    auto t = ParseXyt(text, o);
    ASSERT_FALSE(t.ok()) << text;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find(needle), std::string::npos) << t.status();
  };
  expect_bad("1 2\n", "line 1: 2 fields");
  expect_bad("1 2 3 4 5\n", "5 fields");
  expect_bad("1 2 3\n1 2 3 4\n", "line 2: 4 fields where earlier lines have 3");
  expect_bad("1 2 x\n", "theta \"x\" is not an integer");
  expect_bad("1 2 3.5\n", "theta \"3.5\" is not an integer");
  expect_bad("1 2 360\n", "theta=360 outside 0..359");
  expect_bad("-1 2 3\n", "x=-1");
  expect_bad("1 2 3 101\n", "quality=101");
  expect_bad("1 2 3 1234567890\n", "is not an integer");
  expect_bad("1 16384 3\n", "y=16384");
  XytOptions sized;
  sized.width = 10;
  sized.height = 10;
  expect_bad("10 2 3\n", "x=10 outside the image width 10", sized);
  std::string many;
  for (int i = 0; i < 256; ++i) many += "1 1 1\n";
  expect_bad(many, "more than 255 minutiae");
  EXPECT_EQ(SniffTemplateFormat(std::vector<uint8_t>{0x00, 0x01, 0xff}), TemplateFormat::kUnknown);
  EXPECT_EQ(ParseTemplateRecord(std::vector<uint8_t>{0x00, 0x01, 0xff}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseTemplateRecord(std::vector<uint8_t>{}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TemplateIo, FormatNamesAndMissingFiles) {
  EXPECT_EQ(*ParseTemplateFormatName("ISO"), TemplateFormat::kIso19794);
  EXPECT_EQ(*ParseTemplateFormatName("ansi378-2004"), TemplateFormat::kAnsi378);
  EXPECT_EQ(*ParseTemplateFormatName("xyt"), TemplateFormat::kXyt);
  EXPECT_FALSE(ParseTemplateFormatName("wsq").ok());
  EXPECT_EQ(TemplateFormatName(TemplateFormat::kIso19794), "iso19794-2:2005");
  EXPECT_EQ(ReadTemplateFile("/nonexistent/x.iso").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
