// Element-wise steps of MLEM/OSEM that recon::vector_ops does not cover,
// fused where they are a pass over a whole sinogram or volume. Pointers live
// in the stream's backend memory. Sums are deterministic in both backends
// (CPU: index order in double; CUDA: per-block fixed trees in double, then
// the block partials in index order).
#ifndef TESSERA_KERNELS_RECONSTRUCTION_PET_EM_OPS_H_
#define TESSERA_KERNELS_RECONSTRUCTION_PET_EM_OPS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/device.h"

namespace tessera {
namespace recon {
namespace pet {

// ratio[i] = y[i] / ybar[i] with ybar = fwd + background (background may be
// null: 0), or 0 where ybar[i] <= 0. Returns the Poisson log-likelihood
// sum_i (y_i log ybar_i - ybar_i) (without the log y_i! constant) over the
// elements with ybar_i > 0. `ratio` may alias `fwd`.
absl::StatusOr<double> PoissonRatio(const Stream& stream, const float* y, const float* fwd, const float* background,
                                    float* ratio, int64_t n);

// The EM update: image[j] *= back[j] / sens[j] where sens[j] > eps (clamped
// at 0, so positivity is kept); voxels no LOR of the subset sees keep their value.
absl::Status EmUpdate(const Stream& stream, const float* back, const float* sens, float eps, float* image, int64_t n);

// Index of the first element that is NaN, infinite or negative; -1 if none.
absl::StatusOr<int64_t> FirstInvalid(const Stream& stream, const float* x, int64_t n);

// x[i] = exp(-x[i])   (attenuation factors from line integrals of mu).
absl::Status ExpNegate(const Stream& stream, float* x, int64_t n);

namespace cuda {
absl::StatusOr<double> PoissonRatio(const Stream& stream, const float* y, const float* fwd, const float* background,
                                    float* ratio, int64_t n);
absl::Status EmUpdate(const Stream& stream, const float* back, const float* sens, float eps, float* image, int64_t n);
absl::StatusOr<int64_t> FirstInvalid(const Stream& stream, const float* x, int64_t n);
absl::Status ExpNegate(const Stream& stream, float* x, int64_t n);
}  // namespace cuda

}  // namespace pet
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_PET_EM_OPS_H_
