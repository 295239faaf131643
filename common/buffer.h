// Owned memory on the host, in pinned (page-locked) host memory, or on a GPU,
// with every device allocation accounted so jobs and benchmarks can report
// their peak device memory: process-wide (GetDeviceMemoryStats) and per job
// (DeviceMemoryTracker).
#ifndef TESSERA_COMMON_BUFFER_H_
#define TESSERA_COMMON_BUFFER_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/device.h"

namespace tessera {

enum class MemoryKind { kHost, kPinned, kDevice };

class DeviceMemoryTracker;

class Buffer {
 public:
  // Pinned and device memory need CUDA; without it they are FAILED_PRECONDITION.
  // Zero bytes is allowed and yields a null data pointer. Device memory is
  // charged to the calling thread's DeviceMemoryTracker (if any) until freed.
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
  std::shared_ptr<DeviceMemoryTracker> tracker_;  // charged with size_ (device memory only)
};

// Copies `bytes` between any two kinds of memory. With a CUDA stream the copy
// is asynchronous on it (pinned host memory makes that truly asynchronous).
absl::Status CopyBytes(void* dst, MemoryKind dst_kind, const void* src, MemoryKind src_kind, size_t bytes,
                       const Stream& stream);

// A new device buffer on `stream`'s GPU holding a copy of `v` (at least one
// element's bytes, so never null), copied on `stream` by CopyBytes.
template <typename T>
absl::StatusOr<std::shared_ptr<Buffer>> UploadVector(const std::vector<T>& v, const Stream& stream) {
  absl::StatusOr<std::shared_ptr<Buffer>> buffer =
      Buffer::Allocate(MemoryKind::kDevice, std::max<size_t>(1, v.size()) * sizeof(T), stream.ordinal());
  if (!buffer.ok() || v.empty()) return buffer;
  const absl::Status copied =
      CopyBytes((*buffer)->data(), MemoryKind::kDevice, v.data(), MemoryKind::kHost, v.size() * sizeof(T), stream);
  if (!copied.ok()) return copied;
  return buffer;
}

// Process-wide device-memory accounting, fed by every device Buffer. Kernels
// allocate scratch through Buffer too, so the figures include temporaries.
// The peak is the high-water mark since the process started; for the peak of
// one job or one measurement use a DeviceMemoryTracker.
struct DeviceMemoryStats {
  size_t current_bytes = 0;
  size_t peak_bytes = 0;
};
DeviceMemoryStats GetDeviceMemoryStats(int ordinal = 0);
// Starts a new process-wide peak window: peak := current. It disturbs every
// other measurement in the process, so only single-purpose benchmark
// binaries may use it; jobs and tests use a DeviceMemoryTracker.
void ResetDevicePeak(int ordinal = 0);

// The device memory of one job (or one measurement): every device Buffer
// allocated on a thread while a ScopedDeviceMemoryCharge for this tracker is
// open there counts here until the Buffer is freed, on whichever thread. So
// jobs running at once each see their own current and peak bytes. A tracker
// made with a parent charges the parent too (a registration inside a job).
// Sums all GPUs. Thread-safe.
//
//   auto tracker = std::make_shared<DeviceMemoryTracker>();
//   {
//     ScopedDeviceMemoryCharge charge(tracker);
//     ... allocate, run kernels ...
//   }
//   report(tracker->peak_bytes());
class DeviceMemoryTracker {
 public:
  DeviceMemoryTracker() = default;
  explicit DeviceMemoryTracker(std::shared_ptr<DeviceMemoryTracker> parent) : parent_(std::move(parent)) {}
  DeviceMemoryTracker(const DeviceMemoryTracker&) = delete;
  DeviceMemoryTracker& operator=(const DeviceMemoryTracker&) = delete;

  // Buffer calls these; tests and callers that manage memory outside Buffer may too.
  void Charge(size_t bytes);
  void Release(size_t bytes);  // of bytes charged before

  size_t current_bytes() const { return current_.load(); }
  size_t peak_bytes() const { return peak_.load(); }  // since construction

 private:
  const std::shared_ptr<DeviceMemoryTracker> parent_;
  std::atomic<size_t> current_{0};
  std::atomic<size_t> peak_{0};
};

// While alive, device Buffers allocated on the constructing thread are
// charged to `tracker` (null: to none). Scopes nest; the destructor restores
// the enclosing one. Must be destroyed on the thread that made it.
class ScopedDeviceMemoryCharge {
 public:
  explicit ScopedDeviceMemoryCharge(std::shared_ptr<DeviceMemoryTracker> tracker);
  ~ScopedDeviceMemoryCharge();
  ScopedDeviceMemoryCharge(const ScopedDeviceMemoryCharge&) = delete;
  ScopedDeviceMemoryCharge& operator=(const ScopedDeviceMemoryCharge&) = delete;

 private:
  std::shared_ptr<DeviceMemoryTracker> previous_;
};

// The tracker this thread's device allocations are charged to now, or null.
std::shared_ptr<DeviceMemoryTracker> CurrentDeviceMemoryTracker();

}  // namespace tessera

#endif  // TESSERA_COMMON_BUFFER_H_
