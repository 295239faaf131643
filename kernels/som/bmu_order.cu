// Documents sorted by their previous BMU for the CUDA warp kernels
// (BmuTuning::order_by_previous_bmu): documents mapped to the same or adjacent
// nodes share features, so when they run side by side on an SM their feature
// columns are reused from L1/L2 instead of being fetched again. A stable LSD
// radix sort (cub) of (clamped BMU, document id); only the visiting order
// changes, never a document's own sum.
#include <cuda_runtime.h>

#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/som/bmu_cuda_internal.h"

namespace tessera {
namespace som {
namespace cuda {
namespace internal {
namespace {

// keys[k] = previous_bmu[k] clamped to [0, nodes] (invalid -> nodes: last);
// ids[k] = k.
__global__ void OrderKeysKernel(const int32_t* __restrict__ previous_bmu, int64_t n, int64_t nodes,
                                uint32_t* __restrict__ keys, int32_t* __restrict__ ids) {
  const int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (k >= n) return;
  const int32_t b = previous_bmu[k];
  keys[k] = b >= 0 && b < nodes ? static_cast<uint32_t>(b) : static_cast<uint32_t>(nodes);
  ids[k] = static_cast<int32_t>(k);
}

int BitsFor(int64_t max_key) {
  int bits = 1;
  while (bits < 32 && (int64_t{1} << bits) <= max_key) ++bits;
  return bits;
}

}  // namespace

absl::StatusOr<const int32_t*> OrderByPreviousBmu(const Stream& stream, const int32_t* previous_bmu, int64_t n,
                                                  int64_t nodes, SomWorkspace& ws) {
  if (n >= (int64_t{1} << 31)) {
    return absl::InvalidArgumentError(
        absl::StrCat("FindBmus: order_by_previous_bmu takes under 2^31 documents, got ", n));
  }
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  const size_t key_bytes = sizeof(uint32_t) * std::max<int64_t>(1, n);
  TESSERA_ASSIGN_OR_RETURN(void* keys, ws.Slot(kOrderKeysSlot, key_bytes, stream));
  TESSERA_ASSIGN_OR_RETURN(void* keys_sorted, ws.Slot(kOrderKeysSortedSlot, key_bytes, stream));
  TESSERA_ASSIGN_OR_RETURN(void* ids, ws.Slot(kOrderIdsSlot, key_bytes, stream));
  TESSERA_ASSIGN_OR_RETURN(void* order, ws.Slot(kOrderSlot, key_bytes, stream));
  if (n == 0) return static_cast<const int32_t*>(order);
  OrderKeysKernel<<<static_cast<unsigned>((n + kBmuThreads - 1) / kBmuThreads), kBmuThreads, 0, s>>>(
      previous_bmu, n, nodes, static_cast<uint32_t*>(keys), static_cast<int32_t*>(ids));
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("OrderKeysKernel");
  const int end_bit = BitsFor(nodes);
  const int count = static_cast<int>(n);
  size_t temp_bytes = 0;
  TESSERA_CUDA_RETURN_IF_ERROR(cub::DeviceRadixSort::SortPairs(
      nullptr, temp_bytes, static_cast<const uint32_t*>(keys), static_cast<uint32_t*>(keys_sorted),
      static_cast<const int32_t*>(ids), static_cast<int32_t*>(order), count, 0, end_bit, s));
  TESSERA_ASSIGN_OR_RETURN(void* temp, ws.Slot(kOrderTempSlot, std::max<size_t>(temp_bytes, 16), stream));
  TESSERA_CUDA_RETURN_IF_ERROR(cub::DeviceRadixSort::SortPairs(
      temp, temp_bytes, static_cast<const uint32_t*>(keys), static_cast<uint32_t*>(keys_sorted),
      static_cast<const int32_t*>(ids), static_cast<int32_t*>(order), count, 0, end_bit, s));
  return static_cast<const int32_t*>(order);
}

}  // namespace internal
}  // namespace cuda
}  // namespace som
}  // namespace tessera
