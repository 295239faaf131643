// Documents sorted by their previous BMU for the CUDA warp kernels
// (BmuTuning::order_by_previous_bmu): documents mapped to the same or adjacent
// nodes share features, so when they run side by side on an SM their feature
// columns are reused from L1/L2 instead of being fetched again. A stable LSD
// radix sort (cub) of (clamped BMU, document id), or of ((clamped BMU,
// clamped document key), id) when BmuHints::document_key is given; only the
// visiting order changes, never a document's own sum.
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

// keys[k] = clamp(previous_bmu[k], nodes) * (range + 1) + clamp(secondary[k], range)
// (clamp(x, r): x outside [0, r) -> r; a null previous_bmu counts as 0);
// ids[k] = k.
__global__ void PairKeysKernel(const int32_t* __restrict__ previous_bmu, const int32_t* __restrict__ secondary,
                               int64_t range, int64_t n, int64_t nodes, uint64_t* __restrict__ keys,
                               int32_t* __restrict__ ids) {
  const int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (k >= n) return;
  uint64_t hi = 0;
  if (previous_bmu != nullptr) {
    const int32_t b = previous_bmu[k];
    hi = b >= 0 && b < nodes ? static_cast<uint64_t>(b) : static_cast<uint64_t>(nodes);
  }
  const int32_t c = secondary[k];
  const uint64_t lo = c >= 0 && c < range ? static_cast<uint64_t>(c) : static_cast<uint64_t>(range);
  keys[k] = hi * static_cast<uint64_t>(range + 1) + lo;
  ids[k] = static_cast<int32_t>(k);
}

// keys[d] = the rarest feature of document d (fewest documents; ties: the
// lowest index, the first met), cols for an empty document.
__global__ void RarestFeatureKernel(const int64_t* __restrict__ offsets, const int32_t* __restrict__ indices,
                                    const int64_t* __restrict__ csc_offsets, int64_t n, int64_t cols,
                                    int32_t* __restrict__ keys) {
  const int64_t d = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (d >= n) return;
  int32_t best = static_cast<int32_t>(cols);
  int64_t best_count = INT64_MAX;
  for (int64_t k = offsets[d]; k < offsets[d + 1]; ++k) {
    const int32_t v = indices[k];
    const int64_t count = csc_offsets[v + 1] - csc_offsets[v];
    if (count < best_count) {
      best_count = count;
      best = v;
    }
  }
  keys[d] = best;
}

int BitsFor(int64_t max_key) {
  int bits = 1;
  while (bits < 64 && (uint64_t{1} << bits) <= static_cast<uint64_t>(max_key)) ++bits;
  return bits;
}

// The stable radix sort of (keys, ids) on the key's low `end_bit` bits into
// `order`.
template <typename Key>
absl::Status SortIds(const Stream& stream, void* keys, void* keys_sorted, void* ids, void* order, int count,
                     int end_bit, SomWorkspace& ws) {
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  size_t temp_bytes = 0;
  TESSERA_CUDA_RETURN_IF_ERROR(cub::DeviceRadixSort::SortPairs(
      nullptr, temp_bytes, static_cast<const Key*>(keys), static_cast<Key*>(keys_sorted),
      static_cast<const int32_t*>(ids), static_cast<int32_t*>(order), count, 0, end_bit, s));
  TESSERA_ASSIGN_OR_RETURN(void* temp, ws.Slot(kOrderTempSlot, std::max<size_t>(temp_bytes, 16), stream));
  TESSERA_CUDA_RETURN_IF_ERROR(cub::DeviceRadixSort::SortPairs(
      temp, temp_bytes, static_cast<const Key*>(keys), static_cast<Key*>(keys_sorted),
      static_cast<const int32_t*>(ids), static_cast<int32_t*>(order), count, 0, end_bit, s));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<const int32_t*> OrderByPreviousBmu(const Stream& stream, const int32_t* previous_bmu,
                                                  const int32_t* secondary, int64_t secondary_range, int64_t n,
                                                  int64_t nodes, SomWorkspace& ws) {
  if (n >= (int64_t{1} << 31)) {
    return absl::InvalidArgumentError(
        absl::StrCat("FindBmus: order_by_previous_bmu takes under 2^31 documents, got ", n));
  }
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  const bool pair = secondary != nullptr;
  const size_t key_bytes = (pair ? sizeof(uint64_t) : sizeof(uint32_t)) * std::max<int64_t>(1, n);
  const size_t id_bytes = sizeof(int32_t) * std::max<int64_t>(1, n);
  TESSERA_ASSIGN_OR_RETURN(void* keys, ws.Slot(kOrderKeysSlot, key_bytes, stream));
  TESSERA_ASSIGN_OR_RETURN(void* keys_sorted, ws.Slot(kOrderKeysSortedSlot, key_bytes, stream));
  TESSERA_ASSIGN_OR_RETURN(void* ids, ws.Slot(kOrderIdsSlot, id_bytes, stream));
  TESSERA_ASSIGN_OR_RETURN(void* order, ws.Slot(kOrderSlot, id_bytes, stream));
  if (n == 0) return static_cast<const int32_t*>(order);
  const unsigned blocks = static_cast<unsigned>((n + kBmuThreads - 1) / kBmuThreads);
  const int count = static_cast<int>(n);
  if (pair) {
    PairKeysKernel<<<blocks, kBmuThreads, 0, s>>>(previous_bmu, secondary, secondary_range, n, nodes,
                                                  static_cast<uint64_t*>(keys), static_cast<int32_t*>(ids));
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("PairKeysKernel");
    const int64_t max_key = (previous_bmu != nullptr ? nodes : 0) * (secondary_range + 1) + secondary_range;
    TESSERA_RETURN_IF_ERROR(SortIds<uint64_t>(stream, keys, keys_sorted, ids, order, count, BitsFor(max_key), ws));
  } else {
    OrderKeysKernel<<<blocks, kBmuThreads, 0, s>>>(previous_bmu, n, nodes, static_cast<uint32_t*>(keys),
                                                   static_cast<int32_t*>(ids));
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("OrderKeysKernel");
    TESSERA_RETURN_IF_ERROR(SortIds<uint32_t>(stream, keys, keys_sorted, ids, order, count, BitsFor(nodes), ws));
  }
  return static_cast<const int32_t*>(order);
}

}  // namespace internal

absl::Status RarestFeatureKeys(const Stream& stream, const DocumentSet& docs, int32_t* keys) {
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  const int64_t n = docs.rows();
  if (n == 0) return absl::OkStatus();
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  constexpr int kThreads = internal::kBmuThreads;
  internal::RarestFeatureKernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, s>>>(
      docs.csr().offsets, docs.csr().indices, docs.csc().offsets, n, docs.csr().cols, keys);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("RarestFeatureKernel");
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace som
}  // namespace tessera
