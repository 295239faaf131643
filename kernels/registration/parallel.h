// A minimal fork-join helper for the CPU reference kernels: splits a range
// (usually z-slabs or lines) into one contiguous chunk per worker thread.
// Chunking depends only on the range and the thread count, so reductions that
// sum per-chunk partials in chunk order are deterministic for a given count.
#ifndef TESSERA_KERNELS_REGISTRATION_PARALLEL_H_
#define TESSERA_KERNELS_REGISTRATION_PARALLEL_H_

#include <cstdint>
#include <functional>

namespace tessera {
namespace registration {

// Worker threads for CPU kernels: TESSERA_CPU_THREADS if set (>= 1), else
// std::thread::hardware_concurrency().
int CpuThreads();

// Number of chunks ParallelFor will use for a range of `n` items.
int ParallelChunks(int64_t n);

// Calls fn(begin, end, chunk) for each of ParallelChunks(n) contiguous chunks
// of [0, n), on separate threads (the calling thread takes chunk 0), and
// returns when all are done. Small ranges run inline.
void ParallelFor(int64_t n, const std::function<void(int64_t begin, int64_t end, int chunk)>& fn);

}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_PARALLEL_H_
