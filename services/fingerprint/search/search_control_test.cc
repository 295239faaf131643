// StopPoller: stops once the check says so (and keeps that status), polls at
// most once per interval from inner loops, is safe from many threads.
// MergeTopK: chunked merging (with excluded templates) equals one TopK.
#include "services/fingerprint/search/search_control.h"

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "services/fingerprint/search/top_k.h"

namespace tessera {
namespace fingerprint {
namespace {

TEST(StopPollerTest, NoControlNeverStops) {
  StopPoller none(nullptr);
  EXPECT_FALSE(none.StopNow());
  EXPECT_FALSE(none.ShouldStop());
  EXPECT_TRUE(none.status().ok());
  SearchControl empty;  // no check
  StopPoller also_none(&empty);
  EXPECT_FALSE(also_none.StopNow());
  EXPECT_EQ(also_none.polls(), 0);
}

TEST(StopPollerTest, StopsWithTheCheckStatusAndStaysStopped) {
  std::atomic<bool> cancel{false};
  SearchControl control;
  control.check = CancelFlagCheck(&cancel);
  StopPoller stop(&control);
  EXPECT_FALSE(stop.StopNow());
  cancel = true;
  EXPECT_TRUE(stop.StopNow());
  EXPECT_EQ(stop.status().code(), absl::StatusCode::kCancelled);
  cancel = false;  // once stopped, always stopped
  EXPECT_TRUE(stop.ShouldStop());
  EXPECT_TRUE(stop.StopNow());
}

TEST(StopPollerTest, DeadlineCheck) {
  SearchControl control;
  control.check = CancelFlagCheck(nullptr, absl::Now() - absl::Milliseconds(1));
  StopPoller stop(&control);
  EXPECT_TRUE(stop.StopNow());
  EXPECT_EQ(stop.status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(StopPollerTest, InnerLoopsPollAtMostOncePerInterval) {
  std::atomic<int> calls{0};
  SearchControl control;
  control.check = [&] {
    ++calls;
    return absl::OkStatus();
  };
  control.poll_interval = absl::Hours(1);
  StopPoller stop(&control);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100000; ++i) EXPECT_FALSE(stop.ShouldStop());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(calls.load(), 1);  // the first ShouldStop only
  EXPECT_EQ(stop.polls(), 1);
}

TEST(StopPollerTest, ManyThreadsSeeTheStop) {
  std::atomic<bool> cancel{false};
  SearchControl control;
  control.check = CancelFlagCheck(&cancel);
  control.poll_interval = absl::ZeroDuration();
  StopPoller stop(&control);
  std::atomic<int> stopped_threads{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      while (!stop.ShouldStop()) std::this_thread::yield();
      ++stopped_threads;
    });
  }
  cancel = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(stopped_threads.load(), 4);
  EXPECT_EQ(stop.status().code(), absl::StatusCode::kCancelled);
}

TEST(TopKTest, ChunkedMergeWithExclusionsEqualsOneSelection) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> coarse(0, 20);  // many ties
  const int n = 5000;
  std::vector<float> scores(n);
  std::vector<uint8_t> exclude(n);
  for (int i = 0; i < n; ++i) {
    scores[i] = coarse(rng) / 20.0f;
    exclude[i] = rng() % 7 == 0;
  }
  scores[17] = std::nanf("");
  for (int k : {1, 10, 100, 6000}) {
    // Reference: excluded scores sink below everything.
    std::vector<Candidate> want;
    for (const Candidate& c : TopK(scores.data(), n, n)) {
      if (!exclude[c.template_index] && static_cast<int>(want.size()) < k) want.push_back(c);
    }
    for (int chunk : {1, 97, 1000, n}) {
      std::vector<Candidate> got;
      for (int b = 0; b < n; b += chunk) {
        const int e = std::min(n, b + chunk);
        MergeTopK(scores.data() + b, e - b, b, k, &got, exclude.data());
      }
      ASSERT_EQ(got.size(), want.size()) << "k " << k << " chunk " << chunk;
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].template_index, want[i].template_index) << "k " << k << " chunk " << chunk << " rank " << i;
      }
    }
  }
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
