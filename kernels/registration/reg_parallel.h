// Chunked fork-join with a minimum chunk size for the registration kernels'
// CPU backends (MI, smoothing, Adam, Jacobian, label metrics): thin templates
// over common/parallel.h.
#ifndef TESSERA_KERNELS_REGISTRATION_REG_PARALLEL_H_
#define TESSERA_KERNELS_REGISTRATION_REG_PARALLEL_H_

#include <cstdint>
#include <utility>

#include "common/parallel.h"

namespace tessera {
namespace reg_internal {

using ::tessera::CpuThreads;

// min(CpuThreads(), ceil(n / min_per_chunk)); 0 for an empty range. Size
// per-chunk accumulators with it before calling ParallelChunks.
inline int NumChunks(int64_t n, int64_t min_per_chunk = 1) { return ::tessera::ParallelChunks(n, min_per_chunk); }

// Calls fn(chunk_index, begin, end) for NumChunks(n, min_per_chunk) contiguous
// ranges covering [0, n), each on its own thread; returns the chunk count.
template <typename Fn>
int ParallelChunks(int64_t n, int64_t min_per_chunk, Fn&& fn) {
  return ::tessera::ParallelFor(
      n, [&fn](int64_t b, int64_t e, int c) { fn(c, b, e); }, min_per_chunk);
}

// Convenience: fn(begin, end) over [0, n).
template <typename Fn>
void ParallelFor(int64_t n, int64_t min_per_chunk, Fn&& fn) {
  ::tessera::ParallelFor(
      n, [&fn](int64_t b, int64_t e, int) { fn(b, e); }, min_per_chunk);
}

}  // namespace reg_internal
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_REG_PARALLEL_H_
