// Internal: the CUDA halves of SpmvPlan (spmv_bucketed.cu, spmv_cusparse.cc).
#ifndef TESSERA_KERNELS_RECONSTRUCTION_LINALG_SPMV_CUDA_H_
#define TESSERA_KERNELS_RECONSTRUCTION_LINALG_SPMV_CUDA_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "kernels/reconstruction/linalg/csr_matrix.h"
#include "kernels/reconstruction/linalg/row_buckets.h"

namespace tessera {
namespace recon {
namespace linalg {
namespace cuda {

class SpmvKernel {
 public:
  virtual ~SpmvKernel() = default;
  virtual absl::Status Apply(const float* x, float* y, float alpha, float beta) = 0;
};

// The index of the first entry whose column is outside [0, cols), or -1.
absl::StatusOr<int64_t> FirstBadColumn(const Stream& stream, const int32_t* col_idx, int64_t nnz, int64_t cols);

// y[i] = beta * y[i] (0 when beta == 0, y not read): for matrices without
// entries.
absl::Status ScaleY(const Stream& stream, float* y, int64_t n, float beta);

absl::StatusOr<std::unique_ptr<SpmvKernel>> CreateBucketedSpmv(const CsrMatrix& matrix, const Stream& stream,
                                                               const RowBuckets& buckets);
absl::StatusOr<std::unique_ptr<SpmvKernel>> CreateCusparseSpmv(const CsrMatrix& matrix, const Stream& stream,
                                                               bool deterministic);

}  // namespace cuda
}  // namespace linalg
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_LINALG_SPMV_CUDA_H_
