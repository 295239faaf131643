// The hash chain over gallery log records: records carry their number and the
// previous record's hash, across reopenings and compactions; an edited (CRC
// fixed up), deleted, reordered or inserted complete record is DATA_LOSS at
// Open and in Check, naming the file, byte and record numbers; galleries
// written before the chain are still read (legacy records), and the chain
// starts after them.
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "services/fingerprint/store/gallery_store.h"
#include "services/fingerprint/store/gallery_test_util.h"

namespace tessera {
namespace fingerprint {
namespace {

using gallery_testing::FreshDir;
using gallery_testing::MakeTemplate;
using gallery_testing::LogPath;

using ::testing::HasSubstr;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// The framed records of a log file, whole (header + payload).
std::vector<std::string> Records(const std::string& log) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at + 8 <= log.size()) {
    uint32_t len = 0;
    std::memcpy(&len, log.data() + at, 4);
    out.push_back(log.substr(at, 8 + len));
    at += 8 + len;
  }
  return out;
}

std::string Join(const std::vector<std::string>& records) {
  std::string out;
  for (const auto& r : records) out += r;
  return out;
}

// A gallery of `n` chained enrollments t0..t(n-1); returns its log's records.
std::vector<std::string> MakeGallery(const std::string& dir, int n) {
  auto store = GalleryStore::Open(dir);
  EXPECT_TRUE(store.ok()) << store.status();
  for (int i = 0; i < n; ++i) EXPECT_TRUE((*store)->Enroll(MakeTemplate(absl::StrCat("t", i), i)).ok());
  store->reset();
  return Records(ReadAll(LogPath(dir)));
}

// What Check and Open say about a tampered gallery: both DATA_LOSS with `what`.
void ExpectBroken(const std::string& dir, const std::string& what) {
  auto check = GalleryStore::Check(dir);
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_FALSE(check->clean());
  EXPECT_THAT(check->error, HasSubstr(what));
  auto store = GalleryStore::Open(dir);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(store.status().message()), HasSubstr(what));
}

TEST(GalleryChainTest, RecordsChainAcrossReopeningAndCompaction) {
  const std::string dir = FreshDir("chain_ok", /*create=*/true);
  MakeGallery(dir, 3);
  {
    auto store = GalleryStore::Open(dir);
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_EQ((*store)->open_stats().chain_records, 3);
    EXPECT_EQ((*store)->open_stats().legacy_records, 0);
    ASSERT_TRUE((*store)->Delete("t1").ok());  // record 4
    std::vector<StoredTemplate> batch = {MakeTemplate("b0", 5), MakeTemplate("b1", 6)};
    ASSERT_TRUE((*store)->EnrollBatch(batch).ok());  // 5, 6
    ASSERT_TRUE((*store)->Compact().ok());           // snapshot carries link 6
    ASSERT_TRUE((*store)->Enroll(MakeTemplate("after", 7)).ok());  // 7, in log 2
  }
  auto check = GalleryStore::Check(dir);
  ASSERT_TRUE(check.ok());
  EXPECT_TRUE(check->clean()) << check->error;
  EXPECT_EQ(check->stats.chain_records, 7);
  EXPECT_EQ(check->stats.chain_head.size(), 64u);
  EXPECT_NE(check->stats.chain_head, std::string(64, '0'));
  EXPECT_EQ(check->live_templates, 5);
  auto store = GalleryStore::Open(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->open_stats().chain_records, 7);
  EXPECT_EQ((*store)->open_stats().chain_head, check->stats.chain_head);
}

// An edit whose CRC is fixed up too (what a CRC alone cannot catch).
TEST(GalleryChainTest, EditedRecordWithAValidCrcIsFound) {
  const std::string dir = FreshDir("chain_edit", /*create=*/true);
  std::vector<std::string> records = MakeGallery(dir, 4);
  ASSERT_EQ(records.size(), 4u);
  std::string payload = records[1].substr(8);
  const size_t at = payload.find("t1");
  ASSERT_NE(at, std::string::npos);
  payload[at + 1] = '9';  // enrolled as "t1", now says "t9"
  records[1] = gallery_internal::FrameRecord(payload);
  WriteAll(LogPath(dir), Join(records));
  ExpectBroken(dir, "record 3 does not carry the hash of record 2");
  ExpectBroken(dir, absl::StrCat("at byte ", records[0].size() + records[1].size()));
}

TEST(GalleryChainTest, DeletedRecordIsFound) {
  const std::string dir = FreshDir("chain_delete", /*create=*/true);
  std::vector<std::string> records = MakeGallery(dir, 4);
  records.erase(records.begin() + 1);
  WriteAll(LogPath(dir), Join(records));
  ExpectBroken(dir, "record 3 follows record 1 (record 2 deleted or moved)");
}

TEST(GalleryChainTest, ReorderedRecordsAreFound) {
  const std::string dir = FreshDir("chain_reorder", /*create=*/true);
  std::vector<std::string> records = MakeGallery(dir, 4);
  std::swap(records[1], records[2]);
  WriteAll(LogPath(dir), Join(records));
  ExpectBroken(dir, "record 3 follows record 1");
  // The same record twice (replayed): "comes after".
  records = MakeGallery(FreshDir("chain_repeat", /*create=*/true), 3);
  records.push_back(records[1]);
  const std::string repeat_dir = FreshDir("chain_repeat", /*create=*/true);
  WriteAll(LogPath(repeat_dir), Join(records));
  ExpectBroken(repeat_dir, "record 2 comes after record 3");
}

// Galleries written before the chain: read as they are, counted, and the chain
// starts after them; an unchained record after the chain began is an insertion.
TEST(GalleryChainTest, LegacyRecordsAreReadAndTheChainStartsAfterThem) {
  const std::string dir = FreshDir("chain_legacy", /*create=*/true);
  std::string legacy;
  for (int i = 0; i < 3; ++i) {
    legacy += gallery_internal::FrameRecord(gallery_internal::EncodeEnroll(MakeTemplate(absl::StrCat("old", i), i)));
  }
  legacy += gallery_internal::FrameRecord(gallery_internal::EncodeDelete("old0"));
  WriteAll(LogPath(dir), legacy);
  {
    auto store = GalleryStore::Open(dir);
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_EQ((*store)->size(), 2u);
    EXPECT_EQ((*store)->open_stats().legacy_records, 4);
    EXPECT_EQ((*store)->open_stats().chain_records, 0);
    ASSERT_TRUE((*store)->Enroll(MakeTemplate("new", 4)).ok());
  }
  auto check = GalleryStore::Check(dir);
  ASSERT_TRUE(check.ok());
  EXPECT_TRUE(check->clean()) << check->error;
  EXPECT_EQ(check->stats.legacy_records, 4);
  EXPECT_EQ(check->stats.chain_records, 1);
  EXPECT_EQ(check->live_templates, 3);
  // An unchained record appended after the chain began.
  std::ofstream(LogPath(dir), std::ios::binary | std::ios::app)
      << gallery_internal::FrameRecord(gallery_internal::EncodeEnroll(MakeTemplate("forged", 8)));
  ExpectBroken(dir, "a record without the hash chain after chained record 1");
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
