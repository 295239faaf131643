// SearchBatcher: concurrent searches are gathered into batches (up to the
// size, within the delay, grouped by matcher) and give exactly the results
// of unbatched searches on a real searcher; the queue never passes its bound
// and rejects with RESOURCE_EXHAUSTED and a retry hint; a cancelled search
// leaves the queue and never runs; a running batch skips members that have
// gone and stops when all have; shutdown answers every waiting caller.
#include "services/fingerprint/search/search_batcher.h"

#include <atomic>
#include <map>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/metrics.h"
#include "kernels/fingerprint/test_templates.h"
#include "services/fingerprint/store/gallery_test_util.h"

namespace tessera {
namespace fingerprint {
namespace {

using Clock = std::chrono::steady_clock;

// A fake searcher: each probe's single minutia x is its tag; the candidate
// list is tag repeated top_k times (score = rank). Records the batches.
class FakeSearcher {
 public:
  absl::StatusOr<std::vector<std::vector<SearchCandidate>>> Run(const std::vector<std::vector<MinutiaPoint>>& probes,
                                                                const SearchOptions& options, SearchStats* stats) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      batches_.push_back(static_cast<int>(probes.size()));
      matchers_.push_back(options.matcher);
      filters_.push_back(options.filter.Key());
      ++running_;
      cv_.notify_all();
      cv_.wait(lock, [&] { return open_; });
    }
    // Like a long search: poll the control until done or told to stop.
    StopPoller stop(options.control);
    for (int i = 0; i < work_polls_; ++i) {
      if (stop.StopNow()) break;
      if (options.control != nullptr && options.control->probe_wanted) {
        std::lock_guard<std::mutex> lock(mu_);
        for (size_t p = 0; p < probes.size(); ++p) {
          if (!options.control->probe_wanted(static_cast<int>(p))) skipped_.push_back(probes[p][0].x);
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      --running_;
      cv_.notify_all();
    }
    if (stop.stopped()) return stop.status();
    std::vector<std::vector<SearchCandidate>> out;
    for (const auto& p : probes) {
      std::vector<SearchCandidate> c;
      for (int r = 0; r < options.top_k; ++r) c.push_back({absl::StrCat(p[0].x), static_cast<float>(r)});
      out.push_back(c);
    }
    stats->matcher = options.matcher;
    return out;
  }
  SearchBatcher::RunFn fn() {
    return [this](const auto& probes, const SearchOptions& o, SearchStats* s) { return Run(probes, o, s); };
  }
  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = false;
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void WaitRunning(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return running_ >= n; });
  }
  void WaitIdle() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return running_ == 0; });
  }
  std::vector<int> batches() {
    std::lock_guard<std::mutex> lock(mu_);
    return batches_;
  }
  std::vector<std::string> matchers() {
    std::lock_guard<std::mutex> lock(mu_);
    return matchers_;
  }
  std::vector<std::string> filters() {
    std::lock_guard<std::mutex> lock(mu_);
    return filters_;
  }
  std::vector<float> skipped() {
    std::lock_guard<std::mutex> lock(mu_);
    return skipped_;
  }
  int work_polls_ = 1;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
  int running_ = 0;
  std::vector<int> batches_;
  std::vector<std::string> matchers_;
  std::vector<std::string> filters_;
  std::vector<float> skipped_;
};

BatchedSearch Tagged(int tag, int top_k = 3, std::string matcher = "", const std::atomic<bool>* cancel = nullptr) {
  BatchedSearch s;
  s.probe = {{static_cast<float>(tag), 0, 0}};
  s.top_k = top_k;
  s.matcher = std::move(matcher);
  if (cancel != nullptr) s.check = CancelFlagCheck(cancel);
  return s;
}

SearchBatcherOptions Opts(int max_batch, int max_queued = 1024, absl::Duration delay = absl::Milliseconds(2)) {
  SearchBatcherOptions o;
  o.max_batch_size = max_batch;
  o.max_queued = max_queued;
  o.max_queue_delay = delay;
  o.caller_poll_interval = absl::Milliseconds(1);
  return o;
}

TEST(SearchBatcherTest, OptionsAreValidated) {
  EXPECT_TRUE(Opts(64).Validate().ok());
  EXPECT_FALSE(Opts(0).Validate().ok());
  EXPECT_FALSE(Opts(4, 0).Validate().ok());
  EXPECT_FALSE(Opts(4, 4, absl::Milliseconds(-1)).Validate().ok());
}

TEST(SearchBatcherTest, GathersConcurrentSearchesByMatcher) {
  FakeSearcher fake;
  auto registry = std::make_shared<prometheus::Registry>();
  SearchMetrics metrics(registry);
  SearchBatcher batcher(fake.fn(), "lssr", Opts(8, 1024, absl::Milliseconds(200)), &metrics);
  fake.Close();  // the first batch holds the dispatcher while the rest queue up
  std::vector<std::thread> threads;
  std::vector<absl::StatusOr<BatchedSearchResult>> results(33, absl::UnknownError(""));
  threads.emplace_back([&] { results[0] = batcher.Search(Tagged(0)); });
  fake.WaitRunning(1);
  for (int i = 1; i < 33; ++i) {
    // "" and "lssr" share batches; "dmc" batches apart.
    const std::string matcher = i % 4 == 0 ? "dmc" : (i % 2 ? "" : "lssr");
    threads.emplace_back([&, i, matcher] { results[i] = batcher.Search(Tagged(i, 1 + i % 5, matcher)); });
  }
  while (batcher.counters().queue_depth < 32) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  fake.Open();
  for (auto& t : threads) t.join();
  for (int i = 0; i < 33; ++i) {
    ASSERT_TRUE(results[i].ok()) << i << ": " << results[i].status();
    ASSERT_EQ(results[i]->candidates.size(), static_cast<size_t>(i == 0 ? 3 : 1 + i % 5)) << i;
    EXPECT_EQ(results[i]->candidates[0].id, absl::StrCat(i));
    EXPECT_EQ(results[i]->stats.matcher, i % 4 == 0 && i > 0 ? "dmc" : "lssr");
  }
  // 1 + 24 lssr in batches of <= 8, 8 dmc in one.
  const std::vector<int> sizes = fake.batches();
  const std::vector<std::string> matchers = fake.matchers();
  EXPECT_EQ(sizes[0], 1);
  int lssr = 0, dmc = 0;
  for (size_t b = 1; b < sizes.size(); ++b) {
    EXPECT_LE(sizes[b], 8);
    (matchers[b] == "dmc" ? dmc : lssr) += sizes[b];
    EXPECT_NE(matchers[b], "");  // normalized
  }
  EXPECT_EQ(lssr, 24);
  EXPECT_EQ(dmc, 8);
  EXPECT_EQ(sizes.size(), 1u + 3 + 1);
  EXPECT_EQ(batcher.counters().max_queue_depth, 32);
  EXPECT_EQ(batcher.counters().queue_depth, 0);
  const std::string text = SerializeMetrics(*registry);
  EXPECT_NE(text.find("tessera_fingerprint_search_batch_size_count{matcher=\"lssr\"} 4"), std::string::npos) << text;
  EXPECT_NE(text.find("tessera_fingerprint_search_queue_depth 0"), std::string::npos);
  EXPECT_NE(text.find("tessera_fingerprint_searches_total{outcome=\"ok\"} 33"), std::string::npos);
}

// Searches with different filters (finger positions, impression types) never
// share a batch: the searcher applies one filter to the whole call.
TEST(SearchBatcherTest, BatchesOnlySearchesWithTheSameFilter) {
  FakeSearcher fake;
  SearchBatcher batcher(fake.fn(), "lssr", Opts(16, 1024, absl::Milliseconds(200)), nullptr);
  fake.Close();
  std::vector<std::thread> threads;
  std::vector<absl::StatusOr<BatchedSearchResult>> results(13, absl::UnknownError(""));
  threads.emplace_back([&] { results[0] = batcher.Search(Tagged(0)); });
  fake.WaitRunning(1);
  for (int i = 1; i < 13; ++i) {
    BatchedSearch s = Tagged(i);
    if (i % 3 == 1) s.filter.finger_positions = {2, 7};
    if (i % 3 == 2) s.filter.finger_positions = {7, 2, 2};  // the same filter, written otherwise
    if (i % 3 == 0) s.filter.impression_types = {4};
    threads.emplace_back([&, i, s] { results[i] = batcher.Search(s); });
  }
  while (batcher.counters().queue_depth < 12) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  fake.Open();
  for (auto& t : threads) t.join();
  for (int i = 0; i < 13; ++i) ASSERT_TRUE(results[i].ok()) << i;
  const std::vector<int> sizes = fake.batches();
  const std::vector<std::string> filters = fake.filters();
  ASSERT_EQ(sizes.size(), 3u);  // the lone first, then one batch per filter
  EXPECT_EQ(filters[0], "");
  std::map<std::string, int> per_filter;
  for (size_t b = 1; b < sizes.size(); ++b) per_filter[filters[b]] += sizes[b];
  EXPECT_EQ(per_filter["fgp=2,7;imp="], 8);
  EXPECT_EQ(per_filter["fgp=;imp=4"], 4);
}

TEST(SearchBatcherTest, ResultsEqualUnbatchedSearchesOnARealSearcher) {
  const auto points = testing::SyntheticTemplates(150, 81);
  SearcherOptions so;
  so.device = "cpu";
  so.chunk_templates = 40;
  auto searcher = CreateSearcher(so);
  ASSERT_TRUE(searcher.ok());
  std::vector<std::shared_ptr<const StoredTemplate>> entries = gallery_testing::EntriesOf(points, "g");
  // Duplicates: exact ties that ranks must break the same way.
  for (int i = 0; i < 5; ++i) {
    auto t = std::make_shared<StoredTemplate>(*entries[i * 7]);
    t->id = absl::StrCat("dup", i);
    entries.push_back(t);
  }
  ASSERT_TRUE((*searcher)->Add(entries).ok());
  GallerySearcher* s = searcher->get();
  SearchBatcher batcher(
      [s](const auto& probes, const SearchOptions& o, SearchStats* st) { return s->Search(probes, o, st); }, "lssr",
      Opts(16, 1024, absl::Milliseconds(20)), nullptr);
  const int n = 40;
  std::vector<absl::StatusOr<BatchedSearchResult>> got(n, absl::UnknownError(""));
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      BatchedSearch q;
      q.probe = points[(i * 13) % 150];
      q.top_k = 1 + (i * 7) % 12;
      q.matcher = i % 10 == 9 ? "dmc" : "";
      got[i] = batcher.Search(std::move(q));
    });
  }
  for (auto& t : threads) t.join();
  int batched = 0;
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(got[i].ok()) << got[i].status();
    batched += got[i]->batch_size > 1;
    auto alone = s->Search({points[(i * 13) % 150]}, 1 + (i * 7) % 12, nullptr, i % 10 == 9 ? "dmc" : "");
    ASSERT_TRUE(alone.ok());
    ASSERT_EQ(got[i]->candidates.size(), (*alone)[0].size()) << i;
    for (size_t r = 0; r < (*alone)[0].size(); ++r) {
      EXPECT_EQ(got[i]->candidates[r].id, (*alone)[0][r].id) << i << " rank " << r;
      EXPECT_EQ(got[i]->candidates[r].score, (*alone)[0][r].score) << i << " rank " << r;
    }
  }
  EXPECT_GT(batched, 0);
  EXPECT_LT(batcher.counters().batches, n);
}

TEST(SearchBatcherTest, BoundedQueueRejectsWithARetryHint) {
  FakeSearcher fake;
  SearchBatcher batcher(fake.fn(), "lssr", Opts(2, 4, absl::ZeroDuration()), nullptr);
  fake.Close();
  std::vector<std::thread> threads;
  std::vector<absl::StatusOr<BatchedSearchResult>> results(20, absl::UnknownError(""));
  std::vector<int64_t> retry(20, 0);
  threads.emplace_back([&] { results[0] = batcher.Search(Tagged(0)); });
  fake.WaitRunning(1);
  for (int i = 1; i < 20; ++i) threads.emplace_back([&, i] { results[i] = batcher.Search(Tagged(i), &retry[i]); });
  // Wait until every caller is either queued or rejected.
  for (;;) {
    const auto c = batcher.counters();
    if (c.queue_depth + c.rejected == 19) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(batcher.counters().queue_depth, 4);
  fake.Open();
  for (auto& t : threads) t.join();
  int ok = 0, rejected = 0;
  for (int i = 0; i < 20; ++i) {
    if (results[i].ok()) {
      ++ok;
      continue;
    }
    ASSERT_EQ(results[i].status().code(), absl::StatusCode::kResourceExhausted) << results[i].status();
    EXPECT_NE(results[i].status().message().find("retry after about"), absl::string_view::npos);
    EXPECT_GT(retry[i], 0);
    ++rejected;
  }
  EXPECT_EQ(ok, 5);  // the running one and the 4 queued: every caller got an answer
  EXPECT_EQ(rejected, 15);
  EXPECT_LE(batcher.counters().max_queue_depth, 4);
}

TEST(SearchBatcherTest, CancelledSearchLeavesTheQueueAndNeverRuns) {
  FakeSearcher fake;
  SearchBatcher batcher(fake.fn(), "lssr", Opts(8, 16, absl::ZeroDuration()), nullptr);
  fake.Close();
  absl::StatusOr<BatchedSearchResult> first = absl::UnknownError(""), a = first, b = first;
  std::atomic<bool> cancel_a{false};
  std::thread t0([&] { first = batcher.Search(Tagged(0)); });
  fake.WaitRunning(1);
  std::thread ta([&] { a = batcher.Search(Tagged(1, 3, "", &cancel_a)); });
  std::thread tb([&] { b = batcher.Search(Tagged(2)); });
  while (batcher.counters().queue_depth < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  cancel_a = true;
  ta.join();  // returns while the dispatcher is still busy
  EXPECT_EQ(a.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(batcher.counters().queue_depth, 1);
  fake.Open();
  t0.join();
  tb.join();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(fake.batches(), (std::vector<int>{1, 1}));  // b ran alone
}

TEST(SearchBatcherTest, RunningBatchSkipsGoneMembersAndStopsWhenAllHaveGone) {
  FakeSearcher fake;
  fake.work_polls_ = 100000;  // ~100 s unless stopped
  SearchBatcher batcher(fake.fn(), "lssr", Opts(4, 16, absl::Milliseconds(50)), nullptr);
  std::atomic<bool> cancel[2] = {false, false};
  absl::StatusOr<BatchedSearchResult> r[2] = {absl::UnknownError(""), absl::UnknownError("")};
  std::thread t0([&] { r[0] = batcher.Search(Tagged(10, 3, "", &cancel[0])); });
  std::thread t1([&] { r[1] = batcher.Search(Tagged(11, 3, "", &cancel[1])); });
  fake.WaitRunning(1);
  cancel[0] = true;
  t0.join();
  EXPECT_EQ(r[0].status().code(), absl::StatusCode::kCancelled);
  // The batch goes on for the other member, skipping probe 10.
  while (fake.skipped().empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(fake.skipped()[0], 10.0f);
  const auto t_cancel = Clock::now();
  cancel[1] = true;
  t1.join();
  EXPECT_EQ(r[1].status().code(), absl::StatusCode::kCancelled);
  fake.WaitIdle();  // the batch itself stopped
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t_cancel).count(), 2.0);
}

TEST(SearchBatcherTest, ShutdownAnswersEveryWaitingCaller) {
  FakeSearcher fake;
  fake.work_polls_ = 100000;
  std::vector<absl::StatusOr<BatchedSearchResult>> results(6, absl::UnknownError(""));
  std::vector<std::thread> threads;
  {
    SearchBatcher batcher(fake.fn(), "lssr", Opts(2, 16, absl::ZeroDuration()), nullptr);
    threads.emplace_back([&] { results[0] = batcher.Search(Tagged(0)); });
    fake.WaitRunning(1);
    for (int i = 1; i < 6; ++i) threads.emplace_back([&, i] { results[i] = batcher.Search(Tagged(i)); });
    while (batcher.counters().queue_depth < 5) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }  // destroyed: the running batch is stopped, the queued ones answered
  for (auto& t : threads) t.join();
  for (const auto& r : results) EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
}

TEST(SearchBatcherTest, BatchSizeOneRunsOnTheCallersThread) {
  FakeSearcher fake;
  SearchBatcher batcher(fake.fn(), "lssr", Opts(1), nullptr);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      auto r = batcher.Search(Tagged(i));
      ASSERT_TRUE(r.ok());
      EXPECT_EQ(r->batch_size, 1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(fake.batches(), std::vector<int>(8, 1));
  EXPECT_EQ(batcher.counters().batches, 0);  // no queue involved
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
