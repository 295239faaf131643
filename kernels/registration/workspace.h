// Reusable scratch memory for the registration kernels.
//
// Kernels that need temporaries (reduction partials, LNCC's three
// volume-sized coefficient maps) take an optional Workspace*. Passing one that
// lives across iterations avoids an allocation (and, on CUDA, the implicit
// device synchronisation of cudaFree) per call; passing nullptr makes the
// kernel allocate and free its own. Either way the memory is a tracked Buffer,
// so it shows in GetDeviceMemoryStats peaks.
//
// A Workspace must not be used by two streams at once: a call may reuse the
// memory an earlier call on the same stream still reads, which is safe only
// because work on one stream runs in order.
#ifndef TESSERA_KERNELS_REGISTRATION_WORKSPACE_H_
#define TESSERA_KERNELS_REGISTRATION_WORKSPACE_H_

#include <cstddef>
#include <memory>

#include "absl/status/statusor.h"
#include "common/buffer.h"
#include "common/device.h"

namespace tessera {
namespace registration {

class Workspace {
 public:
  Workspace() = default;
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  // At least `bytes` of memory for `stream`'s backend (device memory on its
  // GPU for CUDA, host memory for CPU), 256-byte aligned. Grows (never
  // shrinks) the held buffer; the pointer stays valid until the next Reserve
  // that has to grow, or until the Workspace is destroyed.
  absl::StatusOr<void*> Reserve(const Stream& stream, size_t bytes);

  size_t capacity() const { return buffer_ ? buffer_->size() : 0; }
  // Frees the held buffer.
  void Release() { buffer_.reset(); }

 private:
  std::shared_ptr<Buffer> buffer_;
};

// Carves consecutive 256-byte-aligned pieces out of one allocation.
class ScratchCarver {
 public:
  explicit ScratchCarver(void* base) : base_(static_cast<char*>(base)) {}
  template <typename T>
  T* Take(size_t count) {
    T* p = reinterpret_cast<T*>(base_ + offset_);
    offset_ += Align(count * sizeof(T));
    return p;
  }
  static size_t Align(size_t bytes) { return (bytes + 255) / 256 * 256; }

 private:
  char* base_;
  size_t offset_ = 0;
};

// Uses `workspace` if given, else `local` (which the caller keeps alive until
// the work is done) for `bytes` of scratch.
absl::StatusOr<void*> ReserveScratch(const Stream& stream, size_t bytes, Workspace* workspace, Workspace& local);

}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_WORKSPACE_H_
