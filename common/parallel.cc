#include "common/parallel.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

namespace tessera {

int CpuThreads() {
  static const int threads = [] {
    if (const char* env = std::getenv("TESSERA_CPU_THREADS")) {
      const int n = std::atoi(env);
      if (n >= 1) return n;
    }
    const unsigned hw = std::thread::hardware_concurrency();
    return hw == 0 ? 1 : static_cast<int>(hw);
  }();
  return threads;
}

int ParallelChunks(int64_t n, int64_t min_per_chunk) {
  if (n <= 0) return 0;
  min_per_chunk = std::max<int64_t>(1, min_per_chunk);
  const int64_t by_size = (n + min_per_chunk - 1) / min_per_chunk;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(CpuThreads(), by_size)));
}

int ParallelFor(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn, int64_t min_per_chunk) {
  const int chunks = ParallelChunks(n, min_per_chunk);
  if (chunks == 0) return 0;
  auto bounds = [n, chunks](int c) { return n * c / chunks; };
  if (chunks == 1) {
    fn(0, n, 0);
    return 1;
  }
  std::vector<std::thread> workers;
  workers.reserve(chunks - 1);
  for (int c = 1; c < chunks; ++c) {
    workers.emplace_back([&fn, &bounds, c] { fn(bounds(c), bounds(c + 1), c); });
  }
  fn(bounds(0), bounds(1), 0);
  for (auto& t : workers) t.join();
  return chunks;
}

void ParallelForDynamic(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t pieces = (n + grain - 1) / grain;
  const int workers = static_cast<int>(std::min<int64_t>(pieces, CpuThreads()));
  std::atomic<int64_t> next{0};
  auto work = [&](int worker) {
    for (;;) {
      const int64_t p = next.fetch_add(1);
      if (p >= pieces) return;
      fn(p * grain, std::min(n, (p + 1) * grain), worker);
    }
  };
  if (workers == 1) {
    work(0);
    return;
  }
  std::vector<std::thread> threads;
  threads.reserve(workers - 1);
  for (int w = 1; w < workers; ++w) threads.emplace_back(work, w);
  work(0);
  for (auto& t : threads) t.join();
}

}  // namespace tessera
