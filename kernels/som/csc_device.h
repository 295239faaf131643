// The transpose of sparse binary documents (CSR -> CSC, doc ids ascending per
// feature) built in device memory: CUB's stable radix sort of (feature, doc)
// pairs, then the feature offsets from the sorted keys. Same result as
// BuildCsc (documents.h) on the host, without a single-threaded scatter over
// every non-zero and its upload (seconds at MEDLINE scale).
#ifndef TESSERA_KERNELS_SOM_CSC_DEVICE_H_
#define TESSERA_KERNELS_SOM_CSC_DEVICE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "common/device.h"

namespace tessera {
namespace som {
namespace cuda {

// `offsets` (rows + 1) and `indices` (nnz) are the CSR in device memory;
// writes csc_offsets (cols + 1) and doc_ids (nnz), device memory, ordered on
// `stream`. Scratch (about 8 nnz bytes + CUB's) is allocated through Buffer
// and freed before returning. nnz must be below 2^31. FAILED_PRECONDITION
// without CUDA.
absl::Status TransposeCsr(const Stream& stream, int64_t rows, int64_t cols, int64_t nnz, const int64_t* offsets,
                          const int32_t* indices, int64_t* csc_offsets, int32_t* doc_ids);

}  // namespace cuda
}  // namespace som
}  // namespace tessera

#endif  // TESSERA_KERNELS_SOM_CSC_DEVICE_H_
