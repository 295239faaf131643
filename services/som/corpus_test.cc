#include "services/som/corpus.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>

#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/match.h"

namespace tessera {
namespace som {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

SparseBinaryMatrix Example() {
  SparseBinaryMatrix m(6);
  EXPECT_TRUE(m.AppendRow({4, 0, 2}).ok());
  EXPECT_TRUE(m.AppendRow({}).ok());
  EXPECT_TRUE(m.AppendRow({5}).ok());
  return m;
}

SparseBinaryMatrix RandomMatrix(int64_t rows, int64_t cols, std::mt19937& rng) {
  SparseBinaryMatrix m(cols);
  std::uniform_int_distribution<int> len(0, 12);
  std::uniform_int_distribution<int32_t> col(0, static_cast<int32_t>(cols - 1));
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int32_t> row;
    for (int k = len(rng); k > 0; --k) {
      const int32_t c = col(rng);
      if (std::find(row.begin(), row.end(), c) == row.end()) row.push_back(c);
    }
    EXPECT_TRUE(m.AppendRow(row).ok());
  }
  return m;
}

void ExpectError(const absl::Status& s, absl::string_view fragment) {
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), fragment)) << s;
}

TEST(SparseBinaryMatrix, AppendAndValidate) {
  SparseBinaryMatrix m = Example();
  EXPECT_EQ(m.rows(), 3);
  EXPECT_EQ(m.nnz(), 4);
  EXPECT_EQ(std::vector<int32_t>(m.row(0).begin(), m.row(0).end()), (std::vector<int32_t>{0, 2, 4}));
  EXPECT_TRUE(m.Validate().ok());
  ExpectError(m.AppendRow({1, 1}), "twice");
  ExpectError(m.AppendRow({6}), "outside");
  EXPECT_EQ(m.rows(), 3);  // unchanged by failed appends
  ExpectError(SparseBinaryMatrix(5, {0, 2}, {3, 1}).Validate(), "strictly increasing");
  ExpectError(SparseBinaryMatrix(5, {0, 3}, {1, 2}).Validate(), "last row offset");
  ExpectError(SparseBinaryMatrix(5, {1, 1}, {}).Validate(), "start at 0");
}

TEST(Libsvm, ParsesLabelsIndicesCommentsAndQid) {
  const std::string text =
      "# header comment\n"
      "+1 3:1 1:1 qid:4 7:0.5   # trailing comment\r\n"
      "\n"
      "-1\n"
      "2:2.5e0\n"
      "1,3 10:1\n";
  auto parsed = ParseLibsvm(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const SparseBinaryMatrix& m = parsed->matrix;
  ASSERT_EQ(m.rows(), 4);
  EXPECT_EQ(m.cols(), 10);
  EXPECT_EQ(std::vector<int32_t>(m.row(0).begin(), m.row(0).end()), (std::vector<int32_t>{0, 2, 6}));
  EXPECT_EQ(m.row(1).size(), 0u);
  EXPECT_EQ(std::vector<int32_t>(m.row(2).begin(), m.row(2).end()), (std::vector<int32_t>{1}));
  EXPECT_EQ(parsed->labels, (std::vector<std::string>{"+1", "-1", "", "1,3"}));
  EXPECT_TRUE(m.Validate().ok());

  LibsvmOptions zero_based;
  zero_based.index_base = 0;
  zero_based.num_features = 20;
  auto z = ParseLibsvm("0 0:1 19:1\n", zero_based);
  ASSERT_TRUE(z.ok()) << z.status();
  EXPECT_EQ(z->matrix.cols(), 20);
  EXPECT_EQ(z->matrix.row(0)[1], 19);
}

TEST(Libsvm, RejectsMalformedLinesWithTheLineNumber) {
  ExpectError(ParseLibsvm("1 1:1\n1 2:0\n").status(), "line 2: explicit zero");
  ExpectError(ParseLibsvm("1 x:1\n").status(), "index is not an integer");
  ExpectError(ParseLibsvm("1 0:1\n").status(), "below the index base 1");
  ExpectError(ParseLibsvm("1 3:1 3:1\n").status(), "appears twice");
  ExpectError(ParseLibsvm("1 3:abc\n").status(), "not a finite number");
  ExpectError(ParseLibsvm("1 3:nan\n").status(), "not a finite number");
  ExpectError(ParseLibsvm("1 3:1 junk\n").status(), "expected <index>:<value>");
  ExpectError(ParseLibsvm("1 99999999999:1\n").status(), "too large");
  LibsvmOptions bounded;
  bounded.num_features = 5;
  ExpectError(ParseLibsvm("1 6:1\n", bounded).status(), "exceeds the 5 features");
}

TEST(Libsvm, RoundTripsThroughAFile) {
  std::mt19937 rng(1);
  SparseBinaryMatrix m = RandomMatrix(100, 40, rng);
  const std::string path = TempPath("corpus.svm");
  ASSERT_TRUE(WriteLibsvm(path, m).ok());
  LibsvmOptions options;
  options.num_features = 40;
  auto back = ReadLibsvm(path, options);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->matrix, m);
  EXPECT_EQ(back->labels, std::vector<std::string>(100, "0"));
  // Labels must be one per row and token-safe.
  EXPECT_FALSE(WriteLibsvm(path, m, std::vector<std::string>(3, "a")).ok());
  EXPECT_FALSE(WriteLibsvm(path, m, std::vector<std::string>(100, "a b")).ok());
  EXPECT_EQ(ReadLibsvm(TempPath("missing.svm")).status().code(), absl::StatusCode::kNotFound);
}

TEST(CsrBinary, RoundTripsInMemoryAndOnDisk) {
  std::mt19937 rng(2);
  for (int64_t rows : {0, 1, 7, 1000}) {
    SparseBinaryMatrix m = RandomMatrix(rows, 300, rng);
    const std::string bytes = SerializeCsrBinary(m);
    auto back = ParseCsrBinary(bytes);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, m);
    const std::string path = TempPath("corpus.csr");
    ASSERT_TRUE(WriteCsrBinary(path, m).ok());
    auto from_file = ReadCorpus(path);
    ASSERT_TRUE(from_file.ok()) << from_file.status();
    EXPECT_EQ(*from_file, m);
  }
}

// Patches a little-endian value into a serialized file (and optionally fixes
// the checksum so that only the structural check can catch it).
template <typename T>
std::string Patch(std::string bytes, size_t at, T value) {
  std::memcpy(&bytes[at], &value, sizeof(T));
  return bytes;
}

TEST(CsrBinary, RejectsCorruptFilesWithClearErrors) {
  SparseBinaryMatrix m = Example();  // 3 rows, 4 nnz: offsets at 40, indices at 72
  const std::string good = SerializeCsrBinary(m);
  ASSERT_EQ(good.size(), 40u + 8 * 4 + 4 * 4 + 4);
  ExpectError(ParseCsrBinary("short").status(), "shorter than the 40-byte header");
  ExpectError(ParseCsrBinary("XXXXXXXX" + good.substr(8)).status(), "bad magic");
  ExpectError(ParseCsrBinary(Patch<uint32_t>(good, 8, 2)).status(), "version 2 is not supported");
  ExpectError(ParseCsrBinary(Patch<uint32_t>(good, 12, 1)).status(), "unknown flags");
  ExpectError(ParseCsrBinary(good.substr(0, good.size() - 1)).status(), "truncated or trailing");
  ExpectError(ParseCsrBinary(good + "x").status(), "truncated or trailing");
  ExpectError(ParseCsrBinary(Patch<int64_t>(good, 16, int64_t{1} << 50)).status(), "implausible counts");
  ExpectError(ParseCsrBinary(Patch<int64_t>(good, 24, int64_t{1} << 40)).status(), "column count");
  ExpectError(ParseCsrBinary(Patch<int32_t>(good, 72, 3)).status(), "checksum mismatch");

  // Structurally bad content with a valid checksum.
  auto with_crc = [](std::string bytes) {
    const uint32_t crc = static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(bytes.data()),
                                                     static_cast<uInt>(bytes.size() - 4)));
    std::memcpy(&bytes[bytes.size() - 4], &crc, 4);
    return bytes;
  };
  ExpectError(ParseCsrBinary(with_crc(Patch<int32_t>(good, 72, 3))).status(), "strictly increasing");
  ExpectError(ParseCsrBinary(with_crc(Patch<int32_t>(good, 72 + 8, 9))).status(), "outside [0, 6)");
  ExpectError(ParseCsrBinary(with_crc(Patch<int64_t>(good, 48, 5))).status(), "decrease");
  ExpectError(ParseCsrBinary(with_crc(Patch<int64_t>(good, 40, 1))).status(), "start at 0");
  EXPECT_TRUE(ParseCsrBinary(with_crc(good)).ok());
  // Files name themselves in errors.
  const std::string path = TempPath("bad.csr");
  {
    std::ofstream out(path, std::ios::binary);
    out << good.substr(0, 50);
  }
  auto bad = ReadCsrBinary(path);
  ExpectError(bad.status(), "bad.csr");
  EXPECT_EQ(ReadCsrBinary(TempPath("missing.csr")).status().code(), absl::StatusCode::kNotFound);
}

TEST(Lines, RoundTripAndCountCheck) {
  const std::string path = TempPath("names.txt");
  const std::vector<std::string> names = {"GO:0000001\tmitochondrion inheritance", "", "GO:0000002"};
  ASSERT_TRUE(WriteLines(path, names).ok());
  auto back = ReadLines(path, 3);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, names);
  ExpectError(ReadLines(path, 4).status(), "3 lines, expected 4");
  EXPECT_FALSE(WriteLines(path, {"a\nb"}).ok());
  {
    std::ofstream out(path, std::ios::binary);
    out << "a\r\nb";  // CRLF, no final newline
  }
  EXPECT_EQ(*ReadLines(path), (std::vector<std::string>{"a", "b"}));
}

TEST(Split, ExactHeldOutCountDeterministicAndDisjoint) {
  RowSplit s = SplitRows(20728, 0.1, 42);
  EXPECT_EQ(s.train.size(), 18656u);  // somoclu's training rows on genes x GO
  EXPECT_EQ(s.held_out.size(), 2072u);
  RowSplit again = SplitRows(20728, 0.1, 42);
  EXPECT_EQ(s.held_out, again.held_out);
  std::vector<int64_t> all(s.train);
  all.insert(all.end(), s.held_out.begin(), s.held_out.end());
  std::sort(all.begin(), all.end());
  for (int64_t r = 0; r < 20728; ++r) ASSERT_EQ(all[r], r);
  SparseBinaryMatrix m = Example();
  SparseBinaryMatrix sub = SelectRows(m, {2, 0});
  EXPECT_EQ(sub.rows(), 2);
  EXPECT_EQ(sub.row(0)[0], 5);
  EXPECT_EQ(FeatureCounts(m), (std::vector<int64_t>{1, 0, 1, 0, 1, 1}));
}

}  // namespace
}  // namespace som
}  // namespace tessera
