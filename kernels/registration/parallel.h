// The registration kernels' fork-join helpers: common/parallel.h, under the
// names the CPU references use.
#ifndef TESSERA_KERNELS_REGISTRATION_PARALLEL_H_
#define TESSERA_KERNELS_REGISTRATION_PARALLEL_H_

#include <cstdint>

#include "common/parallel.h"

namespace tessera {
namespace registration {

using ::tessera::CpuThreads;
using ::tessera::ParallelFor;

// Chunks ParallelFor uses for n items (at least 1, so callers can size
// per-chunk partials for an empty range too).
inline int ParallelChunks(int64_t n) { return n <= 1 ? 1 : ::tessera::ParallelChunks(n); }

}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_PARALLEL_H_
