// Coordinate arithmetic of the composite grid sampler, shared verbatim by the
// CPU reference and the CUDA kernels so both compute bit-identical sampling
// positions: on the device every product and sum goes through the
// round-to-nearest intrinsics (__fmul_rn/__fadd_rn), which the compiler never
// contracts into fused multiply-adds, and host code is built without FMA
// contraction (ISO C++ mode). Identical positions make the nearest-neighbour
// sampler match exactly and keep the trilinear parity error at the level of
// the final 8-term weighted sum.
//
// Convention (PyTorch align_corners=True):
// - Output voxel i along an axis of n voxels has normalized coordinate
//   x = lo + i * step with step = (hi - lo) / (n - 1); by default lo = -1 and
//   hi = +1, so x runs over [-1, 1] exactly; n == 1 gives x = (lo + hi) / 2.
// - A normalized coordinate p on an input axis of m voxels is the continuous
//   voxel index ix = (p + 1) * (m - 1) / 2: p = -1 is the centre of voxel 0,
//   p = +1 the centre of voxel m - 1.
#ifndef TESSERA_KERNELS_REGISTRATION_SAMPLER_MATH_H_
#define TESSERA_KERNELS_REGISTRATION_SAMPLER_MATH_H_

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/registration/types.h"

namespace tessera {
namespace registration {

enum class Padding : int {
  kZeros = 0,   // samples outside the input contribute 0
  kBorder = 1,  // positions are clamped to the input's extent
};

// Per-axis constants of one sampling problem, computed once on the host.
template <typename T>
struct SamplerGeometry {
  Dims3 out_dims;
  Dims3 in_dims;
  T out_lo[3];      // normalized coordinate of output voxel 0
  T out_step[3];    // normalized distance between output voxels
  T in_half[3];     // (m - 1) / 2: normalized -> voxel index scale
  Padding padding;
  uint64_t voxel_jitter_key = 0;  // GridSampleArgsT::voxel_jitter_key (voxel_jitter.h)
  // A z-slab of a larger grid (GridSampleArgsT::out_z0): output slice k is the
  // grid's slice k + k_offset (its coordinate and, jittered, its voxel index
  // v + v_offset), so every voxel is sampled exactly as in the whole grid.
  int64_t k_offset = 0;
  int64_t v_offset = 0;  // k_offset * out_dims.nx * out_dims.ny
};

template <typename T>
SamplerGeometry<T> MakeSamplerGeometry(Dims3 out_dims, Dims3 in_dims, const double lo[3], const double hi[3],
                                       Padding padding, int64_t grid_nz = 0, int64_t k_offset = 0) {
  SamplerGeometry<T> g;
  g.out_dims = out_dims;
  g.in_dims = in_dims;
  g.padding = padding;
  // grid_nz > 0: out_dims is slices [k_offset, k_offset + out_dims.nz) of a
  // grid of grid_nz slices spanning lo[2]..hi[2].
  const int64_t on[3] = {out_dims.nx, out_dims.ny, grid_nz > 0 ? grid_nz : out_dims.nz};
  g.k_offset = grid_nz > 0 ? k_offset : 0;
  g.v_offset = g.k_offset * out_dims.nx * out_dims.ny;
  const int64_t in[3] = {in_dims.nx, in_dims.ny, in_dims.nz};
  for (int d = 0; d < 3; ++d) {
    if (on[d] > 1) {
      g.out_lo[d] = static_cast<T>(lo[d]);
      g.out_step[d] = static_cast<T>((hi[d] - lo[d]) / static_cast<double>(on[d] - 1));
    } else {
      g.out_lo[d] = static_cast<T>(0.5 * (lo[d] + hi[d]));
      g.out_step[d] = T(0);
    }
    g.in_half[d] = static_cast<T>(0.5 * static_cast<double>(in[d] - 1));
  }
  return g;
}

template <typename T>
TESSERA_HD inline T RnMul(T a, T b) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same<T, float>::value) {
    return __fmul_rn(a, b);
  } else {
    return __dmul_rn(a, b);
  }
#else
  return a * b;
#endif
}

template <typename T>
TESSERA_HD inline T RnAdd(T a, T b) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same<T, float>::value) {
    return __fadd_rn(a, b);
  } else {
    return __dadd_rn(a, b);
  }
#else
  return a + b;
#endif
}

template <typename T>
TESSERA_HD inline T FloorT(T v) {
#if defined(__CUDA_ARCH__)
  return floor(v);
#else
  return std::floor(v);
#endif
}

// Round half to even, like PyTorch's nearest mode (std::nearbyint).
template <typename T>
TESSERA_HD inline T RoundEvenT(T v) {
#if defined(__CUDA_ARCH__)
  return rint(v);
#else
  return std::nearbyint(v);
#endif
}

// Normalized output coordinate of voxel (i, j, k).
template <typename T, typename I>
TESSERA_HD inline void OutputCoord(const SamplerGeometry<T>& g, I i, I j, I k, T x[3]) {
  x[0] = RnAdd(g.out_lo[0], RnMul(g.out_step[0], static_cast<T>(i)));
  x[1] = RnAdd(g.out_lo[1], RnMul(g.out_step[1], static_cast<T>(j)));
  x[2] = RnAdd(g.out_lo[2], RnMul(g.out_step[2], static_cast<T>(static_cast<int64_t>(k) + g.k_offset)));
}

// SamplePosition in two steps, so kernels that walk along z can hoist the
// part that depends on x and y only; the operation order (hence every
// rounding) is the same as SamplePosition's. `affine` must not be null here.
// pre[c] = A[c][0] x0 + A[c][1] x1.
template <typename T>
TESSERA_HD inline void AffinePrefix(const T* affine, T x0, T x1, T pre[3]) {
  for (int c = 0; c < 3; ++c) pre[c] = RnAdd(RnMul(affine[4 * c + 0], x0), RnMul(affine[4 * c + 1], x1));
}

// ix from the prefix: p = (pre + A[c][2] x2) + t (+ u), ix = (p + 1) * half.
template <typename T>
TESSERA_HD inline void PositionFromPrefix(const SamplerGeometry<T>& g, const T* affine, const T pre[3], T x2,
                                          const T* u, T ix[3]) {
  for (int c = 0; c < 3; ++c) {
    T p = RnAdd(RnAdd(pre[c], RnMul(affine[4 * c + 2], x2)), affine[4 * c + 3]);
    if (u != nullptr) p = RnAdd(p, u[c]);
    ix[c] = RnMul(RnAdd(p, T(1)), g.in_half[c]);
  }
}

// p = A x + t + u, then continuous input voxel indices ix = (p + 1) * half.
// `affine` is the 3x4 row-major [A | t] (nullptr: identity, which gives the
// same bits as an explicit identity matrix); u may be null.
template <typename T>
TESSERA_HD inline void SamplePosition(const SamplerGeometry<T>& g, const T* affine, const T x[3], const T* u,
                                      T ix[3]) {
  if (affine != nullptr) {
    T pre[3];
    AffinePrefix(affine, x[0], x[1], pre);
    PositionFromPrefix(g, affine, pre, x[2], u, ix);
    return;
  }
  for (int c = 0; c < 3; ++c) {
    T p = x[c];
    if (u != nullptr) p = RnAdd(p, u[c]);
    ix[c] = RnMul(RnAdd(p, T(1)), g.in_half[c]);
  }
}

// Border padding: clamps ix to [0, m - 1]; `dclamp` is d(clamped)/d(ix)
// (0 outside, 1 inside), as in PyTorch's clip_coordinates_set_grad.
// NaN becomes 0 so callers never convert NaN to an integer index.
template <typename T>
TESSERA_HD inline T ClampCoord(T ix, int64_t m, T* dclamp) {
  const T hi = static_cast<T>(m - 1);
  if (!(ix >= T(0))) {  // also maps NaN to 0
    *dclamp = T(0);
    return T(0);
  }
  if (ix > hi) {
    *dclamp = T(0);
    return hi;
  }
  *dclamp = T(1);
  return ix;
}

}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_SAMPLER_MATH_H_
