#include "kernels/som/staged_copy.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "common/buffer.h"
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

// The stream's backend memory (host memory for the CPU backend).
MemoryKind BackendKind(const Stream& stream) {
  return stream.backend() == Backend::kCuda ? MemoryKind::kDevice : MemoryKind::kHost;
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
#endif

}  // namespace

absl::Status StagedCopyToDevice(void* device_dst, const void* host_src, size_t bytes, const Stream& stream,
                                const StagingOptions& o) {
  if (Direct(bytes, stream, o)) {
    return CopyBytes(device_dst, BackendKind(stream), host_src, MemoryKind::kHost, bytes, stream);
  }
#if TESSERA_WITH_CUDA
  const size_t chunk = std::min(o.chunk_bytes, bytes);
  Staging staging;
  TESSERA_RETURN_IF_ERROR(staging.Init(chunk, stream));
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  char* dst = static_cast<char*>(device_dst);
  const char* src = static_cast<const char*>(host_src);
  int i = 0;
  for (size_t off = 0; off < bytes; off += chunk, ++i) {
    const int b = i % 2;
    const size_t len = std::min(chunk, bytes - off);
    // The buffer's previous DMA (two chunks ago) must be done before refilling it.
    if (i >= 2) TESSERA_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(staging.event(b)));
    ParallelCopy(staging.buffer(b), src + off, len);
    TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst + off, staging.buffer(b), len, cudaMemcpyHostToDevice, s));
    TESSERA_CUDA_RETURN_IF_ERROR(cudaEventRecord(staging.event(b), s));
  }
  TESSERA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
  return absl::OkStatus();
#else
  return absl::FailedPreconditionError("StagedCopyToDevice: built without CUDA");
#endif
}

absl::Status StagedCopyToHost(void* host_dst, const void* device_src, size_t bytes, const Stream& stream,
                              const StagingOptions& o) {
  if (Direct(bytes, stream, o)) {
    return CopyBytes(host_dst, MemoryKind::kHost, device_src, BackendKind(stream), bytes, stream);
  }
#if TESSERA_WITH_CUDA
  const size_t chunk = std::min(o.chunk_bytes, bytes);
  Staging staging;
  TESSERA_RETURN_IF_ERROR(staging.Init(chunk, stream));
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  char* dst = static_cast<char*>(host_dst);
  const char* src = static_cast<const char*>(device_src);
  // Chunk i goes by DMA into buffer i % 2 while the host copies chunk i - 1 out of the other.
  size_t previous_off = 0, previous_len = 0;
  int i = 0;
  for (size_t off = 0; off < bytes; off += chunk, ++i) {
    const int b = i % 2;
    const size_t len = std::min(chunk, bytes - off);
    TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(staging.buffer(b), src + off, len, cudaMemcpyDeviceToHost, s));
    TESSERA_CUDA_RETURN_IF_ERROR(cudaEventRecord(staging.event(b), s));
    if (i >= 1) {
      TESSERA_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(staging.event(1 - b)));
      ParallelCopy(dst + previous_off, staging.buffer(1 - b), previous_len);
    }
    previous_off = off;
    previous_len = len;
  }
  const int last = (i - 1) % 2;
  TESSERA_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(staging.event(last)));
  ParallelCopy(dst + previous_off, staging.buffer(last), previous_len);
  return absl::OkStatus();
#else
  return absl::FailedPreconditionError("StagedCopyToHost: built without CUDA");
#endif
}

}  // namespace som
}  // namespace tessera
