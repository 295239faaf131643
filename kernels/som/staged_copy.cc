#include "kernels/som/staged_copy.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "common/buffer.h"
#include "common/memory_kind_for.h"
#include "common/status.h"
#include "kernels/som/parallel.h"

#if TESSERA_WITH_CUDA
#include <cuda_runtime.h>

#include "common/cuda_check.h"
#endif

namespace tessera {
namespace som {
namespace {

// memcpy on all CPU threads (one thread copies ~5-10 GB/s; the DMA ~25 GB/s).
void ParallelCopy(char* dst, const char* src, size_t bytes) {
  ParallelFor(
      static_cast<int64_t>(bytes),
      [&](int64_t b, int64_t e, int) { std::memcpy(dst + b, src + b, static_cast<size_t>(e - b)); },
      int64_t{4} << 20);
}

bool Direct(size_t bytes, const Stream& stream, const StagingOptions& o) {
  return stream.backend() != Backend::kCuda || bytes < o.direct_below || o.chunk_bytes == 0;
}

#if TESSERA_WITH_CUDA
// Two pinned buffers and an event per buffer (its last DMA), freed on scope exit.
class Staging {
 public:
  absl::Status Init(size_t chunk, const Stream& stream) {
    TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
    for (int b = 0; b < 2; ++b) {
      TESSERA_ASSIGN_OR_RETURN(buffers_[b], Buffer::Allocate(MemoryKind::kPinned, chunk, stream.ordinal()));
      TESSERA_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&events_[b], cudaEventDisableTiming));
    }
    return absl::OkStatus();
  }
  ~Staging() {
    for (cudaEvent_t e : events_) {
      if (e != nullptr) cudaEventDestroy(e);
    }
  }
  char* buffer(int b) const { return static_cast<char*>(buffers_[b]->data()); }
  cudaEvent_t event(int b) const { return events_[b]; }

 private:
  std::shared_ptr<Buffer> buffers_[2];
  cudaEvent_t events_[2] = {nullptr, nullptr};
};

// The double-buffered skeleton of both directions (`kind`: host to device or
// back): chunk i of `bytes` goes through staging buffer i % 2, moved by the
// DMA on the stream (recorded in the buffer's event) while all CPU threads
// copy another chunk between a buffer and the host array. To the device the
// host fills a buffer (once its DMA of two chunks ago is done) before its
// DMA; to the host it drains chunk i - 1 while chunk i's DMA runs. Returns
// once everything has arrived.
absl::Status DoubleBuffered(char* dst, const char* src, size_t bytes, cudaMemcpyKind kind, const Stream& stream,
                            const StagingOptions& o) {
  const bool to_device = kind == cudaMemcpyHostToDevice;
  const size_t chunk = std::min(o.chunk_bytes, bytes);
  const size_t chunks = (bytes + chunk - 1) / chunk;
  Staging staging;
  TESSERA_RETURN_IF_ERROR(staging.Init(chunk, stream));
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  auto len = [&](size_t i) { return std::min(chunk, bytes - i * chunk); };
  for (size_t i = 0; i <= chunks; ++i) {
    if (i < chunks) {
      const int b = static_cast<int>(i % 2);
      char* buffer = staging.buffer(b);
      const size_t off = i * chunk;
      if (to_device) {
        if (i >= 2) TESSERA_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(staging.event(b)));
        ParallelCopy(buffer, src + off, len(i));
        TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst + off, buffer, len(i), kind, s));
      } else {
        TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(buffer, src + off, len(i), kind, s));
      }
      TESSERA_CUDA_RETURN_IF_ERROR(cudaEventRecord(staging.event(b), s));
    }
    if (!to_device && i >= 1) {
      const int b = static_cast<int>((i - 1) % 2);
      TESSERA_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(staging.event(b)));
      ParallelCopy(dst + (i - 1) * chunk, staging.buffer(b), len(i - 1));
    }
  }
  TESSERA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
  return absl::OkStatus();
}
#endif

}  // namespace

absl::Status StagedCopyToDevice(void* device_dst, const void* host_src, size_t bytes, const Stream& stream,
                                const StagingOptions& o) {
  if (Direct(bytes, stream, o)) {
    return CopyBytes(device_dst, MemoryKindFor(stream), host_src, MemoryKind::kHost, bytes, stream);
  }
#if TESSERA_WITH_CUDA
  return DoubleBuffered(static_cast<char*>(device_dst), static_cast<const char*>(host_src), bytes,
                        cudaMemcpyHostToDevice, stream, o);
#else
  return absl::FailedPreconditionError("StagedCopyToDevice: built without CUDA");
#endif
}

absl::Status StagedCopyToHost(void* host_dst, const void* device_src, size_t bytes, const Stream& stream,
                              const StagingOptions& o) {
  if (Direct(bytes, stream, o)) {
    return CopyBytes(host_dst, MemoryKind::kHost, device_src, MemoryKindFor(stream), bytes, stream);
  }
#if TESSERA_WITH_CUDA
  return DoubleBuffered(static_cast<char*>(host_dst), static_cast<const char*>(device_src), bytes,
                        cudaMemcpyDeviceToHost, stream, o);
#else
  return absl::FailedPreconditionError("StagedCopyToHost: built without CUDA");
#endif
}

}  // namespace som
}  // namespace tessera
