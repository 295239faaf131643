#include "common/parallel_gzip.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"

namespace tessera {
namespace {

std::string TmpPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// zlib's gzread: an independent reader of (multi-member) gzip.
std::string Gunzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof(buf))) > 0) out.append(buf, n);
  gzclose(f);
  return out;
}

// Compressible but not trivial: a slow ramp with random low bits.
std::string TestData(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i / 4096) + (rng() & 7));
  return s;
}

std::string WriteMembers(const std::string& name, const std::vector<absl::string_view>& pieces, int level,
                         int64_t member_bytes) {
  const std::string path = TmpPath(name);
  FILE* f = std::fopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr);
  GzipWriteOptions options;
  options.level = level;
  options.member_bytes = member_bytes;
  EXPECT_TRUE(WriteGzipMembers(f, pieces, options).ok());
  EXPECT_EQ(std::fclose(f), 0);
  return path;
}

TEST(ParallelGzipTest, MultiMemberRoundTripsThroughZlibGzipAndLibdeflate) {
  const std::string header = TestData(352, 1), data = TestData((3 << 20) + 12345, 2);
  for (int level : {1, 6, 9}) {
    const std::string path = WriteMembers(absl::StrCat("members_", level, ".gz"), {header, data}, level, 1 << 16);
    const std::string gz = ReadBytes(path);
    EXPECT_TRUE(HasMemberSizeField(gz));
    EXPECT_LT(gz.size(), data.size() * 6 / 10) << "level " << level;  // 3 random bits of 8
    EXPECT_TRUE(Gunzip(path) == header + data) << "zlib gzread, level " << level;
    EXPECT_EQ(std::system(absl::StrCat("gzip -t ", path).c_str()), 0) << "gzip -t " << path;

    std::string all(header.size() + data.size(), '\0');
    ASSERT_TRUE(InflateGzipRange(gz, 0, all.size(), &all[0]).ok());
    EXPECT_TRUE(all == header + data);
    // A range that starts inside the header member and ends inside a data member.
    std::string part(200000, '\0');
    ASSERT_TRUE(InflateGzipRange(gz, 100, 200100, &part[0]).ok());
    EXPECT_TRUE(part == (header + data).substr(100, 200000));
  }
}

TEST(ParallelGzipTest, ForeignSingleMemberStreamsDecodeSequentially) {
  const std::string data = TestData(1 << 20, 3);
  const std::string path = TmpPath("zlib.gz");
  gzFile f = gzopen(path.c_str(), "wb6");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, data.data(), static_cast<unsigned>(data.size())), static_cast<int>(data.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
  const std::string gz = ReadBytes(path);
  EXPECT_FALSE(HasMemberSizeField(gz));
  std::string out(data.size() - 352, '\0');
  ASSERT_TRUE(InflateGzipRange(gz, 352, data.size(), &out[0]).ok());
  EXPECT_TRUE(out == data.substr(352));
  // More data than asked for is not guessed about (ReadNifti's stream reader decides).
  EXPECT_EQ(InflateGzipRange(gz, 0, 1000, &out[0]).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(InflateGzipRange("not gzip", 0, 1, &out[0]).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ParallelGzipTest, DamageIsDataLoss) {
  const std::string data = TestData(1 << 20, 4);
  const std::string gz = ReadBytes(WriteMembers("damage.gz", {data}, 6, 1 << 16));
  std::string out(data.size(), '\0');
  for (size_t cut : {gz.size() - 1, gz.size() - 8, gz.size() / 2, size_t{20}}) {
    EXPECT_EQ(InflateGzipRange(gz.substr(0, cut), 0, data.size(), &out[0]).code(), absl::StatusCode::kDataLoss)
        << "cut at " << cut;
  }
  std::string corrupt = gz;
  for (size_t i = gz.size() / 2; i < gz.size() / 2 + 32; ++i) corrupt[i] ^= 0x5a;
  EXPECT_EQ(InflateGzipRange(corrupt, 0, data.size(), &out[0]).code(), absl::StatusCode::kDataLoss);
  std::string crc = gz;
  crc[crc.size() - 6] ^= 0x10;  // CRC-32 of the last member
  EXPECT_EQ(InflateGzipRange(crc, 0, data.size(), &out[0]).code(), absl::StatusCode::kDataLoss);
  // Asking for more than the stream holds.
  std::string big(data.size() + 1, '\0');
  EXPECT_EQ(InflateGzipRange(gz, 0, big.size(), &big[0]).code(), absl::StatusCode::kDataLoss);
}

TEST(ParallelGzipTest, EmptyInputIsOneEmptyMember) {
  const std::string path = WriteMembers("empty.gz", {}, 6, 1 << 16);
  EXPECT_EQ(Gunzip(path), "");
  EXPECT_EQ(std::system(absl::StrCat("gzip -t ", path).c_str()), 0);
}

TEST(ParallelGzipTest, BadOptionsAreInvalidArgument) {
  FILE* f = std::fopen(TmpPath("bad.gz").c_str(), "wb");
  ASSERT_NE(f, nullptr);
  GzipWriteOptions options;
  options.level = 13;
  EXPECT_EQ(WriteGzipMembers(f, {"x"}, options).code(), absl::StatusCode::kInvalidArgument);
  options.level = 6;
  options.member_bytes = 100;
  EXPECT_EQ(WriteGzipMembers(f, {"x"}, options).code(), absl::StatusCode::kInvalidArgument);
  std::fclose(f);
}

}  // namespace
}  // namespace tessera
