// GaussianSmooth (gaussian_smooth.h) of a volume or planar field in place,
// with its one-volume CUDA scratch borrowed from the caller (a buffer that is
// dead at that point of an iteration, e.g. the lean pipeline's image-sized
// work buffer) instead of allocated: same kernels, same results, bit for bit.
#ifndef TESSERA_KERNELS_REGISTRATION_LEAN_SMOOTH_H_
#define TESSERA_KERNELS_REGISTRATION_LEAN_SMOOTH_H_

#include <array>

#include "absl/status/status.h"
#include "common/device.h"
#include "common/ndarray.h"
#include "kernels/registration/storage16.h"
#include "kernels/registration/types.h"

namespace tessera {
namespace registration {

// Kernel choice of the CUDA smoothing passes, passed with each call. Every
// setting gives the same results bit for bit (finite inputs); the CPU ignores it.
struct LeanSmoothTuning {
  // Each thread filters several consecutive outputs from one sweep of the
  // shared-memory tile or row (issue 37: 8 along y and z, 9 along x) instead
  // of one output per sweep. Default since 2026-12-07 (9.62 -> 7.36 ms for
  // the sigma-6 gradient smoothing at 512^3 on an H100, same bits).
  bool run_kernel = true;
  // With run_kernel, issue 37: at the lean stage's radii (2 and 18: sigma 0.5
  // and 6) kernels compiled for that radius (the tap loops unrolled, the taps
  // constant operands) instead of the run kernels' sliding tap registers.
  // Default since 2026-12-07. At radius 18 the y and z passes march along
  // their axis (each input loaded once, the next step's loads in flight
  // during the sums); at radius 2 SmoothInPlaceWithScratch's x and y passes
  // are one tiled kernel into the scratch (a sixth less memory traffic).
  // 512^3 on an H100: the bf16 gradient at sigma 6 7.37 -> 5.32 ms, u at
  // sigma 0.5 4.37 -> 2.69 ms (the run kernels -> these; with the march's
  // ring mirrored past its end since round 6, the gradient 5.17 -> 4.98 ms).
  // Same bits.
  bool fixed_radius = true;
};

// field: float32 rank 3 or 4 (planar) in the stream's memory, smoothed in
// place. scratch: on CUDA, at least dim0 * dim1 * dim2 floats of device
// memory not aliasing field (ignored on the CPU, may be null there).
// Errors as GaussianSmooth, plus INVALID_ARGUMENT for a missing scratch.
absl::Status SmoothInPlaceWithScratch(NDArray& field, const std::array<double, 3>& sigma_voxels, float* scratch,
                                      int64_t scratch_floats, const Stream& stream, LeanSmoothTuning tuning = {});

// Mixed precision (issue 13's lean stage): a planar bf16 field of `comps`
// components of `dims` (stream memory) smoothed in place; loads in float,
// filters in float and rounds once per component. scratch: dims.size()
// floats of stream memory not aliasing field, needed on both backends (the
// CPU reference smooths each component there: x, y, z; CUDA: y, x, z).
// CUDA: rows of at most 8192 voxels. CUDA == CPU within one bf16 rounding
// (2^-8 of the largest |value|; lean_smooth_test.cc).
absl::Status SmoothBf16InPlaceWithScratch(BFloat16* field, Dims3 dims, int comps,
                                          const std::array<double, 3>& sigma_voxels, float* scratch,
                                          int64_t scratch_floats, const Stream& stream, LeanSmoothTuning tuning = {});

}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_LEAN_SMOOTH_H_
