// SpmvPlan: checks, algorithm choice and backend dispatch.
#include "kernels/reconstruction/linalg/spmv.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/status.h"
#include "kernels/reconstruction/linalg/spmv_cuda.h"

namespace tessera {
namespace recon {
namespace linalg {

const char* SpmvAlgorithmName(SpmvAlgorithm algorithm) {
  switch (algorithm) {
    case SpmvAlgorithm::kAuto:
      return "auto";
    case SpmvAlgorithm::kCusparse:
      return "cusparse";
    case SpmvAlgorithm::kBucketed:
      return "bucketed";
  }
  return "?";
}

SpmvPlan::SpmvPlan(const CsrMatrix& matrix, const Stream& stream, SpmvAlgorithm algorithm, ExecutionMode mode,
                   const RowLengthStats& stats)
    : matrix_(matrix), stream_(&stream), algorithm_(algorithm), mode_(mode), stats_(stats) {}

SpmvPlan::~SpmvPlan() = default;

absl::StatusOr<std::unique_ptr<SpmvPlan>> SpmvPlan::Create(const CsrMatrix& matrix, const Stream& stream,
                                                           const SpmvOptions& options) {
  TESSERA_RETURN_IF_ERROR(CheckCsrShape(matrix));
  // cuSPARSE refuses nnz > rows x cols (possible only with repeated entries).
  const bool cusparse_accepts = static_cast<double>(matrix.nnz) <= static_cast<double>(matrix.rows) * matrix.cols;
  if (options.algorithm == SpmvAlgorithm::kCusparse && !cusparse_accepts) {
    return absl::InvalidArgumentError(absl::StrCat("spmv: nnz ", matrix.nnz, " exceeds rows x cols = ", matrix.rows,
                                                   " x ", matrix.cols,
                                                   " (repeated entries): cuSPARSE refuses such "
                                                   "matrices; use SpmvAlgorithm::kBucketed"));
  }
  // kAuto: cuSPARSE where it accepts the matrix. Measured on an H200
  // (bench/results/2026-12-01-h200-recon-linalg.md), ALG1 / ALG2 ran 1.18x /
  // 1.14x faster than the bucketed kernel on 30-entry rows and 1.39x / 1.36x on
  // power-law rows (1e6 rows, 3e7 entries).
  SpmvAlgorithm algorithm = options.algorithm;
  if (algorithm == SpmvAlgorithm::kAuto) {
    algorithm = cusparse_accepts ? SpmvAlgorithm::kCusparse : SpmvAlgorithm::kBucketed;
  }
  if (stream.backend() == Backend::kCpu) {
    TESSERA_RETURN_IF_ERROR(ValidateHostCsr(matrix));
    const RowLengthStats stats = ComputeRowLengthStats(matrix.row_ptr, matrix.rows);
    return std::unique_ptr<SpmvPlan>(new SpmvPlan(matrix, stream, algorithm, options.mode, stats));
  }
#if TESSERA_WITH_CUDA
  std::vector<int32_t> row_ptr(matrix.rows + 1);
  TESSERA_RETURN_IF_ERROR(CopyBytes(row_ptr.data(), MemoryKind::kHost, matrix.row_ptr, MemoryKind::kDevice,
                                    row_ptr.size() * sizeof(int32_t), stream));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  TESSERA_RETURN_IF_ERROR(CheckCsrRowPointers(row_ptr.data(), matrix.rows, matrix.nnz));
  TESSERA_ASSIGN_OR_RETURN(const int64_t bad, cuda::FirstBadColumn(stream, matrix.col_idx, matrix.nnz, matrix.cols));
  if (bad >= 0) {
    int32_t column = 0;
    TESSERA_RETURN_IF_ERROR(
        CopyBytes(&column, MemoryKind::kHost, matrix.col_idx + bad, MemoryKind::kDevice, sizeof(int32_t), stream));
    TESSERA_RETURN_IF_ERROR(stream.Synchronize());
    return absl::InvalidArgumentError(absl::StrCat("csr: row ", RowOfEntry(row_ptr.data(), matrix.rows, bad),
                                                   " has column index ", column, " (entry ", bad,
                                                   ") outside [0, cols = ", matrix.cols, ")"));
  }
  const RowLengthStats stats = ComputeRowLengthStats(row_ptr.data(), matrix.rows);
  std::unique_ptr<SpmvPlan> plan(new SpmvPlan(matrix, stream, algorithm, options.mode, stats));
  if (matrix.rows > 0 && matrix.nnz > 0) {
    if (algorithm == SpmvAlgorithm::kCusparse) {
      TESSERA_ASSIGN_OR_RETURN(plan->kernel_,
                               cuda::CreateCusparseSpmv(matrix, stream, options.mode == ExecutionMode::kDeterministic));
    } else {
      TESSERA_ASSIGN_OR_RETURN(plan->kernel_,
                               cuda::CreateBucketedSpmv(matrix, stream, BucketRows(row_ptr.data(), matrix.rows)));
    }
  }
  return plan;
#else
  return absl::FailedPreconditionError(
      absl::StrCat("spmv: CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
#endif
}

absl::Status SpmvPlan::Apply(const float* x, float* y, float alpha, float beta) {
  if ((x == nullptr && matrix_.cols > 0) || (y == nullptr && matrix_.rows > 0)) {
    return absl::InvalidArgumentError("spmv: x or y is null");
  }
  if (stream_->backend() == Backend::kCpu) {
    cpu::Spmv(matrix_, x, y, alpha, beta);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  if (matrix_.rows == 0) return absl::OkStatus();
  if (kernel_ == nullptr) return cuda::ScaleY(*stream_, y, matrix_.rows, beta);  // no entries: y = beta y
  return kernel_->Apply(x, y, alpha, beta);
#else
  return absl::FailedPreconditionError("spmv: built without CUDA");
#endif
}

}  // namespace linalg
}  // namespace recon
}  // namespace tessera
