#include "kernels/registration/parallel.h"

#include <algorithm>
#include <cstdlib>
#include <thread>
#include <vector>

namespace tessera {
namespace registration {

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

int ParallelChunks(int64_t n) {
  if (n <= 1) return 1;
  return static_cast<int>(std::min<int64_t>(n, CpuThreads()));
}

void ParallelFor(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  const int chunks = ParallelChunks(n);
  auto bounds = [n, chunks](int c) { return n * c / chunks; };
  if (chunks == 1) {
    fn(0, n, 0);
    return;
  }
  std::vector<std::thread> workers;
  workers.reserve(chunks - 1);
  for (int c = 1; c < chunks; ++c) {
    workers.emplace_back([&fn, &bounds, c] { fn(bounds(c), bounds(c + 1), c); });
  }
  fn(bounds(0), bounds(1), 0);
  for (auto& t : workers) t.join();
}

}  // namespace registration
}  // namespace tessera
