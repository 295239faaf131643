#include "common/parallel.h"

#include <algorithm>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"

namespace tessera {
namespace {

// BUILD sets TESSERA_CPU_THREADS=4.
struct Chunk {
  int64_t begin, end;
  int index;
  std::thread::id thread;
};

std::vector<Chunk> RunInner(int64_t n) {
  std::mutex mu;
  std::vector<Chunk> chunks;
  ParallelFor(n, [&](int64_t b, int64_t e, int c) {
    std::lock_guard<std::mutex> lock(mu);
    chunks.push_back({b, e, c, std::this_thread::get_id()});
  });
  std::sort(chunks.begin(), chunks.end(), [](const Chunk& a, const Chunk& b) { return a.index < b.index; });
  return chunks;
}

TEST(ParallelFor, ALoopNestedInABusyLoopRunsOnItsThreadWithTheSameChunks) {
  ASSERT_EQ(CpuThreads(), 4);
  const std::vector<Chunk> alone = RunInner(10);
  ASSERT_EQ(alone.size(), 4u);
  std::vector<std::vector<Chunk>> nested(4);
  std::vector<std::thread::id> outer_thread(4);
  ParallelFor(4, [&](int64_t b, int64_t, int c) {
    outer_thread[c] = std::this_thread::get_id();
    nested[c] = RunInner(10);
  });
  for (int c = 0; c < 4; ++c) {
    ASSERT_EQ(nested[c].size(), alone.size());
    for (size_t i = 0; i < alone.size(); ++i) {
      EXPECT_EQ(std::tie(nested[c][i].begin, nested[c][i].end, nested[c][i].index),
                std::tie(alone[i].begin, alone[i].end, alone[i].index));
      EXPECT_EQ(nested[c][i].thread, outer_thread[c]) << "outer chunk " << c << ", inner chunk " << i;
    }
  }
}

TEST(ParallelFor, ALoopNestedInALoopWithIdleThreadsStillSpreads) {
  std::vector<std::set<std::thread::id>> inner_threads(2);
  ParallelFor(2, [&](int64_t, int64_t, int c) {
    for (const Chunk& k : RunInner(10)) inner_threads[c].insert(k.thread);
  });
  EXPECT_GT(inner_threads[0].size(), 1u);
  EXPECT_GT(inner_threads[1].size(), 1u);
}

TEST(ParallelForDynamic, NestedInABusyLoopTakesEveryPieceOnItsThread) {
  std::vector<std::set<std::thread::id>> inner_threads(4);
  std::vector<int64_t> covered(4, 0);
  ParallelFor(4, [&](int64_t, int64_t, int c) {
    ParallelForDynamic(100, 7, [&](int64_t b, int64_t e, int worker) {
      EXPECT_EQ(worker, 0);
      inner_threads[c].insert(std::this_thread::get_id());
      covered[c] += e - b;
    });
  });
  for (int c = 0; c < 4; ++c) {
    EXPECT_EQ(inner_threads[c].size(), 1u);
    EXPECT_EQ(covered[c], 100);
  }
}

}  // namespace
}  // namespace tessera
