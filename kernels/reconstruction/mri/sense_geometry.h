// Index arithmetic of SENSE folding shared by the CPU reference and the CUDA
// kernels (host and device): which full-image pixel is copy r of aliased
// pixel p.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_MRI_SENSE_GEOMETRY_H_
#define TESSERA_KERNELS_RECONSTRUCTION_MRI_SENSE_GEOMETRY_H_

#include <cstdint>

#if defined(__CUDACC__)
#define TESSERA_HOST_DEVICE __host__ __device__
#else
#define TESSERA_HOST_DEVICE
#endif

namespace tessera {
namespace recon {
namespace mri {

struct FoldIndex {
  int64_t nx;      // full image width
  int64_t period;  // L = n_axis / R
  int axis;        // 0 or 1

  // Full-image pixel of copy r of aliased pixel p (aliased images are
  // (axis 0) L x ny or (axis 1) nx x L, x fastest).
  TESSERA_HOST_DEVICE int64_t Pixel(int64_t p, int r) const {
    if (axis == 1) return p + r * period * nx;  // (i, j') -> (i, j' + r L)
    const int64_t i = p % period, j = p / period;
    return i + r * period + nx * j;
  }
};

}  // namespace mri
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_MRI_SENSE_GEOMETRY_H_
