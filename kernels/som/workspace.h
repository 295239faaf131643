// Reusable scratch memory for the SOM kernels: numbered slots, each a tracked
// Buffer in the stream's backend memory that grows (never shrinks) on demand.
// Passing a SomWorkspace that lives across epochs avoids re-allocating (and on
// CUDA the implicit synchronisation of cudaFree) every call; passing nullptr
// makes a call allocate and free its own. Either way the memory shows in
// GetDeviceMemoryStats peaks. A workspace must not be shared by two streams
// at once. It also keeps library handles (cuSPARSE) for reuse.
#ifndef TESSERA_KERNELS_SOM_WORKSPACE_H_
#define TESSERA_KERNELS_SOM_WORKSPACE_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/buffer.h"
#include "common/device.h"

namespace tessera {
namespace som {

class SomWorkspace {
 public:
  SomWorkspace() = default;
  SomWorkspace(const SomWorkspace&) = delete;
  SomWorkspace& operator=(const SomWorkspace&) = delete;

  // At least `bytes` (>= 1) of backend memory in slot `slot`. The pointer stays
  // valid until the slot has to grow or the workspace is destroyed.
  absl::StatusOr<void*> Slot(int slot, size_t bytes, const Stream& stream);
  size_t capacity() const;  // bytes held over all slots
  void Release() { slots_.clear(); }

  // Opaque library handle kept across calls (owned through the deleter).
  std::shared_ptr<void>& cusparse_handle() { return cusparse_; }

 private:
  std::vector<std::shared_ptr<Buffer>> slots_;
  std::shared_ptr<void> cusparse_;
};

}  // namespace som
}  // namespace tessera

#endif  // TESSERA_KERNELS_SOM_WORKSPACE_H_
