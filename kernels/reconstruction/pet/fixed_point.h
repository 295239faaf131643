// Deterministic scatter in fixed point (host/device arithmetic shared by the
// CPU reference and the CUDA kernels).
//
// Integer addition is associative, so contributions rounded to integer
// multiples of 1/S and summed with 64-bit integer atomics give the same bits
// whatever order the atomics land in: a ray-driven back projection at scatter
// speed that is bit-identical run to run (the float atomics are not).
//
// Choice of S, per back projection: every voxel's sum (and every partial sum)
// is bounded by
//   B = W * sum_i |y_i|,   W = FixedPointWeightBound(grid) >= any A_ij,
// because an LOR gives a voxel at most one term, of magnitude <= A_ij times
// the LOR's summed |y| over its TOF bins (lor_math.h BackLor). S = 2^e with
// e = 62 - E where B = m 2^E, m in [0.5, 1): S * B < 2^62, half of int64's
// range, so no sum can overflow even with every term's rounding added
// (and two's complement wraps mod 2^64 anyway: only the final sum must fit).
// sum |y| is a fixed-order double reduction (deterministic, so S is too).
//
// Error: each term c becomes llrint(c * S) (c * S is exact in float, S being
// a power of two; round-half-even is deterministic), off by <= 0.5 / S, so a
// voxel with N terms has
//   |acc / S - sum of its float terms| <= N / (2 S) <= N B 2^-62,
// then one float rounding (0.5 ulp) in the conversion. Relative to one float
// ulp of the voxel's value x that is N (B / |x|) 2^-39 ulp: 2e-3 ulp for
// N = 1e3 terms and a voxel 1e-6 of B (realistic sums are far below one ulp),
// whereas the float atomic scatter rounds each of its N additions. The result
// is thus the correctly rounded sum of the same float terms the float scatter
// adds, except within N B 2^-62 of a rounding midpoint. Voxels below ~1e-9 B
// keep an absolute accuracy of N B 2^-62 only (the bound is global, not per
// voxel).
//
// Non-finite y (NaN or Inf anywhere in the range) gives a non-finite bound:
// every voxel of the result is NaN (loud rather than silently wrong integers).
#ifndef TESSERA_KERNELS_RECONSTRUCTION_PET_FIXED_POINT_H_
#define TESSERA_KERNELS_RECONSTRUCTION_PET_FIXED_POINT_H_

#include <math.h>

#include <cstdint>

#include "kernels/reconstruction/geometry.h"
#include "kernels/reconstruction/pet/lor_math.h"

namespace tessera {
namespace recon {
namespace pet {

// S * B < 2^kFixedPointBits.
constexpr int kFixedPointBits = 62;
// S stays a normal float with a normal float inverse: e in [-126, 126].
// e < -126 would need B >= 2^188 (impossible from float data and sane sizes):
// treated as non-finite. e > 126 (B < 2^-64) is clamped: terms below 2^-127
// round to 0.
constexpr int kFixedPointMinExponent = -126;
constexpr int kFixedPointMaxExponent = 126;

struct FixedPointScale {
  float scale;      // S = 2^exponent
  float inv_scale;  // 1 / S
  int exponent;
  int finite;       // 0: the bound was NaN, Inf or too large: the result is NaN
};

// S for a bound B on the magnitude of every voxel's (partial) sum.
TESSERA_RECON_HD inline FixedPointScale ChooseFixedPointScale(double bound) {
  FixedPointScale f;
  f.finite = (bound >= 0.0 && bound <= 1.7976931348623157e308) ? 1 : 0;  // false for NaN
  int e = kFixedPointBits;
  if (f.finite && bound > 0.0) {
    int E = 0;
    frexp(bound, &E);
    e = kFixedPointBits - E;
  }
  if (e < kFixedPointMinExponent) {
    f.finite = 0;
    e = kFixedPointMinExponent;
  }
  if (e > kFixedPointMaxExponent) e = kFixedPointMaxExponent;
  f.exponent = e;
  f.scale = ldexpf(1.0f, e);
  f.inv_scale = ldexpf(1.0f, -e);
  return f;
}

// W: an upper bound on any entry of A (attenuation <= 1, tap and TOF weights
// <= 1): the step h_a / |d_a| of a ray along its dominant axis a, where
// |d_a| >= 1 / sqrt(D) (D = 2 or 3 axes); 1e-3 of slack covers float rounding
// of the direction and of the terms.
inline double FixedPointWeightBound(const GridParams& g) {
  const int axes = g.is_2d ? 2 : 3;
  double h = 0.0;
  for (int a = 0; a < axes; ++a) h = h > g.h[a] ? h : static_cast<double>(g.h[a]);
  return 1.001 * sqrt(static_cast<double>(axes)) * h;
}

// round(value * S) to nearest, ties to even.
TESSERA_RECON_HD inline long long ToFixed(float value, float scale) {
#if defined(__CUDA_ARCH__)
  return __float2ll_rn(value * scale);
#else
  return llrintf(value * scale);
#endif
}

// The accumulated integer (two's complement in 64 bits) as a float: one
// rounding (int64 -> float, to nearest), then an exact power-of-two scaling.
TESSERA_RECON_HD inline float FromFixed(unsigned long long acc, const FixedPointScale& f) {
  if (!f.finite) return NAN;
#if defined(__CUDA_ARCH__)
  return __ll2float_rn(static_cast<long long>(acc)) * f.inv_scale;
#else
  return static_cast<float>(static_cast<long long>(acc)) * f.inv_scale;
#endif
}

}  // namespace pet
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_PET_FIXED_POINT_H_
