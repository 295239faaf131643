// Owned memory on the host, in pinned (page-locked) host memory, or on a GPU,
// with every device allocation accounted so jobs and benchmarks can report
// their peak device memory.
#ifndef TESSERA_COMMON_BUFFER_H_
#define TESSERA_COMMON_BUFFER_H_

#include <cstddef>
#include <memory>

#include "absl/status/statusor.h"
#include "common/device.h"

namespace tessera {

enum class MemoryKind { kHost, kPinned, kDevice };

class Buffer {
 public:
  // Pinned and device memory need CUDA; without it they are FAILED_PRECONDITION.
  // Zero bytes is allowed and yields a null data pointer.
  static absl::StatusOr<std::shared_ptr<Buffer>> Allocate(MemoryKind kind, size_t bytes, int ordinal = 0);

  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  void* data() const { return data_; }
  size_t size() const { return size_; }
  MemoryKind kind() const { return kind_; }
  int ordinal() const { return ordinal_; }

 private:
  Buffer(MemoryKind kind, void* data, size_t size, int ordinal)
      : kind_(kind), data_(data), size_(size), ordinal_(ordinal) {}
  MemoryKind kind_;
  void* data_;
  size_t size_;
  int ordinal_;
};

// Copies `bytes` between any two kinds of memory. With a CUDA stream the copy
// is asynchronous on it (pinned host memory makes that truly asynchronous).
absl::Status CopyBytes(void* dst, MemoryKind dst_kind, const void* src, MemoryKind src_kind, size_t bytes,
                       const Stream& stream);

// Process-wide device-memory accounting, fed by every device Buffer. Kernels
// allocate scratch through Buffer too, so peaks include their temporaries.
struct DeviceMemoryStats {
  size_t current_bytes = 0;
  size_t peak_bytes = 0;
};
DeviceMemoryStats GetDeviceMemoryStats(int ordinal = 0);
// Starts a new peak window: peak := current.
void ResetDevicePeak(int ordinal = 0);

}  // namespace tessera

#endif  // TESSERA_COMMON_BUFFER_H_
