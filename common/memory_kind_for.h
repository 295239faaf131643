// Where arrays handed to kernels on a stream must live: device memory for a
// CUDA stream, plain host memory for a CPU stream. One definition instead of a
// copy in every kernel that allocates its own scratch or outputs.
#ifndef TESSERA_COMMON_MEMORY_KIND_FOR_H_
#define TESSERA_COMMON_MEMORY_KIND_FOR_H_

#include "common/buffer.h"
#include "common/device.h"

namespace tessera {

// The memory kind a kernel on `stream` reads and writes.
inline MemoryKind MemoryKindFor(const Stream& stream) {
  return stream.backend() == Backend::kCuda ? MemoryKind::kDevice : MemoryKind::kHost;
}

}  // namespace tessera

#endif  // TESSERA_COMMON_MEMORY_KIND_FOR_H_
