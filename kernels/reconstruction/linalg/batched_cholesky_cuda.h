// Internal: the two CUDA kernels behind cuda::BatchedCholeskySolve. T is
// float or std::complex<float> (passed to the kernels as float2).
#ifndef TESSERA_KERNELS_RECONSTRUCTION_LINALG_BATCHED_CHOLESKY_CUDA_H_
#define TESSERA_KERNELS_RECONSTRUCTION_LINALG_BATCHED_CHOLESKY_CUDA_H_

#include "absl/status/status.h"
#include "common/device.h"
#include "kernels/reconstruction/linalg/batched_cholesky.h"

namespace tessera {
namespace recon {
namespace linalg {
namespace cuda_detail {

// n <= kMaxRegisterSolveSize: one thread per system.
template <typename T>
absl::Status SolveSmall(const Stream& stream, const BatchedSolveShape& shape, float lambda, const T* a, const T* b,
                        T* x, int* info);
// kMaxRegisterSolveSize < n <= kMaxBatchedSolveSize: one block per system.
template <typename T>
absl::Status SolveBlocked(const Stream& stream, const BatchedSolveShape& shape, float lambda, const T* a, const T* b,
                          T* x, int* info);

}  // namespace cuda_detail
}  // namespace linalg
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_LINALG_BATCHED_CHOLESKY_CUDA_H_
