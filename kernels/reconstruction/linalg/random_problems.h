// Random problems with known structure for the linalg tests and benchmark:
// CSR matrices with uniform or power-law row lengths, symmetric positive-
// definite sparse systems with a bounded spectrum, the 2-D Laplacian, and
// batches of Hermitian positive-definite matrices. Host memory; seeded.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_LINALG_RANDOM_PROBLEMS_H_
#define TESSERA_KERNELS_RECONSTRUCTION_LINALG_RANDOM_PROBLEMS_H_

#include <complex>
#include <cstdint>
#include <vector>

#include "kernels/reconstruction/linalg/csr_matrix.h"

namespace tessera {
namespace recon {
namespace linalg {

struct HostCsr {
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<int32_t> row_ptr{0};
  std::vector<int32_t> col_idx;
  std::vector<float> values;
  int64_t nnz() const { return static_cast<int64_t>(col_idx.size()); }
  CsrMatrix View() const { return CsrMatrix{rows, cols, nnz(), row_ptr.data(), col_idx.data(), values.data()}; }
};

// Row lengths: every row `length` long.
std::vector<int64_t> UniformRowLengths(int64_t rows, int64_t length);
// Pareto-like lengths (P(L > l) ~ l^-exponent), clipped to [0, max_length]
// and scaled so the mean is close to `mean`; `empty_fraction` of the rows
// are empty.
std::vector<int64_t> PowerLawRowLengths(int64_t rows, double mean, int64_t max_length, double exponent,
                                        double empty_fraction, uint32_t seed);
// Columns uniform in [0, cols), increasing within a row; values uniform in
// [-1, 1] away from 0 (|v| >= 0.05).
HostCsr RandomCsr(int64_t rows, int64_t cols, const std::vector<int64_t>& row_lengths, uint32_t seed);

// Symmetric, about `per_row` off-diagonal entries a row, eigenvalues in
// [lo, hi] (Gershgorin: diagonal (lo + hi) / 2, off-diagonal row sums at most
// (hi - lo) / 2), so the condition number is at most hi / lo.
HostCsr RandomSpdCsr(int64_t n, int per_row, double lo, double hi, uint32_t seed);

// The 5-point Laplacian with Dirichlet boundaries on a g x g grid (SPD).
HostCsr Laplacian2d(int64_t g);

// `batch` column-major n x n Hermitian positive-definite matrices
// A = M M^H + n I (M entries uniform in [-1, 1]); both triangles written.
std::vector<float> RandomHpdBatch(int64_t batch, int n, uint32_t seed);
std::vector<std::complex<float>> RandomHpdBatchComplex(int64_t batch, int n, uint32_t seed);
// Cheaper, for large benchmark batches: Hermitian, off-diagonal entries
// uniform in [-1, 1] (complex: both parts), diagonal n (complex: 1.5 n) +
// uniform [0, 1] (diagonally dominant, so positive definite).
std::vector<float> DominantHpdBatch(int64_t batch, int n, uint32_t seed);
std::vector<std::complex<float>> DominantHpdBatchComplex(int64_t batch, int n, uint32_t seed);

}  // namespace linalg
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_LINALG_RANDOM_PROBLEMS_H_
