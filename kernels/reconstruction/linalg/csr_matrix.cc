// CSR checks (naming the offending row) and the double-accumulating CPU SpMV.
#include "kernels/reconstruction/linalg/csr_matrix.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"

namespace tessera {
namespace recon {
namespace linalg {

absl::Status CheckCsrShape(const CsrMatrix& m) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (m.rows < 0 || m.rows >= kMax)
    return absl::InvalidArgumentError(absl::StrCat("csr: rows ", m.rows, " not in [0, 2^31 - 1)"));
  if (m.cols < 0 || m.cols >= kMax)
    return absl::InvalidArgumentError(absl::StrCat("csr: cols ", m.cols, " not in [0, 2^31 - 1)"));
  if (m.nnz < 0 || m.nnz > kMax)
    return absl::InvalidArgumentError(absl::StrCat("csr: nnz ", m.nnz, " not in [0, 2^31)"));
  if (m.row_ptr == nullptr) return absl::InvalidArgumentError("csr: row_ptr is null");
  if (m.nnz > 0 && (m.col_idx == nullptr || m.values == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat("csr: nnz is ", m.nnz, " but col_idx or values is null"));
  }
  if (m.nnz > 0 && m.cols == 0)
    return absl::InvalidArgumentError(absl::StrCat("csr: nnz is ", m.nnz, " but cols is 0"));
  return absl::OkStatus();
}

absl::Status CheckCsrRowPointers(const int32_t* row_ptr, int64_t rows, int64_t nnz) {
  if (row_ptr[0] != 0) return absl::InvalidArgumentError(absl::StrCat("csr: row_ptr[0] is ", row_ptr[0], ", not 0"));
  for (int64_t r = 0; r < rows; ++r) {
    if (row_ptr[r + 1] < row_ptr[r]) {
      return absl::InvalidArgumentError(absl::StrCat("csr: row_ptr decreases at row ", r, " (row_ptr[", r, "] = ",
                                                     row_ptr[r], ", row_ptr[", r + 1, "] = ", row_ptr[r + 1], ")"));
    }
  }
  if (row_ptr[rows] != nnz) {
    return absl::InvalidArgumentError(
        absl::StrCat("csr: size mismatch: row_ptr[rows = ", rows, "] is ", row_ptr[rows], " but nnz is ", nnz));
  }
  return absl::OkStatus();
}

absl::Status ValidateHostCsr(const CsrMatrix& m) {
  if (absl::Status s = CheckCsrShape(m); !s.ok()) return s;
  if (absl::Status s = CheckCsrRowPointers(m.row_ptr, m.rows, m.nnz); !s.ok()) return s;
  for (int64_t k = 0; k < m.nnz; ++k) {
    if (m.col_idx[k] < 0 || m.col_idx[k] >= m.cols) {
      const int64_t r = RowOfEntry(m.row_ptr, m.rows, k);
      return absl::InvalidArgumentError(absl::StrCat("csr: row ", r, " has column index ", m.col_idx[k], " (entry ", k,
                                                     ") outside [0, cols = ", m.cols, ")"));
    }
  }
  return absl::OkStatus();
}

int64_t RowOfEntry(const int32_t* row_ptr, int64_t rows, int64_t k) {
  // The last row whose start is <= k (empty rows before it share its start).
  const int32_t* it = std::upper_bound(row_ptr, row_ptr + rows + 1, static_cast<int32_t>(k));
  return static_cast<int64_t>(it - row_ptr) - 1;
}

namespace cpu {

void Spmv(const CsrMatrix& m, const float* x, float* y, float alpha, float beta) {
  ParallelFor(
      m.rows,
      [&](int64_t r0, int64_t r1, int) {
        for (int64_t r = r0; r < r1; ++r) {
          double sum = 0;
          for (int32_t k = m.row_ptr[r]; k < m.row_ptr[r + 1]; ++k) {
            sum += static_cast<double>(m.values[k]) * x[m.col_idx[k]];
          }
          double out = static_cast<double>(alpha) * sum;
          if (beta != 0.0f) out += static_cast<double>(beta) * y[r];
          y[r] = static_cast<float>(out);
        }
      },
      /*min_per_chunk=*/4096);
}

}  // namespace cpu
}  // namespace linalg
}  // namespace recon
}  // namespace tessera
