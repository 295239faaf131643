// Backend dispatch for ComputeArrayStats.
#include "absl/strings/str_cat.h"
#include "common/array_stats.h"
#include "common/status.h"

namespace tessera {

#if TESSERA_WITH_CUDA
// array_stats.cu
absl::StatusOr<ArrayStats> ComputeArrayStatsCuda(const NDArray& device_array, const Stream& stream);
#endif

absl::StatusOr<ArrayStats> ComputeArrayStats(const NDArray& array, const Stream& stream) {
  if (array.empty() && array.num_elements() != 0) return absl::InvalidArgumentError("array has no storage");
  if (SizeOf(array.dtype()) == 0) return absl::InvalidArgumentError("array has an invalid dtype");
  if (stream.backend() == Backend::kCpu) {
    if (array.memory_kind() == MemoryKind::kDevice) {
      return absl::InvalidArgumentError("a device array needs a CUDA stream for ComputeArrayStats");
    }
    return ComputeArrayStatsCpu(array);
  }
#if TESSERA_WITH_CUDA
  if (array.num_elements() == 0) return ArrayStats{};
  if (array.memory_kind() == MemoryKind::kDevice) return ComputeArrayStatsCuda(array, stream);
  TESSERA_ASSIGN_OR_RETURN(NDArray on_device, array.CopyTo(MemoryKind::kDevice, stream, stream.ordinal()));
  return ComputeArrayStatsCuda(on_device, stream);
#else
  return absl::FailedPreconditionError("ComputeArrayStats: CUDA stream in a build without CUDA");
#endif
}

}  // namespace tessera
