// Deterministic fuzzing of the ANSI/NIST-ITL XML reader: packages written
// from a synthetic transaction and from NIST's reference transactions (when
// the shared data is present), and a hand-written NIEM package, are
// truncated, bit-flipped, have markup characters, entities, digits, lines and
// element names changed, inserted and deleted. The reader must answer OK or
// INVALID_ARGUMENT, never crash, read out of bounds (run under ASan/UBSan to
// check) or take long; whatever parses must write as XML and read back to the
// same records.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "services/fingerprint/formats/ansi_nist.h"
#include "services/fingerprint/formats/ansi_nist_testing.h"
#include "services/fingerprint/formats/ansi_nist_views.h"
#include "services/fingerprint/formats/ansi_nist_xml.h"
#include "services/fingerprint/formats/fvc_data.h"

namespace tessera {
namespace fingerprint {
namespace ansi_nist {
namespace {

constexpr char kEnd[] = "</itl:NISTBiometricInformationExchangePackage>";

struct Seed {
  std::string name;
  std::string bytes;
  std::vector<std::pair<size_t, size_t>> base64;  // [begin, end) of nc:BinaryBase64Object texts
};

using ansi_nist_testing::Data;
using ansi_nist_testing::F;
using ansi_nist_testing::V;

void AddSeed(std::vector<Seed>* seeds, std::string name, std::string bytes) {
  Seed s{std::move(name), std::move(bytes), {}};
  const std::string open = "<nc:BinaryBase64Object>";
  for (size_t at = s.bytes.find(open); at != std::string::npos; at = s.bytes.find(open, at + 1)) {
    const size_t begin = at + open.size();
    const size_t end = s.bytes.find('<', begin);
    if (end == std::string::npos) break;
    s.base64.emplace_back(begin, end);
  }
  seeds->push_back(std::move(s));
}

std::vector<Seed> Seeds() {
  std::vector<Seed> seeds;
  // Written here: every covered type, named and tsr: fields.
  Transaction t;
  t.records = {
      {1, 0, {V(1, "0"), V(2, "0500"), F(3, {{"1", "0"}}), V(4, "CAR"), V(5, "20261206"), V(9, "TCN"),
              V(11, "19.69"), V(12, "19.69"), F(13, {{"NORAM", ""}}), V(14, "20261206105507Z"),
              F(17, {{"D & Co", "<O>"}}), V(19, "x")}},
      {2, 0, {V(1, "0"), V(2, "00"), V(3, "text"), F(18, {{"a", "b"}, {"c"}})}},
      {9, 1, {V(1, "0"), V(2, "01"), V(3, "0"), V(4, "S"), F(5, {{"AFIS", "M"}}), F(6, {{"02"}}),
              F(7, {{"T", "UN"}}), F(8, {{"20472583"}}), V(10, "2"), V(11, "1"),
              F(12, {{"001", "00100020090", "10", "A", "002,03"}, {"002", "00300040180", "63", "B"}}),
              F(300, {{"200", "300", "0", "0", "0,0-199,0-199,299"}}),
              F(331, {{"10", "20", "90", "E"}, {"30", "40", "359", "B"}})}},
      {14, 1, {V(1, "0"), V(2, "01"), V(3, "1"), V(4, "SRC"), V(5, "20261206"), V(6, "4"), V(7, "3"), V(8, "1"),
               V(9, "500"), V(10, "500"), V(11, "NONE"), V(12, "8"), F(13, {{"2"}}), F(14, {{"7", "TIP"}}),
               F(15, {{"TIP", "NA", "1", "3", "0", "2"}}), F(22, {{"2", "1"}}), F(24, {{"2", "80", "0", "1"}}),
               Data(std::string(12, '\x1c'))}},
      {13, 2, {V(1, "0"), V(2, "02"), V(3, "4"), V(6, "2"), V(7, "2"), V(8, "2"), V(9, "197"), V(11, "NONE"),
               F(13, {{"8"}}), Data("wxyz")}},
      {15, 3, {V(1, "0"), V(2, "03"), V(3, "12"), V(6, "2"), V(7, "1"), V(8, "1"), V(9, "500"), V(11, "NONE"),
               V(13, "22"), Data("pq")}},
      {4, 4, {V(1, "0"), V(2, "4"), V(3, "1"), F(4, {{"1", "255", "255", "255", "255", "255"}}), V(5, "0"),
              V(6, "2"), V(7, "2"), V(8, "0"), Data("abcd")}},
  };
  auto written = WriteXmlTransaction(t);
  EXPECT_TRUE(written.ok()) << written.status();
  if (written.ok()) AddSeed(&seeds, "synthetic", *written);
  auto dir = FindFingerprintDataDir();
  if (!dir.ok()) return seeds;
  for (const char* sub : {"nist/ansi-nist-reference", "nist/libbiomeval"}) {
    const std::filesystem::path d = std::filesystem::path(*dir) / sub;
    if (!std::filesystem::is_directory(d)) continue;
    std::vector<std::filesystem::path> paths;
    for (const auto& e : std::filesystem::directory_iterator(d)) paths.push_back(e.path());
    std::sort(paths.begin(), paths.end());
    for (const auto& p : paths) {
      const std::string ext = p.extension().string();
      if (ext != ".an2" && ext != ".an2k") continue;
      std::ifstream in(p, std::ios::binary);
      std::ostringstream s;
      s << in.rdbuf();
      auto parsed = ParseTransaction(s.str());
      if (!parsed.ok()) continue;
      auto xml = WriteXmlTransaction(*parsed);
      EXPECT_TRUE(xml.ok()) << p << ": " << xml.status();
      if (xml.ok()) AddSeed(&seeds, p.filename().string() + ".xml", *xml);
    }
  }
  return seeds;
}

struct Outcome {
  int ok = 0;
  int invalid = 0;
  double max_ms = 0;
};

// Parses `b`, checking the contract; counts the outcome. Returns whether it parsed.
bool Check(const std::string& b, Outcome* out) {
  const auto start = std::chrono::steady_clock::now();
  auto t = ParseXmlTransaction(b);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  out->max_ms = std::max(out->max_ms, ms);
  if (!t.ok()) {
    ++out->invalid;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << t.status();
    EXPECT_FALSE(t.status().message().empty());
    return false;
  }
  ++out->ok;
  EXPECT_TRUE(Images(*t).ok());
  EXPECT_TRUE(Minutiae(*t).ok());
  EXPECT_TRUE(WriteTransaction(*t).ok());
  auto written = WriteXmlTransaction(*t);
  EXPECT_TRUE(written.ok()) << written.status();
  if (!written.ok()) return true;
  auto back = ParseXmlTransaction(*written);
  EXPECT_TRUE(back.ok()) << back.status();
  if (back.ok()) {
    EXPECT_TRUE(*back == *t);
  }
  return true;
}

TEST(AnsiNistXmlFuzz, TruncatedNeverCrashes) {
  std::mt19937 rng(20261206);
  Outcome out;
  int cases = 0;
  for (const Seed& seed : Seeds()) {
    SCOPED_TRACE(seed.name);
    const std::string& b = seed.bytes;
    std::vector<size_t> cuts;
    if (b.size() <= 40000) {
      for (size_t n = 0; n < b.size(); ++n) cuts.push_back(n);
    } else {  // the head, around every record element, the tail and 100 anywhere
      for (size_t n = 0; n < 3000; ++n) cuts.push_back(n);
      for (size_t at = b.find("\n  <itl:Package"); at != std::string::npos; at = b.find("\n  <itl:Package", at + 1)) {
        for (size_t n = at > 100 ? at - 100 : 0; n < std::min(b.size(), at + 250); ++n) cuts.push_back(n);
      }
      for (size_t n = b.size() - 200; n < b.size(); ++n) cuts.push_back(n);
      for (int i = 0; i < 100; ++i) cuts.push_back(std::uniform_int_distribution<size_t>(0, b.size() - 1)(rng));
    }
    for (size_t n : cuts) {
      const std::string cut = b.substr(0, n);
      const bool parsed = Check(cut, &out);
      // Only a cut in the whitespace after the package's end tag leaves a document.
      EXPECT_EQ(parsed, cut.find(kEnd) != std::string::npos) << n;
      ++cases;
      if (HasFailure()) return;
    }
  }
  std::printf("truncations: %d cases, %d ok, %d INVALID_ARGUMENT, slowest %.2f ms\n", cases, out.ok, out.invalid,
              out.max_ms);
  EXPECT_LT(out.max_ms, 1000);
}

TEST(AnsiNistXmlFuzz, MutatedPackagesNeverCrash) {
  std::mt19937 rng(20261207);
  auto uniform = [&rng](size_t lo, size_t hi) { return std::uniform_int_distribution<size_t>(lo, hi)(rng); };
  static const char* const kInserts[] = {
      "&#1;", "&#0;", "&bogus;", "&#x10FFFF;", "&#xD800;", "<![CDATA[", "]]>", "<!--", "-->", "<?pi x?>",
      "<!DOCTYPE x [<!ENTITY a 'b'>]>", "xmlns:biom=\"urn:other\"", "</biom:x>", "<biom:x>", "<tsr:Field number=\"7\">",
      "99999999999999999999", "\xEF\xBF\xBE", "\xC0\xAF", "\xFF", " number=\"1\"", "=\"\"", "&amp;",
  };
  Outcome out;
  int cases = 0;
  for (const Seed& seed : Seeds()) {
    SCOPED_TRACE(seed.name);
    const std::string& orig = seed.bytes;
    const int rounds = orig.size() > 1000000 ? 100 : orig.size() > 500000 ? 200 : orig.size() > 100000 ? 1200 : 2500;
    // Positions: three in four in the markup, outside the base64 image data.
    auto in_base64 = [&seed](size_t at) {
      for (const auto& [begin, end] : seed.base64) {
        if (at >= begin && at < end) return true;
      }
      return false;
    };
    for (int round = 0; round < rounds; ++round) {
      std::string b = orig;
      auto pos = [&]() {
        size_t at = uniform(0, b.size() - 1);
        if (uniform(0, 3) != 0 && b.size() == orig.size()) {
          for (int tries = 0; tries < 32 && in_base64(at); ++tries) at = uniform(0, b.size() - 1);
        }
        return at;
      };
      const int kind = static_cast<int>(uniform(0, 9));
      for (int n = static_cast<int>(uniform(1, 3)); n > 0 && !b.empty(); --n) {
        switch (kind) {
          case 0:  // flip bits
            b[pos()] ^= static_cast<char>(1u << uniform(0, 7));
            break;
          case 1: {  // change a digit (counts, IDCs, coordinates, dates)
            size_t at = pos();
            const size_t digit = b.find_first_of("0123456789", at);
            if (digit != std::string::npos) at = digit;
            b[at] = static_cast<char>('0' + uniform(0, 9));
            break;
          }
          case 2:  // a markup character
            b[pos()] = "<>&;\"'=/:![]-?#x \n"[uniform(0, 17)];
            break;
          case 3:  // insert a run
            b.insert(pos(), std::string(uniform(1, 8), static_cast<char>(uniform(0, 255))));
            break;
          case 4: {  // delete a run
            const size_t at = pos();
            b.erase(at, uniform(1, 16));
            break;
          }
          case 5: {  // overwrite a run with random bytes
            const size_t at = pos();
            for (size_t i = at; i < std::min(b.size(), at + uniform(1, 16)); ++i) b[i] = static_cast<char>(uniform(0, 255));
            break;
          }
          case 6: {  // duplicate, drop or move a whole line (an element)
            const size_t at = b.rfind('\n', pos());
            const size_t begin = at == std::string::npos ? 0 : at + 1;
            const size_t end = std::min(b.size(), b.find('\n', begin) == std::string::npos ? b.size() : b.find('\n', begin) + 1);
            const std::string line = b.substr(begin, end - begin);
            const int how = static_cast<int>(uniform(0, 2));
            if (how != 0) b.erase(begin, end - begin);
            if (how != 1 && !b.empty()) b.insert(how == 0 ? begin : b.rfind('\n', pos()) + 1, line);
            break;
          }
          case 7: {  // rename an element: its name replaced by another one from the document
            const size_t a = b.find('<', pos());
            const size_t c = b.find('<', pos());
            if (a == std::string::npos || c == std::string::npos) break;
            const size_t a_end = b.find_first_of(" />", a + 1), c_end = b.find_first_of(" />", c + 1);
            if (a_end == std::string::npos || c_end == std::string::npos) break;
            const std::string name = b.substr(c + 1, c_end - c - 1);
            b.replace(a + 1, a_end - a - 1, name);
            break;
          }
          case 8:  // entities, CDATA, comments, DOCTYPEs, namespaces, odd UTF-8
            b.insert(pos(), kInserts[uniform(0, sizeof(kInserts) / sizeof(kInserts[0]) - 1)]);
            break;
          default: {  // a value emptied: the text between '>' and '<'
            const size_t gt = b.find('>', pos());
            if (gt == std::string::npos) break;
            const size_t lt = b.find('<', gt);
            if (lt != std::string::npos) b.erase(gt + 1, lt - gt - 1);
            break;
          }
        }
      }
      Check(b, &out);
      ++cases;
      if (HasFailure()) return;
    }
  }
  std::printf("mutations: %d cases, %d ok, %d INVALID_ARGUMENT, slowest %.2f ms\n", cases, out.ok, out.invalid,
              out.max_ms);
  EXPECT_GT(out.invalid, 0);
  EXPECT_GT(out.ok, 0);
  EXPECT_LT(out.max_ms, 1000);
}

}  // namespace
}  // namespace ansi_nist
}  // namespace fingerprint
}  // namespace tessera
