// y = alpha A x + beta y for a CSR matrix, through a plan that does the
// per-matrix work once: checks, cuSPARSE handle/descriptors/buffer, or the
// row buckets of our kernel (row_buckets.h).
//
// Algorithms (CUDA streams; a CPU stream always runs cpu::Spmv, the double-
// accumulating reference, whatever is asked):
//   kCusparse  cusparseSpMV, CUSPARSE_SPMV_CSR_ALG2 in ExecutionMode::
//              kDeterministic (bit-identical runs), ALG1 otherwise.
//   kBucketed  rows grouped by length class, one thread / sub-warp / warp per
//              row, long rows split over warps and their chunk sums added in
//              a fixed order: deterministic in both modes. Sums in float.
//   kAuto      kCusparse (faster on an H200 for uniform and power-law rows,
//              see bench/results/2026-12-01-h200-recon-linalg.md), kBucketed
//              for matrices cuSPARSE refuses (nnz > rows x cols, i.e.
//              repeated entries).
//
//   TESSERA_ASSIGN_OR_RETURN(auto plan, SpmvPlan::Create(matrix, stream, {SpmvAlgorithm::kAuto, mode}));
//   for (...) TESSERA_RETURN_IF_ERROR(plan->Apply(x, y));
#ifndef TESSERA_KERNELS_RECONSTRUCTION_LINALG_SPMV_H_
#define TESSERA_KERNELS_RECONSTRUCTION_LINALG_SPMV_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "kernels/reconstruction/execution_mode.h"
#include "kernels/reconstruction/linalg/csr_matrix.h"
#include "kernels/reconstruction/linalg/row_buckets.h"

namespace tessera {
namespace recon {
namespace linalg {

enum class SpmvAlgorithm { kAuto, kCusparse, kBucketed };
const char* SpmvAlgorithmName(SpmvAlgorithm algorithm);

struct SpmvOptions {
  SpmvAlgorithm algorithm = SpmvAlgorithm::kAuto;
  ExecutionMode mode = ExecutionMode::kDefault;
};

namespace cuda {
class SpmvKernel;
}  // namespace cuda

class SpmvPlan {
 public:
  // Checks the whole matrix (row_ptr copied to the host; column indices
  // checked where they live): INVALID_ARGUMENT naming the row for a
  // decreasing row_ptr, a column outside [0, cols), or row_ptr[rows] != nnz;
  // also for kCusparse with nnz > rows x cols.
  // The matrix arrays and `stream` must outlive the plan; the structure
  // (row_ptr, col_idx) must not change after Create, the values may (each
  // Apply reads them).
  static absl::StatusOr<std::unique_ptr<SpmvPlan>> Create(const CsrMatrix& matrix, const Stream& stream,
                                                          const SpmvOptions& options = {});
  ~SpmvPlan();
  SpmvPlan(const SpmvPlan&) = delete;
  SpmvPlan& operator=(const SpmvPlan&) = delete;

  // y = alpha A x + beta y; x has cols floats, y rows floats (stream memory),
  // x and y must not overlap. y is not read when beta == 0 (it may hold
  // NaN). Asynchronous on a CUDA stream. Not thread-safe.
  absl::Status Apply(const float* x, float* y, float alpha = 1.0f, float beta = 0.0f);

  // The algorithm that runs (kAuto resolved).
  SpmvAlgorithm algorithm() const { return algorithm_; }
  ExecutionMode mode() const { return mode_; }
  const CsrMatrix& matrix() const { return matrix_; }
  const RowLengthStats& row_stats() const { return stats_; }
  const Stream& stream() const { return *stream_; }

 private:
  SpmvPlan(const CsrMatrix& matrix, const Stream& stream, SpmvAlgorithm algorithm, ExecutionMode mode,
           const RowLengthStats& stats);
  CsrMatrix matrix_;
  const Stream* stream_;
  SpmvAlgorithm algorithm_;
  ExecutionMode mode_;
  RowLengthStats stats_;
  std::unique_ptr<cuda::SpmvKernel> kernel_;  // CUDA streams only
};

}  // namespace linalg
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_LINALG_SPMV_H_
