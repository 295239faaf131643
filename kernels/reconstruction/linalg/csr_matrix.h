// A compressed-sparse-row matrix as the reconstruction solvers see it (system
// matrices stored explicitly, normal equations, regularisers): a view, not an
// owner. Indices are int32 (so rows, cols and nnz are below 2^31) and values
// float; row r holds entries row_ptr[r] .. row_ptr[r + 1] - 1, zero-based.
// Pointers live in the memory of the stream the matrix is used with.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_LINALG_CSR_MATRIX_H_
#define TESSERA_KERNELS_RECONSTRUCTION_LINALG_CSR_MATRIX_H_

#include <cstdint>

#include "absl/status/status.h"

namespace tessera {
namespace recon {
namespace linalg {

struct CsrMatrix {
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t nnz = 0;
  const int32_t* row_ptr = nullptr;  // rows + 1 entries
  const int32_t* col_idx = nullptr;  // nnz entries, each in [0, cols)
  const float* values = nullptr;     // nnz entries
};

// Sizes and pointers only (no element is read): dimensions in [0, 2^31),
// pointers present where their arrays are non-empty.
absl::Status CheckCsrShape(const CsrMatrix& m);

// row_ptr of host memory: starts at 0, never decreases (the first offending
// row is named), ends at nnz.
absl::Status CheckCsrRowPointers(const int32_t* row_ptr, int64_t rows, int64_t nnz);

// Everything, for a matrix in host memory: CheckCsrShape, CheckCsrRowPointers
// and every column index in [0, cols) (the row and column of the first bad
// entry are named). Each failure is INVALID_ARGUMENT.
absl::Status ValidateHostCsr(const CsrMatrix& m);

// The row that holds entry `k` of a valid row_ptr (binary search).
int64_t RowOfEntry(const int32_t* row_ptr, int64_t rows, int64_t k);

namespace cpu {
// Reference y = alpha A x + beta y, each row accumulated in double in index
// order; y is not read when beta == 0. Rows in parallel (common/parallel.h).
void Spmv(const CsrMatrix& m, const float* x, float* y, float alpha, float beta);
}  // namespace cpu

}  // namespace linalg
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_LINALG_CSR_MATRIX_H_
