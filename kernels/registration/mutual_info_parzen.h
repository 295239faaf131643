// Parzen-window arithmetic shared by the CPU reference (mutual_info_cpu.cc)
// and the CUDA kernels (mutual_info.cu, mutual_info_unfused.cu), so both
// compute the same windows. Internal to kernels/registration.
#ifndef TESSERA_KERNELS_REGISTRATION_MUTUAL_INFO_PARZEN_H_
#define TESSERA_KERNELS_REGISTRATION_MUTUAL_INFO_PARZEN_H_

#include <cmath>

#if defined(__CUDACC__)
#define TESSERA_MI_HD __host__ __device__ __forceinline__
#else
#define TESSERA_MI_HD inline
#endif

namespace tessera {
namespace mi_internal {

// Maps an intensity to the continuous bin coordinate t in [1, B-3]:
// x = (v - lo) * inv_range, clamped to [0, 1]; t = 1 + x * span, span = B - 4.
// *inside is true when x was strictly inside (0, 1): only then dt/dv != 0.
template <typename T>
TESSERA_MI_HD T BinCoord(T v, T lo, T inv_range, T span, bool* inside) {
  T x = (v - lo) * inv_range;
  *inside = x > T(0) && x < T(1);
  x = x < T(0) ? T(0) : (x > T(1) ? T(1) : x);
  return T(1) + x * span;
}

// Cubic B-spline window at t: bins start..start+3 (start = floor(t) - 1, so
// 0 <= start <= B-4 for t in [1, B-3]) with weights beta3(start + i - t).
template <typename T>
TESSERA_MI_HD int CubicWeights(T t, T w[4]) {
  const T fl = floor(t);
  const T f = t - fl;
  const T g = T(1) - f;
  const T f2 = f * f;
  const T f3 = f2 * f;
  w[0] = g * g * g * T(1.0 / 6.0);
  w[1] = (T(4) - T(6) * f2 + T(3) * f3) * T(1.0 / 6.0);
  w[2] = (T(1) + T(3) * f + T(3) * f2 - T(3) * f3) * T(1.0 / 6.0);
  w[3] = f3 * T(1.0 / 6.0);
  return static_cast<int>(fl) - 1;
}

// As CubicWeights, plus dw[i] = d/dt beta3(start + i - t).
template <typename T>
TESSERA_MI_HD int CubicWeightsAndDerivatives(T t, T w[4], T dw[4]) {
  const int start = CubicWeights(t, w);
  const T f = t - floor(t);
  const T g = T(1) - f;
  dw[0] = T(-0.5) * g * g;
  dw[1] = T(-2) * f + T(1.5) * f * f;
  dw[2] = T(0.5) + f - T(1.5) * f * f;
  dw[3] = T(0.5) * f * f;
  return start;
}

// Box (zero-order B-spline) window: the one bin nearest to t, weight 1.
template <typename T>
TESSERA_MI_HD int BoxBin(T t) {
  return static_cast<int>(floor(t + T(0.5)));
}

}  // namespace mi_internal
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_MUTUAL_INFO_PARZEN_H_
