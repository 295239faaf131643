// Group commit across requests (gallery_store.h): concurrent single enrolls
// and deletes queue behind a sync in flight and share the next one; the tip
// of the queue decides duplicates; compaction waits for a write in flight.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "services/fingerprint/store/gallery_store.h"
#include "services/fingerprint/store/gallery_test_util.h"

namespace tessera {
namespace fingerprint {
namespace {

using gallery_testing::FreshDir;
using gallery_testing::MakeTemplate;

// Blocks until `store` has `n` requests queued (false after 20 s).
bool WaitForQueued(const GalleryStore& store, size_t n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (store.QueuedCommitsForTesting() < n) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

TEST(GalleryGroupCommitTest, EnrollsArrivingDuringASyncShareTheNextOne) {
  const std::string dir = FreshDir("group_commit");
  constexpr int kThreads = 8;
  {
    auto store = GalleryStore::Open(dir);
    ASSERT_TRUE(store.ok()) << store.status();
    GalleryStore* s = store->get();
    // The first leader holds its sync until the other seven have queued.
    std::promise<void> leading;
    std::atomic<bool> first{true};
    std::atomic<bool> all_queued{false};
    s->SetBeforeSyncHookForTesting([&] {
      if (!first.exchange(false)) return;
      leading.set_value();
      all_queued = WaitForQueued(*s, kThreads - 1);
    });
    std::vector<std::thread> threads;
    std::vector<absl::Status> results(kThreads);
    threads.emplace_back([&] { results[0] = s->Enroll(MakeTemplate("id0", 0)).status(); });
    leading.get_future().wait();
    for (int i = 1; i < kThreads; ++i) {
      threads.emplace_back([&, i] { results[i] = s->Enroll(MakeTemplate(absl::StrCat("id", i), i)).status(); });
    }
    for (auto& t : threads) t.join();
    ASSERT_TRUE(all_queued) << "the other enrolls never queued behind the first sync";
    for (const absl::Status& r : results) EXPECT_TRUE(r.ok()) << r;
    const GalleryCommitStats stats = s->commit_stats();
    EXPECT_EQ(stats.records, kThreads);
    EXPECT_EQ(stats.syncs, 2) << "seven enrolls queued behind one sync must share the next";
    EXPECT_EQ(s->size(), static_cast<size_t>(kThreads));
  }
  auto reopened = GalleryStore::Open(dir);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ((*reopened)->size(), static_cast<size_t>(kThreads));
  EXPECT_EQ((*reopened)->open_stats().chain_records, kThreads);
}

TEST(GalleryGroupCommitTest, QueuedRecordsDecideDuplicatesAndDeletes) {
  const std::string dir = FreshDir("group_commit_tip");
  {
    auto store = GalleryStore::Open(dir);
    ASSERT_TRUE(store.ok()) << store.status();
    GalleryStore* s = store->get();
    std::promise<void> leading;
    std::atomic<bool> first{true};
    std::atomic<bool> queued_two{false};
    s->SetBeforeSyncHookForTesting([&] {
      if (!first.exchange(false)) return;
      leading.set_value();
      queued_two = WaitForQueued(*s, 2);
    });
    std::thread enroll_a([&] { EXPECT_TRUE(s->Enroll(MakeTemplate("a", 1)).ok()); });
    leading.get_future().wait();  // "a" is being written, not yet durable
    EXPECT_EQ(s->Get("a"), nullptr) << "not applied before its sync";
    // The tip already holds "a": a second enroll is a duplicate at once.
    EXPECT_EQ(s->Enroll(MakeTemplate("a", 2)).status().code(), absl::StatusCode::kAlreadyExists);
    EXPECT_EQ(s->Delete("never").code(), absl::StatusCode::kNotFound);
    std::thread delete_a([&] { EXPECT_TRUE(s->Delete("a").ok()); });
    ASSERT_TRUE(WaitForQueued(*s, 1));
    std::thread enroll_b([&] { EXPECT_TRUE(s->Enroll(MakeTemplate("b", 3)).ok()); });
    enroll_a.join();
    delete_a.join();
    enroll_b.join();
    EXPECT_TRUE(queued_two);
    EXPECT_EQ(s->Get("a"), nullptr);
    ASSERT_NE(s->Get("b"), nullptr);
    EXPECT_EQ(s->commit_stats().syncs, 2);
    EXPECT_EQ(s->commit_stats().records, 3);
  }
  auto reopened = GalleryStore::Open(dir);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ((*reopened)->Get("a"), nullptr);
  EXPECT_NE((*reopened)->Get("b"), nullptr);
  EXPECT_EQ((*reopened)->open_stats().chain_records, 3);
}

TEST(GalleryGroupCommitTest, CompactionDuringConcurrentEnrollsLosesNothing) {
  const std::string dir = FreshDir("group_commit_compact");
  constexpr int kThreads = 4, kPerThread = 40;
  {
    auto store = GalleryStore::Open(dir);
    ASSERT_TRUE(store.ok()) << store.status();
    GalleryStore* s = store->get();
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([s, t] {
        for (int i = 0; i < kPerThread; ++i) {
          const std::string id = absl::StrCat("t", t, "-", i);
          ASSERT_TRUE(s->Enroll(MakeTemplate(id, i)).ok()) << id;
          if (i % 10 == 9) ASSERT_TRUE(s->Delete(id).ok()) << id;
        }
      });
    }
    for (int c = 0; c < 3; ++c) {
      ASSERT_TRUE(s->Compact().ok());
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(s->size(), static_cast<size_t>(kThreads * kPerThread * 9 / 10));
    EXPECT_LE(s->commit_stats().syncs, s->commit_stats().records);
  }
  auto reopened = GalleryStore::Open(dir);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ((*reopened)->size(), static_cast<size_t>(kThreads * kPerThread * 9 / 10));
  EXPECT_EQ((*reopened)->open_stats().chain_records, kThreads * kPerThread * 11 / 10);
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
