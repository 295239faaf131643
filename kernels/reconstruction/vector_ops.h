// Element-wise vector operations and dot products for the iterative solvers
// (SART, CGLS, MLEM/OSEM, CG). Pointers live in the stream's backend memory.
//
// Every Dot is deterministic in both execution modes: per-block sums in a
// fixed tree (double), then the block partials in index order. Solvers bring
// the result to the host anyway (it steers the iteration), so it is returned.
// The element-wise ops are fused where the solvers need them (for example
// SART's x += lambda * backprojected / weights) because each pass over a
// gigavoxel volume costs more than the arithmetic.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_VECTOR_OPS_H_
#define TESSERA_KERNELS_RECONSTRUCTION_VECTOR_OPS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/device.h"

namespace tessera {
namespace recon {

// x[i] = value
absl::Status Fill(const Stream& stream, float* x, int64_t n, float value);
// y[i] += a * x[i]
absl::Status Axpy(const Stream& stream, float a, const float* x, float* y, int64_t n);
// y[i] = x[i] + b * y[i]   (CG's p = r + beta p)
absl::Status Xpby(const Stream& stream, const float* x, float b, float* y, int64_t n);
// x[i] *= a
absl::Status Scale(const Stream& stream, float a, float* x, int64_t n);
// sum_i x[i] * y[i], accumulated in double.
absl::StatusOr<double> Dot(const Stream& stream, const float* x, const float* y, int64_t n);
// sum_i x[i], accumulated in double.
absl::StatusOr<double> Sum(const Stream& stream, const float* x, int64_t n);
// out[i] = num[i] / den[i], or 0 where |den[i]| <= eps (rays or voxels the
// system never touches). out may alias num or den.
absl::Status SafeDivide(const Stream& stream, const float* num, const float* den, float eps, float* out, int64_t n);
// x[i] *= y[i]
absl::Status Multiply(const Stream& stream, const float* y, float* x, int64_t n);
// out[i] = a[i] - b[i]   (residuals; out may alias a or b)
absl::Status Subtract(const Stream& stream, const float* a, const float* b, float* out, int64_t n);
// x[i] = max(x[i], lo)   (non-negativity constraints)
absl::Status ClampMin(const Stream& stream, float lo, float* x, int64_t n);
// x[i] += lambda * num[i] / den[i] where |den[i]| > eps (SART's update).
absl::Status AddScaledRatio(const Stream& stream, float lambda, const float* num, const float* den, float eps, float* x,
                            int64_t n);
// g[i] = 0 where x[i] <= lo and g[i] < 0: the ascent direction g projected
// onto what the bound x >= lo allows (projected CGLS's free gradient).
absl::Status ZeroWhereBound(const Stream& stream, float lo, const float* x, float* g, int64_t n);

namespace cuda {
absl::Status Fill(const Stream& stream, float* x, int64_t n, float value);
absl::Status Axpy(const Stream& stream, float a, const float* x, float* y, int64_t n);
absl::Status Xpby(const Stream& stream, const float* x, float b, float* y, int64_t n);
absl::Status Scale(const Stream& stream, float a, float* x, int64_t n);
absl::StatusOr<double> Dot(const Stream& stream, const float* x, const float* y, int64_t n);
absl::StatusOr<double> Sum(const Stream& stream, const float* x, int64_t n);
absl::Status SafeDivide(const Stream& stream, const float* num, const float* den, float eps, float* out, int64_t n);
absl::Status Multiply(const Stream& stream, const float* y, float* x, int64_t n);
absl::Status Subtract(const Stream& stream, const float* a, const float* b, float* out, int64_t n);
absl::Status ClampMin(const Stream& stream, float lo, float* x, int64_t n);
absl::Status AddScaledRatio(const Stream& stream, float lambda, const float* num, const float* den, float eps, float* x,
                            int64_t n);
absl::Status ZeroWhereBound(const Stream& stream, float lo, const float* x, float* g, int64_t n);
}  // namespace cuda

}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_VECTOR_OPS_H_
