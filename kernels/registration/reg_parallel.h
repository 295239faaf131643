// A minimal fork-join helper for the CPU backends of the registration kernels:
// split [0, n) into contiguous chunks (z-slabs, voxel ranges, labels) and run
// them on std::threads. Header-only; internal to kernels/registration.
#ifndef TESSERA_KERNELS_REGISTRATION_REG_PARALLEL_H_
#define TESSERA_KERNELS_REGISTRATION_REG_PARALLEL_H_

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <thread>
#include <vector>

namespace tessera {
namespace reg_internal {

// Worker count: TESSERA_CPU_THREADS if set (>= 1), else the hardware
// concurrency (at least 1).
inline int CpuThreads() {
  if (const char* env = std::getenv("TESSERA_CPU_THREADS")) {
    const int n = std::atoi(env);
    if (n >= 1) return n;
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

// Calls fn(chunk_index, begin, end) for `chunks` contiguous, disjoint ranges
// covering [0, n), each on its own thread (the calling thread runs the first).
// chunks = min(CpuThreads(), ceil(n / min_per_chunk)). Returns the number of
// chunks used, so callers can size per-chunk accumulators beforehand with
// NumChunks().
inline int NumChunks(int64_t n, int64_t min_per_chunk = 1) {
  if (n <= 0) return 0;
  const int64_t by_size = (n + std::max<int64_t>(1, min_per_chunk) - 1) / std::max<int64_t>(1, min_per_chunk);
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(CpuThreads(), by_size)));
}

template <typename Fn>
int ParallelChunks(int64_t n, int64_t min_per_chunk, Fn&& fn) {
  const int chunks = NumChunks(n, min_per_chunk);
  if (chunks == 0) return 0;
  auto range = [&](int c, int64_t* b, int64_t* e) {
    *b = n * c / chunks;
    *e = n * (c + 1) / chunks;
  };
  std::vector<std::thread> threads;
  threads.reserve(chunks - 1);
  for (int c = 1; c < chunks; ++c) {
    int64_t b, e;
    range(c, &b, &e);
    threads.emplace_back([&fn, c, b, e] { fn(c, b, e); });
  }
  int64_t b, e;
  range(0, &b, &e);
  fn(0, b, e);
  for (auto& t : threads) t.join();
  return chunks;
}

// Convenience: fn(begin, end) over [0, n).
template <typename Fn>
void ParallelFor(int64_t n, int64_t min_per_chunk, Fn&& fn) {
  ParallelChunks(n, min_per_chunk, [&fn](int, int64_t b, int64_t e) { fn(b, e); });
}

}  // namespace reg_internal
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_REG_PARALLEL_H_
