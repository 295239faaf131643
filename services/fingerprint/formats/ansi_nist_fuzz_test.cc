// Deterministic fuzzing of the ANSI/NIST-ITL reader: NIST's reference
// transactions (when the shared data is present) and transactions written
// here are truncated at every byte (around every record boundary for the
// large files), bit-flipped, have digits, separators and runs changed,
// inserted and deleted. The reader must answer OK or INVALID_ARGUMENT, never
// crash, read out of bounds (run under ASan/UBSan to check) or take long;
// whatever parses must write and read back to the same records.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "services/fingerprint/formats/ansi_nist.h"
#include "services/fingerprint/formats/ansi_nist_testing.h"
#include "services/fingerprint/formats/ansi_nist_views.h"
#include "services/fingerprint/formats/fvc_data.h"

namespace tessera {
namespace fingerprint {
namespace ansi_nist {
namespace {

struct Seed {
  std::string name;
  std::string bytes;
};

using ansi_nist_testing::V;

std::vector<Seed> Seeds() {
  std::vector<Seed> seeds;
  // Written here: Type-1, 2, 9 (legacy + EFS), 14 (raw) and 4.
  Transaction t;
  Field cnt;
  cnt.number = 3;
  cnt.subfields = {{"1", "0"}};
  Field mrc;
  mrc.number = 12;
  mrc.subfields = {{"001", "00100020090", "10", "A", "002,03"}, {"002", "00300040180", "63", "B"}};
  Field efs;
  efs.number = 331;
  efs.subfields = {{"10", "20", "90", "E"}, {"30", "40", "359", "B"}};
  Field fgp4;
  fgp4.number = 4;
  fgp4.subfields = {{"1", "255", "255", "255", "255", "255"}};
  Field data;
  data.number = kDataField;
  data.is_binary = true;
  data.binary = std::string(12, '\x1c');  // separators inside binary data
  t.records = {
      {1, 0, {V(1, "0"), V(2, "0500"), cnt, V(11, "19.69"), V(12, "19.69")}},
      {2, 0, {V(1, "0"), V(2, "00"), V(3, "text")}},
      {9, 1, {V(1, "0"), V(2, "01"), V(3, "0"), V(4, "S"), V(10, "2"), mrc, efs}},
      {14, 1, {V(1, "0"), V(2, "01"), V(3, "1"), V(6, "4"), V(7, "3"), V(8, "1"), V(9, "500"), V(11, "NONE"),
               V(13, "2"), data}},
      {4, 2, {V(1, "0"), V(2, "2"), V(3, "1"), fgp4, V(5, "0"), V(6, "2"), V(7, "2"), V(8, "0"), data}},
  };
  auto written = WriteTransaction(t);
  EXPECT_TRUE(written.ok()) << written.status();
  if (written.ok()) seeds.push_back({"synthetic", *written});
  auto dir = FindFingerprintDataDir();
  if (!dir.ok()) return seeds;
  for (const char* sub : {"nist/ansi-nist-reference", "nist/libbiomeval"}) {
    const std::filesystem::path d = std::filesystem::path(*dir) / sub;
    if (!std::filesystem::is_directory(d)) continue;
    for (const auto& e : std::filesystem::directory_iterator(d)) {
      const std::string ext = e.path().extension().string();
      if (ext != ".an2" && ext != ".an2k") continue;
      std::ifstream in(e.path(), std::ios::binary);
      std::ostringstream s;
      s << in.rdbuf();
      seeds.push_back({e.path().filename().string(), s.str()});
      // And its rewrite (normalised tags, recomputed LEN/CNT).
      auto parsed = ParseTransaction(seeds.back().bytes);
      if (parsed.ok()) {
        auto re = WriteTransaction(*parsed);
        if (re.ok() && *re != seeds.back().bytes) seeds.push_back({seeds.back().name + ".rewritten", *re});
      }
    }
  }
  return seeds;
}

struct Outcome {
  int ok = 0;
  int invalid = 0;
  double max_ms = 0;
};

// Parses `b`, checking the contract; counts the outcome.
void Check(const std::string& b, Outcome* out) {
  const auto start = std::chrono::steady_clock::now();
  auto t = ParseTransaction(b);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  out->max_ms = std::max(out->max_ms, ms);
  if (!t.ok()) {
    ++out->invalid;
    ASSERT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << t.status();
    ASSERT_FALSE(t.status().message().empty());
    return;
  }
  ++out->ok;
  ASSERT_TRUE(Images(*t).ok());
  ASSERT_TRUE(Minutiae(*t).ok());
  auto written = WriteTransaction(*t);
  ASSERT_TRUE(written.ok()) << written.status();
  auto back = ParseTransaction(*written);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->records.size(), t->records.size());
  for (size_t r = 0; r < t->records.size(); ++r) {
    ASSERT_EQ(back->records[r].type, t->records[r].type);
    ASSERT_EQ(back->records[r].idc, t->records[r].idc);
    ASSERT_EQ(back->records[r].fields.size(), t->records[r].fields.size());
    for (size_t f = 1; f < t->records[r].fields.size(); ++f) {  // [0] is LEN, recomputed
      if (r == 0 && t->records[r].fields[f].number == 3) continue;  // CNT, recomputed
      ASSERT_EQ(back->records[r].fields[f], t->records[r].fields[f]);
    }
  }
}

// Offsets where each record ends (from a parse of the intact file).
std::vector<size_t> RecordEnds(const std::string& b) {
  std::vector<size_t> ends;
  auto t = ParseTransaction(b);
  if (!t.ok()) return ends;
  size_t at = 0;
  for (const Record& r : t->records) {
    at += std::stoull(r.Find(kLenField)->value());
    ends.push_back(at);
  }
  return ends;
}

TEST(AnsiNistFuzz, TruncatedAtEveryByteNeverCrashes) {
  Outcome out;
  int cases = 0;
  for (const Seed& seed : Seeds()) {
    SCOPED_TRACE(seed.name);
    const std::string& b = seed.bytes;
    std::vector<size_t> cuts;
    if (b.size() <= 80000) {
      for (size_t n = 0; n < b.size(); ++n) cuts.push_back(n);
    } else {  // every byte of the text head and around each record boundary
      for (size_t n = 0; n < 2000; ++n) cuts.push_back(n);
      for (size_t end : RecordEnds(b)) {
        for (size_t n = end > 300 ? end - 300 : 0; n < std::min(b.size(), end + 300); ++n) cuts.push_back(n);
      }
    }
    for (size_t n : cuts) {
      Check(b.substr(0, n), &out);
      ++cases;
      if (HasFatalFailure()) return;
    }
  }
  std::printf("truncations: %d cases, %d ok, %d INVALID_ARGUMENT, slowest %.2f ms\n", cases, out.ok, out.invalid,
              out.max_ms);
  EXPECT_EQ(out.ok, 0);  // a cut file never parses: the CNT or a LEN notices
  EXPECT_LT(out.max_ms, 1000);
}

TEST(AnsiNistFuzz, MutatedFilesNeverCrash) {
  std::mt19937 rng(20261206);
  auto uniform = [&rng](size_t lo, size_t hi) { return std::uniform_int_distribution<size_t>(lo, hi)(rng); };
  Outcome out;
  int cases = 0;
  for (const Seed& seed : Seeds()) {
    SCOPED_TRACE(seed.name);
    const int rounds = seed.bytes.size() > 100000 ? 300 : 4000;
    // Mutations land in the text head more often: that is where the fields are.
    const size_t head = std::min<size_t>(seed.bytes.size(), 4096);
    for (int round = 0; round < rounds; ++round) {
      std::string b = seed.bytes;
      auto pos = [&]() { return uniform(0, 3) ? uniform(0, std::min(head, b.size()) - 1) : uniform(0, b.size() - 1); };
      const int kind = static_cast<int>(uniform(0, 6));
      for (int n = static_cast<int>(uniform(1, 3)); n > 0 && !b.empty(); --n) {
        switch (kind) {
          case 0:  // flip bits
            b[pos()] ^= static_cast<char>(1u << uniform(0, 7));
            break;
          case 1: {  // change a digit (lengths, counts, IDCs, coordinates)
            const size_t at = pos();
            if (b[at] >= '0' && b[at] <= '9') b[at] = static_cast<char>('0' + uniform(0, 9));
            else b[at] = static_cast<char>('0' + uniform(0, 9));
            break;
          }
          case 2:  // a separator or tag character somewhere
            b[pos()] = "\x1c\x1d\x1e\x1f.:"[uniform(0, 5)];
            break;
          case 3:  // insert a run
            b.insert(pos(), std::string(uniform(1, 8), static_cast<char>(uniform(0, 255))));
            break;
          case 4: {  // delete a run
            const size_t at = pos();
            b.erase(at, uniform(1, 8));
            break;
          }
          case 5: {  // overwrite a run with random bytes
            const size_t at = pos();
            for (size_t i = at; i < std::min(b.size(), at + uniform(1, 16)); ++i) b[i] = static_cast<char>(uniform(0, 255));
            break;
          }
          default:  // a huge length: the 4-byte binary LEN or a long digit run
            b.replace(pos(), 4, std::string("\xff\xff\xff\xf0", 4));
            break;
        }
      }
      Check(b, &out);
      ++cases;
      if (HasFatalFailure()) return;
    }
  }
  std::printf("mutations: %d cases, %d ok, %d INVALID_ARGUMENT, slowest %.2f ms\n", cases, out.ok, out.invalid,
              out.max_ms);
  EXPECT_GT(out.invalid, 0);
  EXPECT_LT(out.max_ms, 1000);
}

}  // namespace
}  // namespace ansi_nist
}  // namespace fingerprint
}  // namespace tessera
