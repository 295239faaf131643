#include "common/buffer.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"

#if TESSERA_WITH_CUDA
#include <cuda_runtime_api.h>

#include "common/cuda_check.h"
#endif

namespace tessera {
namespace {

constexpr int kMaxTrackedDevices = 16;

struct Counters {
  std::atomic<size_t> current{0};
  std::atomic<size_t> peak{0};
};

std::array<Counters, kMaxTrackedDevices>& AllCounters() {
  static auto* counters = new std::array<Counters, kMaxTrackedDevices>();
  return *counters;
}

Counters* CountersFor(int ordinal) {
  if (ordinal < 0 || ordinal >= kMaxTrackedDevices) return nullptr;
  return &AllCounters()[ordinal];
}

void TrackAlloc(int ordinal, size_t bytes) {
  Counters* c = CountersFor(ordinal);
  if (c == nullptr) return;
  size_t now = c->current.fetch_add(bytes) + bytes;
  size_t peak = c->peak.load();
  while (now > peak && !c->peak.compare_exchange_weak(peak, now)) {
  }
}

void TrackFree(int ordinal, size_t bytes) {
  if (Counters* c = CountersFor(ordinal)) c->current.fetch_sub(bytes);
}

constexpr size_t kHostAlignment = 64;  // cache line; also enough for AVX-512 loads

// The innermost open ScopedDeviceMemoryCharge of this thread.
std::shared_ptr<DeviceMemoryTracker>& ThreadTracker() {
  thread_local std::shared_ptr<DeviceMemoryTracker> tracker;
  return tracker;
}

}  // namespace

void DeviceMemoryTracker::Charge(size_t bytes) {
  const size_t now = current_.fetch_add(bytes) + bytes;
  size_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
  if (parent_ != nullptr) parent_->Charge(bytes);
}

void DeviceMemoryTracker::Release(size_t bytes) {
  current_.fetch_sub(bytes);
  if (parent_ != nullptr) parent_->Release(bytes);
}

ScopedDeviceMemoryCharge::ScopedDeviceMemoryCharge(std::shared_ptr<DeviceMemoryTracker> tracker)
    : previous_(std::exchange(ThreadTracker(), std::move(tracker))) {}

ScopedDeviceMemoryCharge::~ScopedDeviceMemoryCharge() { ThreadTracker() = std::move(previous_); }

std::shared_ptr<DeviceMemoryTracker> CurrentDeviceMemoryTracker() { return ThreadTracker(); }

// Large host arrays are touched page by page on all cores right away: the
// kernel's first-touch faults otherwise land on whoever writes first, often a
// single thread (a cudaMemcpy into pageable memory, a file reader), which
// made the 60 GB of a 1550^3 registration's outputs cost tens of seconds.
namespace {
void PrefaultLargeHostAllocation(void* data, size_t bytes) {
  constexpr size_t kLarge = size_t{64} << 20;
  constexpr int64_t kPage = 4096;
  if (bytes < kLarge) return;
  char* p = static_cast<char*>(data);
  const int64_t pages = static_cast<int64_t>(bytes / kPage);
  ParallelFor(
      pages, [p](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) p[i * kPage] = 0;
      },
      int64_t{1} << 14);  // >= 64 MiB per thread
}
}  // namespace

absl::StatusOr<std::shared_ptr<Buffer>> Buffer::Allocate(MemoryKind kind, size_t bytes, int ordinal) {
  void* data = nullptr;
  if (bytes == 0) return std::shared_ptr<Buffer>(new Buffer(kind, nullptr, 0, ordinal));
  switch (kind) {
    case MemoryKind::kHost: {
      const size_t rounded = (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
      data = std::aligned_alloc(kHostAlignment, rounded);
      if (data == nullptr) {
        return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " bytes of host memory"));
      }
      PrefaultLargeHostAllocation(data, rounded);
      break;
    }
    case MemoryKind::kPinned:
    case MemoryKind::kDevice: {
#if TESSERA_WITH_CUDA
      if (!DeviceRegistry::Get().cuda_available()) {
        return absl::FailedPreconditionError(DeviceRegistry::Get().cuda_unavailable_reason());
      }
      if (kind == MemoryKind::kPinned) {
        TESSERA_CUDA_RETURN_IF_ERROR(cudaMallocHost(&data, bytes));
      } else {
        TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal));
        cudaError_t err = cudaMalloc(&data, bytes);
        if (err != cudaSuccess) {
          cudaGetLastError();
          return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " bytes on GPU ", ordinal,
                                                           ": ", cudaGetErrorString(err)));
        }
        TrackAlloc(ordinal, bytes);
        std::shared_ptr<DeviceMemoryTracker> tracker = ThreadTracker();
        if (tracker != nullptr) tracker->Charge(bytes);
        auto buffer = std::shared_ptr<Buffer>(new Buffer(kind, data, bytes, ordinal));
        buffer->tracker_ = std::move(tracker);
        return buffer;
      }
      break;
#else
      return absl::FailedPreconditionError(DeviceRegistry::Get().cuda_unavailable_reason());
#endif
    }
  }
  return std::shared_ptr<Buffer>(new Buffer(kind, data, bytes, ordinal));
}

Buffer::~Buffer() {
  if (data_ == nullptr) return;
  switch (kind_) {
    case MemoryKind::kHost:
      std::free(data_);
      break;
#if TESSERA_WITH_CUDA
    case MemoryKind::kPinned:
      cudaFreeHost(data_);
      break;
    case MemoryKind::kDevice:
      cudaSetDevice(ordinal_);
      cudaFree(data_);
      TrackFree(ordinal_, size_);
      if (tracker_ != nullptr) tracker_->Release(size_);
      break;
#endif
    default:
      break;
  }
}

absl::Status CopyBytes(void* dst, MemoryKind dst_kind, const void* src, MemoryKind src_kind, size_t bytes,
                       const Stream& stream) {
  if (bytes == 0) return absl::OkStatus();
  const bool host_only = dst_kind != MemoryKind::kDevice && src_kind != MemoryKind::kDevice;
  if (host_only) {
    std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
  // Pageable host memory: the caller may reuse it as soon as we return.
  if (dst_kind == MemoryKind::kHost || src_kind == MemoryKind::kHost) {
    TESSERA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
  }
  return absl::OkStatus();
#else
  (void)stream;
  return absl::FailedPreconditionError(DeviceRegistry::Get().cuda_unavailable_reason());
#endif
}

DeviceMemoryStats GetDeviceMemoryStats(int ordinal) {
  DeviceMemoryStats stats;
  if (Counters* c = CountersFor(ordinal)) {
    stats.current_bytes = c->current.load();
    stats.peak_bytes = c->peak.load();
  }
  return stats;
}

void ResetDevicePeak(int ordinal) {
  if (Counters* c = CountersFor(ordinal)) c->peak.store(c->current.load());
}

}  // namespace tessera
