// Fork-join helper for the SOM CPU kernels: one contiguous chunk of a range per
// worker thread. Chunking depends only on the range and the thread count, so
// per-chunk partials summed in chunk order are deterministic for a given count.
#ifndef TESSERA_KERNELS_SOM_PARALLEL_H_
#define TESSERA_KERNELS_SOM_PARALLEL_H_

#include <cstdint>
#include <functional>

namespace tessera {
namespace som {

// TESSERA_CPU_THREADS if set (>= 1), else std::thread::hardware_concurrency().
int CpuThreads();

// Calls fn(begin, end, chunk) for min(n, CpuThreads()) contiguous chunks of
// [0, n) on separate threads (the caller takes chunk 0); returns when all are
// done. Returns the number of chunks used.
int ParallelFor(int64_t n, const std::function<void(int64_t begin, int64_t end, int chunk)>& fn);

// Like ParallelFor, but hands out `grain`-sized pieces dynamically (for uneven
// work such as documents of very different lengths). fn(begin, end, worker).
void ParallelForDynamic(int64_t n, int64_t grain, const std::function<void(int64_t begin, int64_t end, int worker)>& fn);

}  // namespace som
}  // namespace tessera

#endif  // TESSERA_KERNELS_SOM_PARALLEL_H_
