#include "common/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace tessera {
namespace {

TEST(Parallel, ChunksCoverTheRangeOnceInOrder) {
  for (int64_t n : {0, 1, 2, 7, 1000}) {
    std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
    std::vector<int64_t> starts(64, -1);
    const int chunks = ParallelFor(n, [&](int64_t b, int64_t e, int c) {
      starts[c] = b;
      for (int64_t i = b; i < e; ++i) seen[i]++;
    });
    EXPECT_EQ(chunks, ParallelChunks(n));
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(seen[i].load(), 1) << i;
    for (int c = 1; c < chunks; ++c) EXPECT_GT(starts[c], starts[c - 1]);
  }
}

TEST(Parallel, MinPerChunkLimitsChunks) {
  EXPECT_EQ(ParallelChunks(10, 100), 1);
  EXPECT_EQ(ParallelChunks(0, 1), 0);
  EXPECT_LE(ParallelChunks(1000, 1), CpuThreads());
}

TEST(Parallel, DynamicVisitsEveryPieceOnce) {
  std::vector<std::atomic<int>> seen(1003);
  ParallelForDynamic(1003, 10, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) seen[i]++;
  });
  for (auto& s : seen) EXPECT_EQ(s.load(), 1);
}

}  // namespace
}  // namespace tessera
