// Batched Hermitian positive-definite solves (seed code 3): for each i,
//   (A_i + lambda I) X_i = B_i
// by Cholesky, for many small systems at once (SENSE unfolding with Na x Na
// coil matrices, minimum-variance beamforming with Nc x Nc covariances).
//
// Layout (host and device alike), for system i of `batch`:
//   A_i(r, c) = a[i n n + r + c n]           n x n, column-major; only the
//                                            lower triangle (r >= c) is read
//   B_i(r, k) = b[i n nrhs + r + k n]        n x nrhs, column-major
//   X_i(r, k) = x[i n nrhs + r + k n]        same layout as B; x may equal b
// Complex versions take std::complex<float> (the layout of float2 and
// cuComplex); Hermitian means the lower triangle holds A(r, c) and the upper
// one, never read, would hold its conjugate. Diagonal imaginary parts are
// ignored.
//
// info[i] (one int per system, stream memory) follows LAPACK: 0 when system
// i was solved, j > 0 when the leading minor of order j of A_i + lambda I is
// not positive definite (pivot j, 1-based, was <= 0 or not finite). Such a
// system's X_i is set to zero, so no NaN leaks into an image silently.
//
// CUDA: n <= 8 runs one thread per system with the factor in registers,
// fully unrolled for each n (A and B staged through shared memory so global
// reads are coalesced); 8 < n <= 128 runs one thread block per system with
// the matrix in shared memory and a right-looking blocked Cholesky (16-wide
// panels, 4 x 4 register tiles for the trailing update). CPU: the reference,
// Cholesky in double. On an H200 (bench/results/2026-12-01-h200-recon-linalg.md)
// this is 21-111x faster than cuSOLVER's potrf/potrsBatched for n <= 8,
// 1.2-1.5x for 16 <= n <= 64, and slower at n = 128 (0.74x real, 0.46x
// complex).
#ifndef TESSERA_KERNELS_RECONSTRUCTION_LINALG_BATCHED_CHOLESKY_H_
#define TESSERA_KERNELS_RECONSTRUCTION_LINALG_BATCHED_CHOLESKY_H_

#include <complex>
#include <cstdint>

#include "absl/status/status.h"
#include "common/device.h"

namespace tessera {
namespace recon {
namespace linalg {

constexpr int kMaxBatchedSolveSize = 128;
constexpr int kMaxRegisterSolveSize = 8;  // one thread per system up to here

struct BatchedSolveShape {
  int64_t batch = 0;
  int n = 0;
  int nrhs = 1;
};

// INVALID_ARGUMENT for n outside [1, 128], nrhs < 1, batch < 0, a non-finite
// lambda or a missing pointer (info is required). Asynchronous on a CUDA
// stream.
absl::Status BatchedCholeskySolve(const Stream& stream, const BatchedSolveShape& shape, float lambda, const float* a,
                                  const float* b, float* x, int* info);
absl::Status BatchedCholeskySolve(const Stream& stream, const BatchedSolveShape& shape, float lambda,
                                  const std::complex<float>* a, const std::complex<float>* b, std::complex<float>* x,
                                  int* info);

namespace cpu {
void BatchedCholeskySolve(const BatchedSolveShape& shape, float lambda, const float* a, const float* b, float* x,
                          int* info);
void BatchedCholeskySolve(const BatchedSolveShape& shape, float lambda, const std::complex<float>* a,
                          const std::complex<float>* b, std::complex<float>* x, int* info);
}  // namespace cpu

namespace cuda {
absl::Status BatchedCholeskySolve(const Stream& stream, const BatchedSolveShape& shape, float lambda, const float* a,
                                  const float* b, float* x, int* info);
absl::Status BatchedCholeskySolve(const Stream& stream, const BatchedSolveShape& shape, float lambda,
                                  const std::complex<float>* a, const std::complex<float>* b, std::complex<float>* x,
                                  int* info);
}  // namespace cuda

}  // namespace linalg
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_LINALG_BATCHED_CHOLESKY_H_
