// Fork-join helpers for the CPU backends of every kernel library: split a
// range [0, n) into one contiguous chunk per worker thread (z-slabs, voxel
// ranges, documents, labels). Chunking depends only on n, the grain and the
// thread count, so per-chunk partials summed in chunk order are deterministic
// for a given thread count. A loop nested inside a chunk of a loop that
// already occupies every thread runs its chunks on that thread, in order, with
// the same boundaries (so the same sums) rather than on new threads.
#ifndef TESSERA_COMMON_PARALLEL_H_
#define TESSERA_COMMON_PARALLEL_H_

#include <cstdint>
#include <functional>

namespace tessera {

// Worker threads: TESSERA_CPU_THREADS if set (>= 1), else
// std::thread::hardware_concurrency() (at least 1). Read once.
int CpuThreads();

// Chunks ParallelFor uses for n items with at least `min_per_chunk` items per
// chunk: min(CpuThreads(), ceil(n / min_per_chunk)), 0 when n <= 0.
int ParallelChunks(int64_t n, int64_t min_per_chunk = 1);

// Calls fn(begin, end, chunk) for each of ParallelChunks(n, min_per_chunk)
// contiguous chunks of [0, n) on separate threads (the calling thread takes
// chunk 0) and returns the number of chunks once all are done.
int ParallelFor(int64_t n, const std::function<void(int64_t begin, int64_t end, int chunk)>& fn,
                int64_t min_per_chunk = 1);

// For uneven work: hands out `grain`-sized pieces dynamically to
// min(CpuThreads(), pieces) workers; fn(begin, end, worker).
void ParallelForDynamic(int64_t n, int64_t grain,
                        const std::function<void(int64_t begin, int64_t end, int worker)>& fn);

}  // namespace tessera

#endif  // TESSERA_COMMON_PARALLEL_H_
