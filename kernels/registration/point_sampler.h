// Sparse counterpart of the composite grid sampler (grid_sampler.h) for the
// stochastic linear stages of the CPU backend: the moving image sampled at
// A x + t for a *subset* of the fixed grid's voxels, and the affine gradient
// summed over that subset. Elastix's random sampler does the same (a few
// thousand voxels per iteration instead of all of them), which makes a rigid
// or affine iteration cost O(samples) instead of O(voxels).
//
// Same coordinates and interpolation as GridSample with zeros padding (see
// sampler_math.h): with every voxel listed in order, SamplePoints equals
// GridSample's output and SamplePointsAffineBackward equals GridSampleBackward's
// grad_affine up to float summation order (point_sampler_test.cc).
//
// CPU only, on purpose: the GPU backend keeps the exact full-volume mode (a
// full 1 mm volume costs it well under a millisecond, so sampling would save
// nothing there and would change its results).
#ifndef TESSERA_KERNELS_REGISTRATION_POINT_SAMPLER_H_
#define TESSERA_KERNELS_REGISTRATION_POINT_SAMPLER_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "kernels/registration/types.h"

namespace tessera {
namespace registration {

struct PointSampleArgs {
  const float* image = nullptr;   // moving image, image_dims, x-fastest (host)
  Dims3 image_dims;
  const float* affine = nullptr;  // 12 values [A | t]; nullptr = identity
  Dims3 grid_dims;                // the fixed grid whose voxels the points index
  const int64_t* points = nullptr;  // flat voxel indices into grid_dims (repeats allowed)
  int64_t count = 0;
};

// INVALID_ARGUMENT for null pointers, empty dims or a point outside the grid.
absl::Status ValidatePointSampleArgs(const PointSampleArgs& args);

// values[k] = trilinear sample of the image at A x_k + t (0 outside), x_k the
// normalized coordinate of voxel points[k]. Multi-threaded.
absl::Status SamplePoints(const PointSampleArgs& args, float* values);

// grad_affine = dL/d[A | t] = sum_k grad_values[k] * dI/dp(p_k) [x_k, 1]^T,
// given grad_values[k] = dL/dvalues[k]. Summed in double per thread, then over
// threads in a fixed order: deterministic for a given thread count.
absl::Status SamplePointsAffineBackward(const PointSampleArgs& args, const float* grad_values,
                                        std::array<double, kAffineParams>* grad_affine);

// `count` voxel indices drawn uniformly, with replacement, from [0, voxels)
// by mt19937_64 seeded with `seed`. The same seed gives the same points on
// every machine (no std:: distribution is involved: their output is
// implementation-defined).
std::vector<int64_t> RandomVoxelSubset(int64_t voxels, int64_t count, uint64_t seed);

}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_POINT_SAMPLER_H_
