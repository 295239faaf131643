// Compute backends, GPU discovery and streams.
//
// Everything here works on a machine without a GPU, driver or CUDA toolkit:
// discovery then reports the CPU backend only, with one log line saying why,
// and a Stream on the CPU backend runs work inline.
#ifndef TESSERA_COMMON_DEVICE_H_
#define TESSERA_COMMON_DEVICE_H_

#include <cstddef>
#include <memory>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"

namespace tessera {

enum class Backend { kCpu, kCuda };

absl::string_view BackendName(Backend backend);

struct GpuInfo {
  int ordinal = 0;
  std::string name;
  size_t total_memory_bytes = 0;
  int multiprocessors = 0;
  int compute_major = 0;
  int compute_minor = 0;
};

// What this process can compute on. Probed once, on first use.
class DeviceRegistry {
 public:
  static const DeviceRegistry& Get();

  bool cuda_available() const { return !gpus_.empty(); }
  const std::vector<GpuInfo>& gpus() const { return gpus_; }
  // Why CUDA is unavailable ("built without CUDA", "no CUDA driver", ...);
  // empty when it is available.
  const std::string& cuda_unavailable_reason() const { return reason_; }
  // "cuda (NVIDIA H200, 139 GiB)" or "cpu (built without CUDA)".
  std::string Describe() const;

 private:
  DeviceRegistry();
  std::vector<GpuInfo> gpus_;
  std::string reason_;
};

// Parses "auto", "cpu" or "cuda". "auto" picks CUDA when a GPU is present.
// Asking for "cuda" without one is FAILED_PRECONDITION with the reason.
absl::StatusOr<Backend> ResolveBackend(absl::string_view requested);

// A device name a request or a server option may carry, checked without
// looking at this machine (the work may run on another worker): OK for
// "auto", "cpu" or "cuda", else INVALID_ARGUMENT "<field> 'x' is not one of
// auto, cpu, cuda".
absl::Status CheckDeviceName(absl::string_view name, absl::string_view field);

// Memory of one GPU as the driver reports it (cudaMemGetInfo): all processes'
// allocations count, not only Tessera's (for those see GetDeviceMemoryStats).
struct GpuMemoryInfo {
  int ordinal = 0;
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  size_t used_bytes() const { return total_bytes - free_bytes; }
};

// FAILED_PRECONDITION without CUDA or for an ordinal with no GPU. Keeps the
// calling thread's current device. Creates the device's primary context on
// first use, as any CUDA call on it would.
absl::StatusOr<GpuMemoryInfo> QueryGpuMemory(int ordinal);

// An ordered queue of work on one device. On the CPU backend work is done
// inline by the caller and Synchronize() is a no-op.
class Stream {
 public:
  // CPU stream: never fails.
  static Stream Cpu();
  // A new non-blocking CUDA stream on GPU `ordinal`.
  static absl::StatusOr<Stream> Create(Backend backend, int ordinal = 0);

  Stream(Stream&&) noexcept;
  Stream& operator=(Stream&&) noexcept;
  ~Stream();

  Backend backend() const { return backend_; }
  int ordinal() const { return ordinal_; }
  // The cudaStream_t, as void* so this header needs no CUDA include.
  void* native() const { return native_; }
  absl::Status Synchronize() const;

 private:
  Stream(Backend backend, int ordinal, void* native) : backend_(backend), ordinal_(ordinal), native_(native) {}
  Backend backend_;
  int ordinal_;
  void* native_;
};

}  // namespace tessera

#endif  // TESSERA_COMMON_DEVICE_H_
