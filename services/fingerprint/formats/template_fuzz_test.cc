// Deterministic fuzzing of the template parsers: real FVC2002 templates (as
// ISO, ANSI and xyt) are truncated, bit-flipped, have their length and count
// fields corrupted, bytes inserted and deleted, and are spliced together.
// Every parser must return OK or a clean DATA_LOSS / INVALID_ARGUMENT error,
// never crash or read out of bounds (run under ASan/UBSan with
// --copt=-fsanitize=address,undefined --linkopt=-fsanitize=address,undefined
// to check the latter). Whatever parses must also validate, re-serialize and
// re-parse to the same views.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
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

struct Seeds {
  std::vector<std::vector<uint8_t>> records;  // valid inputs of every format
};

const Seeds& GetSeeds() {
  static Seeds* seeds = [] {
    auto* s = new Seeds();
    auto dir = FindFingerprintDataDir();
    EXPECT_TRUE(dir.ok()) << dir.status();
    if (!dir.ok()) return s;
    for (int db = 1; db <= 4; ++db) {
      auto imps = LoadFvc2002(*dir, db);
      EXPECT_TRUE(imps.ok()) << imps.status();
      if (!imps.ok()) continue;
      for (size_t i = 0; i < imps->size(); i += 4) {  // 20 per DB
        const Template& t = (*imps)[i].view;
        s->records.push_back(*WriteIso19794({t}));
        s->records.push_back(*WriteAnsi378({t}));
        const std::string xyt = *WriteXyt(t);
        s->records.emplace_back(xyt.begin(), xyt.end());
      }
    }
    // A multi-view record with extended data in both binary formats.
    Template a = (*LoadFvc2002(*dir, 1))[0].view;
    a.extended_data = {{0x0001, std::string("\x02\x05\x07", 3)}, {0x0100, "vendor"}};
    Template b = a;
    b.view_number = 1;
    s->records.push_back(*WriteIso19794({a, b}));
    s->records.push_back(*WriteAnsi378({a, b}));
    return s;
  }();
  return *seeds;
}

bool CleanError(const absl::Status& s) {
  return s.code() == absl::StatusCode::kDataLoss || s.code() == absl::StatusCode::kInvalidArgument;
}

std::vector<uint8_t> Mutate(std::vector<uint8_t> b, std::mt19937& rng, int* kind_out) {
  auto uniform = [&rng](size_t lo, size_t hi) { return std::uniform_int_distribution<size_t>(lo, hi)(rng); };
  const int kind = static_cast<int>(uniform(0, 7));
  *kind_out = kind;
  if (b.empty()) return b;
  switch (kind) {
    case 0:  // truncate anywhere
      b.resize(uniform(0, b.size() - 1));
      break;
    case 1:  // flip 1-8 random bits
      for (size_t n = uniform(1, 8); n > 0; --n) b[uniform(0, b.size() - 1)] ^= 1u << uniform(0, 7);
      break;
    case 2: {  // corrupt a length field (ISO 8..11, ANSI 8..9 or 10..13) by a small or random amount
      if (b.size() <= 8) break;
      const size_t at = uniform(8, std::min<size_t>(13, b.size() - 1));
      b[at] = uniform(0, 1) ? static_cast<uint8_t>(b[at] + uniform(1, 3)) : static_cast<uint8_t>(uniform(0, 255));
      break;
    }
    case 3: {  // corrupt a count: views (22/24), minutiae (27/29), or an extended-data length near the end
      const size_t candidates[] = {22, 24, 27, 29, b.size() >= 2 ? b.size() - 2 : 0, b.size() - 1};
      const size_t at = candidates[uniform(0, 5)];
      if (at < b.size()) b[at] = static_cast<uint8_t>(uniform(0, 255));
      break;
    }
    case 4:  // insert random bytes
      b.insert(b.begin() + uniform(0, b.size()), uniform(1, 16), static_cast<uint8_t>(uniform(0, 255)));
      break;
    case 5: {  // delete a run
      const size_t at = uniform(0, b.size() - 1);
      b.erase(b.begin() + at, b.begin() + std::min(b.size(), at + uniform(1, 16)));
      break;
    }
    case 6: {  // overwrite a run with random bytes
      const size_t at = uniform(0, b.size() - 1);
      for (size_t i = at; i < std::min(b.size(), at + uniform(1, 32)); ++i) b[i] = static_cast<uint8_t>(uniform(0, 255));
      break;
    }
    default: {  // random text-ish bytes (exercises the xyt parser)
      static const char kAlphabet[] = "0123456789 -+\t\n\r#x.";
      for (size_t n = uniform(1, 12); n > 0; --n) b[uniform(0, b.size() - 1)] = kAlphabet[uniform(0, sizeof(kAlphabet) - 2)];
      break;
    }
  }
  return b;
}

// Parses with every parser; checks the outcome contract. Returns whether the
// auto-detecting parser accepted the input.
bool CheckAllParsers(const std::vector<uint8_t>& b) {
  const absl::string_view text(reinterpret_cast<const char*>(b.data()), b.size());
  auto iso = ParseIso19794(b);
  EXPECT_TRUE(iso.ok() || CleanError(iso.status())) << iso.status();
  auto ansi = ParseAnsi378(b);
  EXPECT_TRUE(ansi.ok() || CleanError(ansi.status())) << ansi.status();
  auto xyt = ParseXyt(text);
  EXPECT_TRUE(xyt.ok() || CleanError(xyt.status())) << xyt.status();
  XytOptions nist;
  nist.convention = XytConvention::kNist;
  nist.width = 400;
  nist.height = 500;
  auto xyt_nist = ParseXyt(text, nist);
  EXPECT_TRUE(xyt_nist.ok() || CleanError(xyt_nist.status())) << xyt_nist.status();
  auto any = ParseTemplateRecord(b);
  EXPECT_TRUE(any.ok() || CleanError(any.status())) << any.status();
  if (!any.ok()) return false;
  // Accepted: must be a valid record that round-trips in its own format.
  EXPECT_TRUE(ValidateRecordViews(*any).ok()) << ValidateRecordViews(*any);
  const TemplateFormat format = SniffTemplateFormat(b);
  auto rewritten = WriteTemplateRecord(format, *any);
  EXPECT_TRUE(rewritten.ok()) << rewritten.status();
  if (rewritten.ok()) {
    auto reparsed = ParseTemplateRecordAs(format, *rewritten);
    EXPECT_TRUE(reparsed.ok()) << reparsed.status();
    if (reparsed.ok() && format != TemplateFormat::kXyt) {  // xyt re-derives the image size
      EXPECT_EQ(reparsed->size(), any->size());
      for (size_t v = 0; v < std::min(reparsed->size(), any->size()); ++v) {
        EXPECT_EQ((*reparsed)[v].minutiae, (*any)[v].minutiae);
        EXPECT_EQ((*reparsed)[v].extended_data, (*any)[v].extended_data);
      }
    }
  }
  return true;
}

TEST(TemplateFuzz, MutatedRealTemplatesNeverCrash) {
  const Seeds& seeds = GetSeeds();
  ASSERT_GE(seeds.records.size(), 200u);
  std::mt19937 rng(20261130);
  constexpr int kIterations = 40000;
  int accepted = 0;
  int by_kind[8] = {0}, accepted_by_kind[8] = {0};
  for (int it = 0; it < kIterations; ++it) {
    const auto& seed = seeds.records[std::uniform_int_distribution<size_t>(0, seeds.records.size() - 1)(rng)];
    int kind = 0;
    std::vector<uint8_t> input = Mutate(seed, rng, &kind);
    if (it % 7 == 0) input = Mutate(input, rng, &kind);  // sometimes two mutations
    ++by_kind[kind];
    const bool ok = CheckAllParsers(input);
    accepted += ok;
    accepted_by_kind[kind] += ok;
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "iteration " << it << " mutation kind " << kind;
      return;
    }
  }
  std::printf("%d mutated inputs, %d accepted (valid records after mutation), %d rejected cleanly\n", kIterations,
              accepted, kIterations - accepted);
  for (int k = 0; k < 8; ++k) std::printf("  mutation %d: %d inputs, %d accepted\n", k, by_kind[k], accepted_by_kind[k]);
  // Truncation of a binary record must always be caught (it either cuts the
  // declared length or the structure); some mutations (e.g. within angles)
  // legitimately keep the record valid.
  EXPECT_LT(accepted, kIterations);
}

TEST(TemplateFuzz, EveryTruncationOfEveryBinarySeedIsRejected) {
  int checked = 0;
  for (const auto& seed : GetSeeds().records) {
    if (SniffTemplateFormat(seed) == TemplateFormat::kXyt) continue;
    for (size_t len = 0; len < seed.size(); ++len) {
      std::vector<uint8_t> cut(seed.begin(), seed.begin() + len);
      auto parsed = ParseTemplateRecord(cut);
      ASSERT_FALSE(parsed.ok()) << "prefix of " << len << " bytes accepted";
      ASSERT_TRUE(CleanError(parsed.status())) << parsed.status();
      // Once the length field is readable the error is DATA_LOSS.
      if (len >= 12) EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss) << parsed.status();
      ++checked;
    }
  }
  std::printf("%d truncated binary records rejected\n", checked);
}

TEST(TemplateFuzz, RandomBytesAndSplices) {
  std::mt19937 rng(7);
  const Seeds& seeds = GetSeeds();
  for (int it = 0; it < 5000; ++it) {
    std::vector<uint8_t> b;
    if (it % 2 == 0) {  // pure noise with a plausible header
      b.resize(std::uniform_int_distribution<size_t>(0, 300)(rng));
      for (auto& c : b) c = static_cast<uint8_t>(rng());
      if (it % 4 == 0 && b.size() >= 8) std::copy_n("FMR\0 20\0", 8, b.begin());
    } else {  // head of one record, tail of another
      const auto& x = seeds.records[rng() % seeds.records.size()];
      const auto& y = seeds.records[rng() % seeds.records.size()];
      const size_t cx = rng() % (x.size() + 1), cy = rng() % (y.size() + 1);
      b.assign(x.begin(), x.begin() + cx);
      b.insert(b.end(), y.begin() + cy, y.end());
    }
    CheckAllParsers(b);
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "iteration " << it;
      return;
    }
  }
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
