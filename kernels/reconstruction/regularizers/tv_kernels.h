// The TV passes over a whole image, one per backend: tv_cpu.cc (ParallelFor
// over voxels) and tv.cu (one thread per voxel). tv.cc dispatches on the
// stream and runs FGP on top. Internal to regularizers/; the stencils are in
// tv_stencil.h.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_REGULARIZERS_TV_KERNELS_H_
#define TESSERA_KERNELS_RECONSTRUCTION_REGULARIZERS_TV_KERNELS_H_

#include "absl/status/status.h"
#include "common/device.h"
#include "kernels/reconstruction/regularizers/tv_stencil.h"

namespace tessera {
namespace recon {
namespace regularizers {
namespace internal {

#define TESSERA_TV_KERNELS                                                                                       \
  absl::Status PrimalFromDual(const Stream& stream, const TvGrid& grid, float weight, bool non_negative,        \
                              const float* b, const float* q, float* x);                                         \
  absl::Status DualStep(const Stream& stream, const TvGrid& grid, float tau, float beta, const float* x, float* p, \
                        float* r);                                                                               \
  absl::Status SmoothedMagnitude(const Stream& stream, const TvGrid& grid, float epsilon, const float* x,        \
                                 float* out);                                                                    \
  absl::Status SmoothedGradient(const Stream& stream, const TvGrid& grid, float epsilon, const float* x, float* g);

namespace cpu {
TESSERA_TV_KERNELS
}  // namespace cpu

namespace cuda {
TESSERA_TV_KERNELS
}  // namespace cuda

#undef TESSERA_TV_KERNELS

}  // namespace internal
}  // namespace regularizers
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_REGULARIZERS_TV_KERNELS_H_
