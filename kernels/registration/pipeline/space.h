// Bridges physical space (RAS+ mm, common/volume.h) and the normalized
// coordinates the registration kernels work in (kernels/registration/
// sampler_math.h: align_corners=True, voxel 0 at -1, voxel n-1 at +1).
//
// The registration model, chosen to match ANTs' transform order:
//   moving_point(x) = T(x + v(x))        (x a fixed-image point, RAS mm)
// with T an affine and v a displacement field on the fixed grid. In the
// kernels' normalized coordinates this is exactly the sampler's form
//   p(x_n) = A x_n + t + u(x_n),   u(x_n) = L v(x),
// where [A | t] = N_m^-1 T N_f and L = linear part of N_m^-1 T, with N_f, N_m
// the normalized -> RAS maps of the fixed and moving grids. So the optimizer
// works on [A | t] and u, and the exports convert back with these functions.
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_SPACE_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_SPACE_H_

#include <array>
#include <cstdint>

#include "absl/status/statusor.h"
#include "common/volume.h"

namespace tessera::registration {

using Affine12 = std::array<double, 12>;  // row-major 3x4 [A | t]
using Mat3 = std::array<double, 9>;       // row-major 3x3

struct GridSpace {
  std::array<int64_t, 3> dims = {1, 1, 1};
  Geometry geometry;
};

// The grid of a 3-D volume.
GridSpace SpaceOf(const Volume& volume);

// The grid DownsampleVolume() produces from `in` at `out_shape` (aligned
// corners): out voxel i sits at input index i * (n - 1) / (n' - 1), or at
// the centre when n' == 1.
GridSpace DownsampledSpace(const GridSpace& in, const Shape& out_shape);

// Normalized coordinate -> RAS mm for a grid (n == 1 axes map 0 to voxel 0).
Mat4 NormalizedToWorld(const GridSpace& grid);

Mat4 Multiply(const Mat4& a, const Mat4& b);
Mat4 FromAffine12(const Affine12& a);
Affine12 ToAffine12(const Mat4& m);
Mat3 LinearPart(const Mat4& m);
absl::StatusOr<Mat3> Invert3(const Mat3& m);

// The sampler's [A | t] for a physical transform T (fixed RAS -> moving RAS).
absl::StatusOr<Affine12> SamplerAffineFromPhysical(const Mat4& physical, const GridSpace& fixed,
                                                   const GridSpace& moving);
// The physical transform for a sampler [A | t].
absl::StatusOr<Mat4> PhysicalFromSamplerAffine(const Affine12& sampler, const GridSpace& fixed,
                                               const GridSpace& moving);

// L = linear part of N_m^-1 T: maps a physical displacement v (RAS mm, applied
// before T) to the sampler's normalized displacement u. Its inverse maps back.
absl::StatusOr<Mat3> PhysicalToNormalizedDisplacement(const Mat4& physical, const GridSpace& moving);

// Chain rule through SamplerAffineFromPhysical: given dL/d[A | t] of the
// sampler (12 values), dL/dT for the physical transform (rows 0..2 of the 4x4;
// row 3 is zero): dL/dT = P^T G Q^T with A = P T Q.
absl::StatusOr<Mat4> PhysicalGradientFromSampler(const Affine12& grad_sampler, const GridSpace& fixed,
                                                 const GridSpace& moving);

// RAS <-> LPS for transforms: F T F with F = diag(-1, -1, 1, 1).
Mat4 RasToLps(const Mat4& m);
inline Mat4 LpsToRas(const Mat4& m) { return RasToLps(m); }

}  // namespace tessera::registration

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_SPACE_H_
