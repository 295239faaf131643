#include "common/parallel.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

namespace tessera {
namespace {

// True on a thread that runs a chunk of a ParallelFor / ParallelForDynamic
// that already keeps every CPU thread busy: a loop nested in it (a slice's
// solver inside a loop over slices) then runs its chunks here one after the
// other, with the same chunk boundaries (so the same sums), instead of
// starting more threads than there are cores.
thread_local bool all_threads_busy = false;

class BusyScope {
 public:
  explicit BusyScope(bool busy) : saved_(all_threads_busy) { all_threads_busy = busy || saved_; }
  ~BusyScope() { all_threads_busy = saved_; }

 private:
  bool saved_;
};

}  // namespace

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
  if (all_threads_busy) {
    for (int c = 0; c < chunks; ++c) fn(bounds(c), bounds(c + 1), c);
    return chunks;
  }
  const bool busy = chunks >= CpuThreads();
  std::vector<std::thread> workers;
  workers.reserve(chunks - 1);
  for (int c = 1; c < chunks; ++c) {
    workers.emplace_back([&fn, &bounds, c, busy] {
      const BusyScope scope(busy);
      fn(bounds(c), bounds(c + 1), c);
    });
  }
  {
    const BusyScope scope(busy);
    fn(bounds(0), bounds(1), 0);
  }
  for (auto& t : workers) t.join();
  return chunks;
}

void ParallelForDynamic(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t pieces = (n + grain - 1) / grain;
  const int workers = static_cast<int>(std::min<int64_t>(pieces, CpuThreads()));
  std::atomic<int64_t> next{0};
  const bool busy = workers >= CpuThreads();
  auto work = [&](int worker) {
    const BusyScope scope(busy);
    for (;;) {
      const int64_t p = next.fetch_add(1);
      if (p >= pieces) return;
      fn(p * grain, std::min(n, (p + 1) * grain), worker);
    }
  };
  if (workers == 1 || all_threads_busy) {  // nested in a busy loop: this thread takes every piece
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
