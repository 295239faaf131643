#include "kernels/som/workspace.h"

#include <algorithm>

#include "common/memory_kind_for.h"
#include "common/status.h"

namespace tessera {
namespace som {

absl::StatusOr<void*> SomWorkspace::Slot(int slot, size_t bytes, const Stream& stream) {
  if (slot < 0) return absl::InvalidArgumentError("workspace: negative slot");
  bytes = std::max<size_t>(bytes, 1);
  if (slots_.size() <= static_cast<size_t>(slot)) slots_.resize(slot + 1);
  const MemoryKind kind = MemoryKindFor(stream);
  std::shared_ptr<Buffer>& buffer = slots_[slot];
  if (buffer == nullptr || buffer->size() < bytes || buffer->kind() != kind || buffer->ordinal() != stream.ordinal()) {
    if (buffer != nullptr && stream.backend() == Backend::kCuda) {
      // Work queued on the stream may still read the old buffer.
      TESSERA_RETURN_IF_ERROR(stream.Synchronize());
    }
    buffer.reset();
    TESSERA_ASSIGN_OR_RETURN(buffer, Buffer::Allocate(kind, bytes, stream.ordinal()));
  }
  return buffer->data();
}

size_t SomWorkspace::capacity() const {
  size_t total = 0;
  for (const auto& b : slots_) total += b ? b->size() : 0;
  return total;
}

}  // namespace som
}  // namespace tessera
