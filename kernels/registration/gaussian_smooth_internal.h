// Backend entry points behind gaussian_smooth.h (raw pointers, validated by
// gaussian_smooth.cc). Internal to kernels/registration.
#ifndef TESSERA_KERNELS_REGISTRATION_GAUSSIAN_SMOOTH_INTERNAL_H_
#define TESSERA_KERNELS_REGISTRATION_GAUSSIAN_SMOOTH_INTERNAL_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/device.h"
#include "kernels/registration/storage16.h"

namespace tessera {
namespace registration {
namespace gs_internal {

struct Grid {
  int64_t nx = 1, ny = 1, nz = 1;  // spatial extents
  int64_t comps = 1;               // planar components
  int64_t voxels() const { return nx * ny * nz; }
};

// taps[a]: 2r + 1 normalised taps for axis a ({1} = axis skipped).
// in may equal out.
void SmoothCpu(const float* in, float* out, const Grid& g, const std::vector<float> taps[3]);

// Trilinear, aligned corners; component c multiplied by scale[c] (c < 3;
// components >= 3 unscaled).
void ResampleCpu(const float* in, const Grid& gin, float* out, const Grid& gout, const float scale[3]);

// Kernel choice of the CUDA passes (LeanSmoothTuning's, issue 37). Every
// setting gives the same results bit for bit for finite inputs.
struct PassKernels {
  // The register-blocked RowWarpRunKernel and AxisRunKernel (fewer
  // shared-memory loads) instead of RowWarpKernel and AxisKernel.
  bool run_kernel = false;
  // With run_kernel: for the radii with compiled kernels (2 and 18), kernels
  // with the radius a template argument, so the tap loops unroll and the taps
  // are constant operands (no register shifting); at radius 18 the y and z
  // passes march along the axis (AxisMarchKernel), at radius 2 SmoothCuda's
  // x and y passes are one tiled kernel (XFirstFixedKernel).
  bool fixed_radius = false;
};

#if TESSERA_WITH_CUDA
// scratch: g.voxels() floats of device memory (unused when only x is filtered).
absl::Status SmoothCuda(const float* in, float* out, const Grid& g, const std::vector<float> taps[3],
                        float* scratch, const Stream& stream, PassKernels kernels = {});
// Mixed precision: a bf16 field smoothed in place through one float scratch
// volume (rounded once per component). Rows up to RowPolicy's 8192 voxels.
absl::Status SmoothBf16InPlaceCuda(BFloat16* field, const Grid& g, const std::vector<float> taps[3], float* scratch,
                                   const Stream& stream, PassKernels kernels = {});
absl::Status ResampleCuda(const float* in, const Grid& gin, float* out, const Grid& gout, const float scale[3],
                          const Stream& stream);
#endif

// Input coordinate of output voxel i with aligned corners.
inline double AlignedCoord(int64_t i, int64_t n_in, int64_t n_out) {
  if (n_out <= 1) return 0.5 * double(n_in - 1);
  return double(i) * double(n_in - 1) / double(n_out - 1);
}

}  // namespace gs_internal
}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_GAUSSIAN_SMOOTH_INTERNAL_H_
