// CSR -> CSC on the device (csc_device.h).
#include <cuda_runtime.h>

#include <cub/device/device_radix_sort.cuh>

#include <cstdint>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/som/csc_device.h"

namespace tessera {
namespace som {
namespace cuda {
namespace {

// doc_of[k] = the document of non-zero k (one thread per document).
__global__ void ExpandRowsKernel(const int64_t* __restrict__ offsets, int64_t rows, int32_t* __restrict__ doc_of) {
  const int64_t d = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (d >= rows) return;
  for (int64_t k = offsets[d]; k < offsets[d + 1]; ++k) doc_of[k] = static_cast<int32_t>(d);
}

// csc_offsets[v] = first position whose sorted feature is >= v.
__global__ void FeatureOffsetsKernel(const int32_t* __restrict__ sorted, int64_t nnz, int64_t cols,
                                     int64_t* __restrict__ csc_offsets) {
  const int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (k > nnz) return;
  const int64_t lo = k == 0 ? -1 : sorted[k - 1];
  const int64_t hi = k == nnz ? cols : sorted[k];
  for (int64_t v = lo + 1; v <= hi; ++v) csc_offsets[v] = k;
}

int BitsFor(int64_t cols) {
  int bits = 1;
  while (bits < 31 && (int64_t{1} << bits) < cols) ++bits;
  return bits;
}

}  // namespace

absl::Status TransposeCsr(const Stream& stream, int64_t rows, int64_t cols, int64_t nnz, const int64_t* offsets,
                          const int32_t* indices, int64_t* csc_offsets, int32_t* doc_ids) {
  if (nnz >= (int64_t{1} << 31)) {
    return absl::InvalidArgumentError(absl::StrCat("TransposeCsr: ", nnz, " non-zeros exceed 2^31 - 1"));
  }
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  constexpr int kThreads = 256;
  if (nnz == 0) {
    TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(csc_offsets, 0, sizeof(int64_t) * (cols + 1), s));
    return stream.Synchronize();
  }
  const int n = static_cast<int>(nnz);
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> doc_of,
                           Buffer::Allocate(MemoryKind::kDevice, sizeof(int32_t) * nnz, stream.ordinal()));
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> sorted,
                           Buffer::Allocate(MemoryKind::kDevice, sizeof(int32_t) * nnz, stream.ordinal()));
  int32_t* d_doc_of = static_cast<int32_t*>(doc_of->data());
  int32_t* d_sorted = static_cast<int32_t*>(sorted->data());
  ExpandRowsKernel<<<static_cast<unsigned>((rows + kThreads - 1) / kThreads), kThreads, 0, s>>>(offsets, rows,
                                                                                                 d_doc_of);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("ExpandRowsKernel");
  // Stable LSD radix sort by feature: doc ids stay ascending within a feature.
  const int end_bit = BitsFor(cols);
  size_t temp_bytes = 0;
  TESSERA_CUDA_RETURN_IF_ERROR(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, indices, d_sorted, d_doc_of,
                                                               doc_ids, n, 0, end_bit, s));
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> temp,
                           Buffer::Allocate(MemoryKind::kDevice, std::max<size_t>(temp_bytes, 16), stream.ordinal()));
  TESSERA_CUDA_RETURN_IF_ERROR(cub::DeviceRadixSort::SortPairs(temp->data(), temp_bytes, indices, d_sorted, d_doc_of,
                                                               doc_ids, n, 0, end_bit, s));
  FeatureOffsetsKernel<<<static_cast<unsigned>((nnz + 1 + kThreads - 1) / kThreads), kThreads, 0, s>>>(
      d_sorted, nnz, cols, csc_offsets);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("FeatureOffsetsKernel");
  return stream.Synchronize();  // scratch is freed on return
}

}  // namespace cuda
}  // namespace som
}  // namespace tessera
