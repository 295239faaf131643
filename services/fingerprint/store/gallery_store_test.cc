// The durable gallery: replay, duplicates, group commit, torn tails,
// corruption in the middle, compaction with persisted cylinders, and a real
// crash test (a child process enrolling in a loop is killed with SIGKILL).
#include "services/fingerprint/store/gallery_store.h"
#include "services/fingerprint/store/gallery_test_util.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace tessera {
namespace fingerprint {
namespace {

using gallery_testing::FreshDir;
using gallery_testing::MakeTemplate;
using gallery_testing::LogPath;
using gallery_testing::WithMetadata;

using ::testing::HasSubstr;

void ExpectSame(const StoredTemplate& a, const StoredTemplate& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.format, b.format);
  EXPECT_EQ(a.bytes, b.bytes);
  ASSERT_EQ(a.minutiae.size(), b.minutiae.size());
  for (size_t i = 0; i < a.minutiae.size(); ++i) {
    EXPECT_EQ(a.minutiae[i].x, b.minutiae[i].x);
    EXPECT_EQ(a.minutiae[i].y, b.minutiae[i].y);
    EXPECT_EQ(a.minutiae[i].theta, b.minutiae[i].theta);
  }
  EXPECT_TRUE(a.metadata == b.metadata) << a.id << ": subject '" << a.metadata.subject_id << "' vs '"
                                        << b.metadata.subject_id << "'";
}

int64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

void AppendBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out << bytes;
}

TEST(GalleryStoreTest, ReplaysEnrollsAndDeletes) {
  const std::string dir = FreshDir("replay");
  {
    auto store = GalleryStore::Open(dir);
    ASSERT_TRUE(store.ok()) << store.status();
    for (int i = 0; i < 5; ++i) ASSERT_TRUE((*store)->Enroll(MakeTemplate(absl::StrCat("f", i), i)).ok());
    ASSERT_TRUE((*store)->Delete("f2").ok());
    EXPECT_EQ((*store)->size(), 4u);
  }
  auto store = GalleryStore::Open(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->size(), 4u);
  EXPECT_EQ((*store)->Get("f2"), nullptr);
  ASSERT_NE((*store)->Get("f3"), nullptr);
  ExpectSame(*(*store)->Get("f3"), MakeTemplate("f3", 3));
  EXPECT_EQ((*store)->open_stats().log_records, 6);
  EXPECT_THAT((*store)->ListIds("", 10), ::testing::ElementsAre("f0", "f1", "f3", "f4"));
  EXPECT_THAT((*store)->ListIds("f1", 2), ::testing::ElementsAre("f3", "f4"));
}

TEST(GalleryStoreTest, DuplicatesUnknownIdsAndBadInput) {
  auto store = GalleryStore::Open(FreshDir("dups"));
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Enroll(MakeTemplate("a", 1)).ok());
  auto again = (*store)->Enroll(MakeTemplate("a", 2));
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  // The same bytes again is a retry (issue 31): the enrolled template, no record written.
  const GalleryCommitStats before = (*store)->commit_stats();
  auto retry = (*store)->Enroll(MakeTemplate("a", 1));
  ASSERT_TRUE(retry.ok()) << retry.status();
  ExpectSame(**retry, MakeTemplate("a", 1));
  auto retried_batch = (*store)->EnrollBatch({MakeTemplate("a", 1)});
  ASSERT_TRUE(retried_batch.ok() && (*retried_batch)[0].ok());
  EXPECT_EQ((*store)->commit_stats().records, before.records);
  auto replaced = (*store)->Enroll(MakeTemplate("a", 2), /*replace=*/true);
  ASSERT_TRUE(replaced.ok());
  ExpectSame(*(*store)->Get("a"), MakeTemplate("a", 2));
  EXPECT_EQ((*store)->Delete("nope").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*store)->Enroll(MakeTemplate("", 1)).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*store)->Enroll(MakeTemplate("a\nb", 1)).status().code(), absl::StatusCode::kInvalidArgument);
  StoredTemplate big = MakeTemplate("big", 1);
  big.bytes.assign(kMaxGalleryTemplateBytes + 1, 'x');
  EXPECT_EQ((*store)->Enroll(big).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GalleryStoreTest, SecondOpenIsRefused) {
  const std::string dir = FreshDir("lock");
  auto first = GalleryStore::Open(dir);
  ASSERT_TRUE(first.ok());
  auto second = GalleryStore::Open(dir);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  first->reset();
  EXPECT_TRUE(GalleryStore::Open(dir).ok());
}

TEST(GalleryStoreTest, BatchReportsPerItemErrorsAndCommitsTheRest) {
  const std::string dir = FreshDir("batch");
  {
    auto store = GalleryStore::Open(dir);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->Enroll(MakeTemplate("x", 0)).ok());
    std::vector<StoredTemplate> batch = {MakeTemplate("a", 1), MakeTemplate("x", 2), MakeTemplate("b", 3),
                                         MakeTemplate("a", 4), MakeTemplate("", 5)};
    auto results = (*store)->EnrollBatch(batch);
    ASSERT_TRUE(results.ok());
    ASSERT_EQ(results->size(), 5u);
    EXPECT_TRUE((*results)[0].ok());
    EXPECT_EQ((*results)[1].status().code(), absl::StatusCode::kAlreadyExists);
    EXPECT_TRUE((*results)[2].ok());
    EXPECT_EQ((*results)[3].status().code(), absl::StatusCode::kAlreadyExists);
    EXPECT_EQ((*results)[4].status().code(), absl::StatusCode::kInvalidArgument);
  }
  auto store = GalleryStore::Open(dir);
  ASSERT_TRUE(store.ok());
  EXPECT_THAT((*store)->ListIds("", 10), ::testing::ElementsAre("a", "b", "x"));
  ExpectSame(*(*store)->Get("a"), MakeTemplate("a", 1));
}

TEST(GalleryStoreTest, TornTailIsTruncated) {
  const std::string dir = FreshDir("torn");
  {
    auto store = GalleryStore::Open(dir);
    ASSERT_TRUE(store.ok());
    for (int i = 0; i < 4; ++i) ASSERT_TRUE((*store)->Enroll(MakeTemplate(absl::StrCat("t", i), i)).ok());
  }
  const int64_t good = FileSize(LogPath(dir));
  const std::string record = gallery_internal::FrameRecord(gallery_internal::EncodeEnroll(MakeTemplate("torn", 9)));
  // Each kind of torn write: a partial header, a partial payload, a
  // zero-filled tail. (A complete record with a bad CRC is not torn: see
  // DamagedLastRecordIsMovedAsideNotDropped.)
  for (const std::string& tail : {record.substr(0, 5), record.substr(0, record.size() - 3),
                                  std::string(record.size(), '\0')}) {
    AppendBytes(LogPath(dir), tail);
    auto store = GalleryStore::Open(dir);
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_EQ((*store)->size(), 4u);
    EXPECT_EQ((*store)->open_stats().truncated_bytes, static_cast<int64_t>(tail.size()));
    EXPECT_EQ(FileSize(LogPath(dir)), good);
  }
  // Appending after a truncation makes a clean log.
  {
    auto store = GalleryStore::Open(dir);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->Enroll(MakeTemplate("after", 5)).ok());
  }
  auto store = GalleryStore::Open(dir);
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->size(), 5u);
  EXPECT_EQ((*store)->open_stats().truncated_bytes, 0);
}

// Probed as a new user would: one bit flipped inside the last, complete and
// acknowledged record. It must not vanish: Open sets its bytes aside (exactly
// them, durably), does not apply it, and says so; Check reports it.
TEST(GalleryStoreTest, DamagedLastRecordIsMovedAsideNotDropped) {
  const std::string dir = FreshDir("damaged");
  int64_t last_record = 0;
  {
    auto store = GalleryStore::Open(dir);
    ASSERT_TRUE(store.ok());
    for (int i = 0; i < 3; ++i) ASSERT_TRUE((*store)->Enroll(MakeTemplate(absl::StrCat("t", i), i)).ok());
    last_record = (*store)->log_bytes();
    ASSERT_TRUE((*store)->Enroll(MakeTemplate("evidence", 7)).ok());  // acknowledged
  }
  {
    auto check = GalleryStore::Check(dir);
    ASSERT_TRUE(check.ok());
    EXPECT_TRUE(check->clean());
    EXPECT_EQ(check->live_templates, 4);
  }
  const int64_t size = FileSize(LogPath(dir));
  std::string original(size - last_record, '\0');
  {
    const int fd = open(LogPath(dir).c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(pread(fd, &original[0], original.size(), last_record), static_cast<ssize_t>(original.size()));
    char c = original[20];
    c ^= 0x08;
    ASSERT_EQ(pwrite(fd, &c, 1, last_record + 20), 1);
    original[20] = c;
    close(fd);
  }
  {
    // Check changes nothing and reports where.
    auto check = GalleryStore::Check(dir);
    ASSERT_TRUE(check.ok());
    EXPECT_FALSE(check->clean());
    EXPECT_THAT(check->stats.damaged_tail, ::testing::HasSubstr(absl::StrCat("at byte ", last_record)));
    EXPECT_EQ(FileSize(LogPath(dir)), size);
  }
  auto store = GalleryStore::Open(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->size(), 3u);
  EXPECT_EQ((*store)->open_stats().truncated_bytes, 0);
  EXPECT_EQ((*store)->open_stats().quarantined_bytes, size - last_record);
  ASSERT_EQ((*store)->open_stats().quarantined.size(), 1u);
  const std::string aside = (*store)->open_stats().quarantined[0];
  EXPECT_EQ(aside, absl::StrCat(dir, "/damaged-log-1-at-", last_record));
  std::ifstream in(aside, std::ios::binary);
  const std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(kept, original);
  // New enrollments append after the cut; the file set aside stays reported.
  ASSERT_TRUE((*store)->Enroll(MakeTemplate("after", 8)).ok());
  store->reset();
  auto check = GalleryStore::Check(dir);
  ASSERT_TRUE(check.ok());
  EXPECT_TRUE(check->error.empty());
  EXPECT_TRUE(check->stats.damaged_tail.empty());
  EXPECT_EQ(check->stats.quarantined, std::vector<std::string>{aside});
  EXPECT_EQ(check->live_templates, 4);
}

TEST(GalleryStoreTest, CorruptionInTheMiddleIsDataLossWithTheOffset) {
  const std::string dir = FreshDir("corrupt");
  int64_t second_record = 0;
  {
    auto store = GalleryStore::Open(dir);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->Enroll(MakeTemplate("t0", 0)).ok());
    second_record = (*store)->log_bytes();
    for (int i = 1; i < 4; ++i) ASSERT_TRUE((*store)->Enroll(MakeTemplate(absl::StrCat("t", i), i)).ok());
  }
  {
    // Flip one payload byte of the second record.
    const int fd = open(LogPath(dir).c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    char c = 0;
    ASSERT_EQ(pread(fd, &c, 1, second_record + 12), 1);
    c ^= 0x01;
    ASSERT_EQ(pwrite(fd, &c, 1, second_record + 12), 1);
    close(fd);
  }
  auto store = GalleryStore::Open(dir);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(store.status().message()), HasSubstr(absl::StrCat("at byte ", second_record)));
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("CRC"));
  auto check = GalleryStore::Check(dir);
  ASSERT_TRUE(check.ok());
  EXPECT_FALSE(check->clean());
  EXPECT_THAT(check->error, HasSubstr(absl::StrCat("at byte ", second_record)));
  EXPECT_EQ(GalleryStore::Check(dir + "/missing").status().code(), absl::StatusCode::kNotFound);
}

MccTemplate FakeCylinders(const StoredTemplate& t) {
  MccTemplate m;
  m.num_minutiae = static_cast<int>(t.minutiae.size());
  for (size_t i = 0; i < t.minutiae.size(); ++i) {
    MccCylinder c{};
    for (int w = 0; w < kMccBitWords; ++w) c.bits[w] = std::hash<std::string>()(t.id) * (w + 1) + i;
    for (int w = 0; w < kMccMaskWords; ++w) c.mask[w] = ~uint64_t{0} >> (w + i);
    c.x = t.minutiae[i].x;
    c.y = t.minutiae[i].y;
    c.theta = t.minutiae[i].theta;
    c.minutia = static_cast<int>(i);
    m.cylinders.push_back(c);
  }
  return m;
}

TEST(GalleryStoreTest, CompactionPersistsCylindersAndKeepsLaterRecords) {
  const std::string dir = FreshDir("compact");
  {
    auto store = GalleryStore::Open(dir);
    ASSERT_TRUE(store.ok());
    for (int i = 0; i < 50; ++i) ASSERT_TRUE((*store)->Enroll(MakeTemplate(absl::StrCat("c", i), i)).ok());
    ASSERT_TRUE((*store)->Delete("c7").ok());
    // Cylinders for every template but c3.
    ASSERT_TRUE((*store)
                    ->Compact([](const StoredTemplate& t, MccTemplate* out) {
                      if (t.id == "c3") return false;
                      *out = FakeCylinders(t);
                      return true;
                    })
                    .ok());
    EXPECT_EQ(FileSize(LogPath(dir, 1)), -1);  // the old log is gone
    EXPECT_EQ(FileSize(LogPath(dir, 2)), 0);
    EXPECT_GT(FileSize(dir + "/" + gallery_internal::SnapshotFileName(2)), 0);
    ASSERT_TRUE((*store)->Enroll(MakeTemplate("late", 60)).ok());
    ASSERT_TRUE((*store)->Delete("c8").ok());
  }
  // An interrupted compaction's temporary file is ignored and removed.
  AppendBytes(dir + "/snapshot-0000000000000009.tmp", "junk");
  std::set<std::string> sunk;
  auto store = GalleryStore::Open(dir, [&](const std::shared_ptr<const StoredTemplate>& t, MccTemplate&& cyl) {
    const MccTemplate want = FakeCylinders(*t);
    ASSERT_EQ(cyl.cylinders.size(), want.cylinders.size());
    for (size_t i = 0; i < cyl.cylinders.size(); ++i) {
      EXPECT_EQ(0, std::memcmp(cyl.cylinders[i].bits, want.cylinders[i].bits, sizeof(want.cylinders[i].bits)));
      EXPECT_EQ(0, std::memcmp(cyl.cylinders[i].mask, want.cylinders[i].mask, sizeof(want.cylinders[i].mask)));
      EXPECT_EQ(cyl.cylinders[i].x, want.cylinders[i].x);
    }
    sunk.insert(t->id);
  });
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->open_stats().snapshot_templates, 49);
  EXPECT_EQ((*store)->open_stats().snapshot_cylinder_templates, 48);
  EXPECT_EQ(sunk.size(), 48u);
  EXPECT_EQ(sunk.count("c3"), 0u);
  EXPECT_EQ((*store)->size(), 49u);  // 50 - c7 + late - c8
  EXPECT_EQ((*store)->Get("c8"), nullptr);
  ASSERT_NE((*store)->Get("late"), nullptr);
  ExpectSame(*(*store)->Get("c42"), MakeTemplate("c42", 42));
  EXPECT_EQ(FileSize(dir + "/snapshot-0000000000000009.tmp"), -1);
}

TEST(GalleryStoreTest, CorruptSnapshotIsDataLoss) {
  const std::string dir = FreshDir("badsnap");
  {
    auto store = GalleryStore::Open(dir);
    ASSERT_TRUE(store.ok());
    for (int i = 0; i < 10; ++i) ASSERT_TRUE((*store)->Enroll(MakeTemplate(absl::StrCat("s", i), i)).ok());
    ASSERT_TRUE((*store)->Compact().ok());
  }
  const std::string snap = dir + "/" + gallery_internal::SnapshotFileName(2);
  const int fd = open(snap.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  char c = 0;
  ASSERT_EQ(pread(fd, &c, 1, 60), 1);
  c ^= 0x10;
  ASSERT_EQ(pwrite(fd, &c, 1, 60), 1);
  close(fd);
  auto store = GalleryStore::Open(dir);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("snapshot"));
}

// More entries than one decode batch (4096): CRC checks and decoding run on
// all cores, the results are applied (and sunk) in snapshot order, and a bad
// CRC in a later batch is DATA_LOSS at that entry's own offset.
TEST(GalleryStoreTest, LargeSnapshotReloadsInOrderAndFindsACorruptEntry) {
  const std::string dir = FreshDir("bigsnap");
  constexpr int kTemplates = 9000;
  {
    auto store = GalleryStore::Open(dir);
    ASSERT_TRUE(store.ok());
    std::vector<StoredTemplate> batch;
    for (int i = 0; i < kTemplates; ++i) batch.push_back(MakeTemplate(absl::StrFormat("b%05d", i), i));
    ASSERT_TRUE((*store)->EnrollBatch(std::move(batch)).ok());
    ASSERT_TRUE((*store)
                    ->Compact([](const StoredTemplate& t, MccTemplate* out) {
                      if (t.id.back() % 2 == 1) return false;  // odd ids: no cylinders
                      *out = FakeCylinders(t);
                      return true;
                    })
                    .ok());
  }
  std::vector<std::string> sunk;
  {
    auto store = GalleryStore::Open(dir, [&](const std::shared_ptr<const StoredTemplate>& t, MccTemplate&& cyl) {
      EXPECT_EQ(cyl.cylinders.size(), FakeCylinders(*t).cylinders.size()) << t->id;
      sunk.push_back(t->id);
    });
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_EQ((*store)->open_stats().snapshot_templates, kTemplates);
    EXPECT_EQ((*store)->open_stats().snapshot_cylinder_templates, kTemplates / 2);
    ExpectSame(*(*store)->Get("b06001"), MakeTemplate("b06001", 6001));
  }
  ASSERT_EQ(sunk.size(), static_cast<size_t>(kTemplates / 2));
  EXPECT_TRUE(std::is_sorted(sunk.begin(), sunk.end())) << "sink calls must follow the snapshot's order";
  // Walk the frames to entry 5000 (the header record comes first) and flip a payload byte.
  const std::string snap = dir + "/" + gallery_internal::SnapshotFileName(2);
  const int fd = open(snap.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  int64_t offset = 0;
  for (int record = 0; record <= 5000; ++record) {
    uint32_t len = 0;
    ASSERT_EQ(pread(fd, &len, 4, offset), 4);
    offset += 8 + len;
  }
  char c = 0;
  ASSERT_EQ(pread(fd, &c, 1, offset + 12), 1);
  c ^= 0x01;
  ASSERT_EQ(pwrite(fd, &c, 1, offset + 12), 1);
  close(fd);
  auto store = GalleryStore::Open(dir);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(store.status().message()), HasSubstr(absl::StrCat("at byte ", offset, ": CRC mismatch")));
}

// The child: enrolls (singly and in batches, compacting now and then) until
// killed, writing each acknowledged id to `fd` only after the store
// returned OK.
[[noreturn]] void EnrollForever(const std::string& dir, int fd, int round) {
  auto store = GalleryStore::Open(dir);
  if (!store.ok()) _exit(3);
  auto ack = [fd](const std::string& id) {
    const std::string line = id + "\n";
    if (write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) _exit(4);
  };
  for (int i = 0;; ++i) {
    if (i % 7 == 6) {
      std::vector<StoredTemplate> batch;
      for (int j = 0; j < 10; ++j) {
        batch.push_back(WithMetadata(MakeTemplate(absl::StrCat("r", round, "_", i, "_", j), i + j), i + j));
      }
      auto results = (*store)->EnrollBatch(batch);
      if (!results.ok()) _exit(5);
      for (const auto& r : *results) {
        if (r.ok()) ack((*r)->id);
      }
    } else {
      auto r = (*store)->Enroll(WithMetadata(MakeTemplate(absl::StrCat("r", round, "_", i), i), i));
      if (!r.ok()) _exit(6);
      ack((*r)->id);
    }
    if (i % 150 == 149 && !(*store)->Compact().ok()) _exit(7);
  }
}

TEST(GalleryStoreTest, AcknowledgedEnrollsSurviveKillNine) {
  const std::string dir = FreshDir("crash");
  std::mt19937 rng(20261130);
  std::set<std::string> acked;
  for (int round = 0; round < 4; ++round) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      close(fds[0]);
      EnrollForever(dir, fds[1], round);
    }
    close(fds[1]);
    const int ms = std::uniform_int_distribution<int>(100, 700)(rng);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    ASSERT_EQ(kill(child, SIGKILL), 0);
    int wstatus = 0;
    ASSERT_EQ(waitpid(child, &wstatus, 0), child);
    ASSERT_TRUE(WIFSIGNALED(wstatus)) << "child exited with " << WEXITSTATUS(wstatus);
    // Everything the child wrote before dying is in the pipe.
    std::string text;
    char buf[4096];
    for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) text.append(buf, n);
    close(fds[0]);
    int round_acks = 0;
    for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
      // A line cut short by the kill was never acknowledged.
      if (text.back() != '\n' && line.data() + line.size() == text.data() + text.size()) break;
      acked.insert(std::string(line));
      ++round_acks;
    }
    auto store = GalleryStore::Open(dir);
    ASSERT_TRUE(store.ok()) << "round " << round << ": " << store.status();
    std::printf("round %d: killed after %d ms, %d acknowledged, %zu in the store, %lld torn bytes dropped\n", round,
                ms, round_acks, (*store)->size(), static_cast<long long>((*store)->open_stats().truncated_bytes));
    EXPECT_GT(round_acks, 0);
    for (const std::string& id : acked) {
      auto t = (*store)->Get(id);
      ASSERT_NE(t, nullptr) << "acknowledged id " << id << " lost in round " << round;
    }
    // Consistent: every stored template is one the child made, intact.
    for (const auto& t : (*store)->Live()) {
      std::vector<std::string> parts = absl::StrSplit(t->id.substr(1), '_');
      ASSERT_GE(parts.size(), 2u) << t->id;
      int i = 0, j = 0;
      ASSERT_TRUE(absl::SimpleAtoi(parts[1], &i));
      if (parts.size() == 3) ASSERT_TRUE(absl::SimpleAtoi(parts[2], &j));
      ExpectSame(*t, WithMetadata(MakeTemplate(t->id, i + j), i + j));
    }
    // The subject index is rebuilt from what survived.
    int64_t indexed = 0;
    for (const auto& [subject, n] : (*store)->ListSubjects("", 1000)) {
      indexed += n;
      for (const auto& t : (*store)->OfSubject(subject)) EXPECT_EQ(t->metadata.subject_id, subject);
    }
    int64_t with_subject = 0;
    for (const auto& t : (*store)->Live()) with_subject += t->metadata.subject_id.empty() ? 0 : 1;
    EXPECT_EQ(indexed, with_subject);
  }
}

TEST(GalleryStoreTest, MetadataSurvivesReopenAndCompactionAndGoesWithItsSubject) {
  const std::string dir = FreshDir("metadata");
  {
    auto store = GalleryStore::Open(dir);
    ASSERT_TRUE(store.ok());
    for (int i = 0; i < 40; ++i) {
      ASSERT_TRUE((*store)->Enroll(WithMetadata(MakeTemplate(absl::StrCat("m", i), i), i)).ok());
    }
    // The same template and metadata again is a retry; other metadata is a conflict.
    EXPECT_TRUE((*store)->Enroll(WithMetadata(MakeTemplate("m5", 5), 5)).ok());
    StoredTemplate other = WithMetadata(MakeTemplate("m5", 5), 5);
    other.metadata.finger_position = 9;
    EXPECT_EQ((*store)->Enroll(other).status().code(), absl::StatusCode::kAlreadyExists);
    // Bad metadata is refused before anything is written.
    StoredTemplate bad = MakeTemplate("bad", 1);
    bad.metadata.capture_date = "2026-02-30";
    EXPECT_EQ((*store)->Enroll(bad).status().code(), absl::StatusCode::kInvalidArgument);
  }
  auto check_all = [](GalleryStore& store, const std::set<int>& gone) {
    for (int i = 0; i < 40; ++i) {
      auto t = store.Get(absl::StrCat("m", i));
      if (gone.count(i)) {
        EXPECT_EQ(t, nullptr) << i;
      } else {
        ASSERT_NE(t, nullptr) << i;
        ExpectSame(*t, WithMetadata(MakeTemplate(absl::StrCat("m", i), i), i));
      }
    }
  };
  auto store = GalleryStore::Open(dir);  // from the log (kinds 3 and 5)
  ASSERT_TRUE(store.ok()) << store.status();
  check_all(**store, {});
  // subject2: salts 2 and 36 (salt % 17 == 2; 19 is a fourth salt: no metadata).
  auto of2 = (*store)->OfSubject("subject2");
  ASSERT_EQ(of2.size(), 2u);
  EXPECT_EQ(of2[0]->id, "m2");
  EXPECT_EQ(of2[1]->id, "m36");
  EXPECT_TRUE((*store)->Get("m19")->metadata.empty());
  ASSERT_TRUE((*store)->Compact().ok());  // a version-3 snapshot
  store->reset();
  store = GalleryStore::Open(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  check_all(**store, {});
  auto deleted = (*store)->DeleteSubject("subject2");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, (std::vector<std::string>{"m2", "m36"}));
  EXPECT_EQ((*store)->DeleteSubject("subject2").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*store)->DeleteSubject("").status().code(), absl::StatusCode::kNotFound);
  // A replaced template leaves its old subject.
  StoredTemplate moved = MakeTemplate("m4", 4);
  moved.metadata.subject_id = "someone else";
  ASSERT_TRUE((*store)->Enroll(moved, /*replace=*/true).ok());
  for (const auto& t : (*store)->OfSubject("subject4")) EXPECT_NE(t->id, "m4");
  ASSERT_EQ((*store)->OfSubject("someone else").size(), 1u);
  store->reset();
  store = GalleryStore::Open(dir);  // snapshot + deletes from the log
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_TRUE((*store)->OfSubject("subject2").empty());
  EXPECT_EQ((*store)->Get("m2"), nullptr);
  EXPECT_EQ((*store)->Get("m4")->metadata.subject_id, "someone else");
  EXPECT_EQ((*store)->size(), 38u);
}

// A gallery written before metadata existed: a version-2 snapshot and kind-3
// log records. It opens, takes metadata, and compacts to version 3.
TEST(GalleryStoreTest, VersionTwoGalleryOpensAndUpgrades) {
  const std::string dir = FreshDir("v2", /*create=*/true);
  ChainLink link;
  std::string snapshot;
  {
    std::string header("TSFPSNAP", 8);
    const uint32_t version = 2;
    const uint64_t count = 3, cylinders = 0;
    header.append(reinterpret_cast<const char*>(&version), 4);
    header.append(reinterpret_cast<const char*>(&count), 8);
    header.append(reinterpret_cast<const char*>(&cylinders), 8);
    snapshot += gallery_internal::FrameRecord(header);
    for (int i = 0; i < 3; ++i) {
      // Before the snapshot the chain held these three enrolls.
      gallery_internal::ChainedEnroll(MakeTemplate(absl::StrCat("old", i), i), &link);
      std::string entry = gallery_internal::EncodeEnroll(MakeTemplate(absl::StrCat("old", i), i)).substr(1);
      entry.append("\xff\xff", 2);  // no cylinders
      snapshot += gallery_internal::FrameRecord(entry);
    }
    std::string end("TSFPEND.", 8);
    end.append(reinterpret_cast<const char*>(&count), 8);
    end.append(reinterpret_cast<const char*>(&link.records), 8);
    end.append(reinterpret_cast<const char*>(link.head.data()), 32);
    snapshot += gallery_internal::FrameRecord(end);
  }
  AppendBytes(dir + "/" + gallery_internal::SnapshotFileName(2), snapshot);
  AppendBytes(LogPath(dir, 2), gallery_internal::ChainedEnroll(MakeTemplate("old3", 3), &link));
  {
    auto store = GalleryStore::Open(dir);
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_EQ((*store)->size(), 4u);
    for (int i = 0; i < 4; ++i) ExpectSame(*(*store)->Get(absl::StrCat("old", i)), MakeTemplate(absl::StrCat("old", i), i));
    EXPECT_EQ((*store)->open_stats().chain_records, 4);
    ASSERT_TRUE((*store)->Enroll(WithMetadata(MakeTemplate("new", 8), 8)).ok());
    ASSERT_TRUE((*store)->Compact().ok());
  }
  auto store = GalleryStore::Open(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->size(), 5u);
  ExpectSame(*(*store)->Get("new"), WithMetadata(MakeTemplate("new", 8), 8));
  ExpectSame(*(*store)->Get("old0"), MakeTemplate("old0", 0));
  auto check = GalleryStore::Check(dir);
  ASSERT_TRUE(check.ok());
  EXPECT_TRUE(check->clean()) << check->error;
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
