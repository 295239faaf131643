#include "kernels/registration/workspace.h"

#include "common/memory_kind_for.h"
#include "common/status.h"

namespace tessera {
namespace registration {

absl::StatusOr<void*> Workspace::Reserve(const Stream& stream, size_t bytes) {
  const MemoryKind kind = MemoryKindFor(stream);
  const size_t want = ScratchCarver::Align(bytes == 0 ? 1 : bytes);
  if (buffer_ == nullptr || buffer_->size() < want || buffer_->kind() != kind ||
      buffer_->ordinal() != stream.ordinal()) {
    if (buffer_ != nullptr) {
      // The old buffer may still be read by queued work on this stream.
      TESSERA_RETURN_IF_ERROR(stream.Synchronize());
      buffer_.reset();
    }
    TESSERA_ASSIGN_OR_RETURN(buffer_, Buffer::Allocate(kind, want, stream.ordinal()));
  }
  return buffer_->data();
}

absl::StatusOr<void*> ReserveScratch(const Stream& stream, size_t bytes, Workspace* workspace, Workspace& local) {
  return (workspace != nullptr ? workspace : &local)->Reserve(stream, bytes);
}

}  // namespace registration
}  // namespace tessera
