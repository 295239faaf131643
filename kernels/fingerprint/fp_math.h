// Deterministic scalar math shared by the CPU reference and the CUDA kernels
// of MCC and LSS(-R), so both produce bit-identical descriptors and scores.
//
// Why: nvcc fuses a*b+c into FMA and CUDA's exp/erf/atan2 differ from glibc
// in the last bits; a cell value that lands on either side of the threshold
// muPsi, or a tie in a top-k selection, would then differ between backends.
// Here every product goes through Mul (__fmul_rn/__dmul_rn on the device,
// which are never contracted; plain multiplication on the host, built with
// -ffp-contract=off), additions, divisions and square roots are IEEE
// round-to-nearest on both sides, and exp, erf and atan2 are our own
// polynomial/series evaluations made of those operations only. Cosines and
// sines of minutia angles are computed once on the host and passed in.
#ifndef TESSERA_KERNELS_FINGERPRINT_FP_MATH_H_
#define TESSERA_KERNELS_FINGERPRINT_FP_MATH_H_

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define TESSERA_FP_HD __host__ __device__ __forceinline__
#else
#define TESSERA_FP_HD inline
#endif

namespace tessera {
namespace fingerprint {
namespace fpmath {

inline constexpr double kPi = 3.14159265358979323846;
inline constexpr double kTwoPi = 6.28318530717958647692;
inline constexpr float kPiF = 3.14159265358979323846f;
inline constexpr float kTwoPiF = 6.28318530717958647692f;

TESSERA_FP_HD double Mul(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

TESSERA_FP_HD float Mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

// exp(x) for double x: Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2, and
// a degree-13 Taylor polynomial (relative error < 2e-16 before scaling).
// Returns 0 below -745 and +inf above 709.
TESSERA_FP_HD double Exp(double x) {
  if (x < -745.0) return 0.0;
  if (x > 709.0) return HUGE_VAL;
  constexpr double kInvLn2 = 1.4426950408889634074;
  constexpr double kLn2Hi = 6.93147180369123816490e-01;  // 32 significant bits: n * kLn2Hi is exact
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  const double n = floor(Mul(x, kInvLn2) + 0.5);
  const double r = (x - Mul(n, kLn2Hi)) - Mul(n, kLn2Lo);
  // Horner for sum_{k=0}^{13} r^k / k!
  double p = 1.0 / 6227020800.0;  // 1/13!
  p = Mul(p, r) + 1.0 / 479001600.0;
  p = Mul(p, r) + 1.0 / 39916800.0;
  p = Mul(p, r) + 1.0 / 3628800.0;
  p = Mul(p, r) + 1.0 / 362880.0;
  p = Mul(p, r) + 1.0 / 40320.0;
  p = Mul(p, r) + 1.0 / 5040.0;
  p = Mul(p, r) + 1.0 / 720.0;
  p = Mul(p, r) + 1.0 / 120.0;
  p = Mul(p, r) + 1.0 / 24.0;
  p = Mul(p, r) + 1.0 / 6.0;
  p = Mul(p, r) + 0.5;
  p = Mul(p, r) + 1.0;
  p = Mul(p, r) + 1.0;
  return ldexp(p, static_cast<int>(n));
}

// floor(v) for |v| < 2^22 by truncation (vectorizes without SSE4.1 / fast-math).
TESSERA_FP_HD float FloorSmallF(float v) {
  const float t = static_cast<float>(static_cast<int>(v));
  return t > v ? t - 1.0f : t;
}

// 2^n for integer n in [-126, 127], exactly.
TESSERA_FP_HD float Pow2F(int n) {
  const uint32_t bits = static_cast<uint32_t>(n + 127) << 23;
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  return __builtin_bit_cast(float, bits);
#endif
}

// exp(x) for float x in [-87, 88] (the caller clamps): Cody-Waite reduction
// and a degree-7 polynomial (relative error < 3e-7). Branch-free, no
// constants that the optimizer could fold into branches, so loops vectorize.
TESSERA_FP_HD float ExpFInRange(float x) {
  constexpr float kInvLn2 = 1.44269504f;
  constexpr float kLn2Hi = 0.693145752f;  // 16 significant bits
  constexpr float kLn2Lo = 1.42860677e-06f;
  const float n = FloorSmallF(Mul(x, kInvLn2) + 0.5f);
  const float r = (x - Mul(n, kLn2Hi)) - Mul(n, kLn2Lo);
  float p = 1.0f / 5040.0f;
  p = Mul(p, r) + 1.0f / 720.0f;
  p = Mul(p, r) + 1.0f / 120.0f;
  p = Mul(p, r) + 1.0f / 24.0f;
  p = Mul(p, r) + 1.0f / 6.0f;
  p = Mul(p, r) + 0.5f;
  p = Mul(p, r) + 1.0f;
  p = Mul(p, r) + 1.0f;
  return Mul(p, Pow2F(static_cast<int>(n)));
}

// exp(x) for any float x: 0 below -87, +inf above 88.
TESSERA_FP_HD float ExpF(float x) {
  const float xc = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  const float v = ExpFInRange(xc);
  return x < -87.0f ? 0.0f : (x > 88.0f ? HUGE_VALF : v);
}

// erf(x): for |x| < 2.5 the Maclaurin series 2/sqrt(pi) x sum_n c_n x^(2n),
// c_n = (-1)^n / (n! (2n+1)), 40 terms by Horner (absolute error < 1e-14;
// the last term is below 1e-17); else 1 - erfc(x) with a 60-term continued
// fraction (absolute error < 1e-15 for |x| >= 2.5). Odd.
TESSERA_FP_HD double Erf(double x) {
  const double ax = fabs(x);
  double result;
  if (ax < 2.5) {
    constexpr double kC[40] = {
      1.00000000000000000e+00,
      -3.33333333333333315e-01,
      1.00000000000000006e-01,
      -2.38095238095238082e-02,
      4.62962962962962937e-03,
      -7.57575757575757575e-04,
      1.06837606837606838e-04,
      -1.32275132275132281e-05,
      1.45891690009337058e-06,
      -1.45038522231504685e-07,
      1.31225329638028058e-08,
      -1.08922210371485731e-09,
      8.35070279514723971e-11,
      -5.94779401363763541e-12,
      3.95542951645852569e-13,
      -2.46682701026445706e-14,
      1.44832646435981379e-15,
      -8.03273501241577328e-17,
      4.22140728880708822e-18,
      -2.10785519144213592e-19,
      1.00251649349077191e-20,
      -4.55184675892819988e-22,
      1.97706475387790510e-23,
      -8.23014929921422104e-25,
      3.28926034917575191e-26,
      -1.26410789889891639e-27,
      4.67848351551848558e-29,
      -1.66976179341737213e-30,
      5.75419164398217174e-32,
      -1.91694286210978258e-33,
      6.18030758822279615e-35,
      -1.93035720881510799e-36,
      5.84675500746883582e-38,
      -1.71885606280178354e-39,
      4.90892396452342322e-41,
      -1.36304126177913957e-42,
      3.68249351546114568e-44,
      -9.68728023887076111e-46,
      2.48306909745491176e-47,
      -6.20565791963739693e-49};
    const double y = Mul(ax, ax);
    double p = kC[39];
#if defined(__CUDACC__)
#pragma unroll
#endif
    for (int n = 38; n >= 0; --n) p = Mul(p, y) + kC[n];
    result = Mul(Mul(p, ax), 1.12837916709551257390);  // 2/sqrt(pi)
  } else {
    // erfc(x) = exp(-x^2)/sqrt(pi) * 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + 2/(x + ...)))))
    double f = ax;
    for (int k = 60; k >= 1; --k) f = ax + Mul(0.5, static_cast<double>(k)) / f;
    const double erfc = Mul(Exp(-Mul(ax, ax)), 0.56418958354775628695) / f;  // 1/sqrt(pi)
    result = 1.0 - erfc;
  }
  return x < 0 ? -result : result;
}

// atan2(y, x) in (-pi, pi], a degree-11 odd minimax polynomial on [0, 1]
// after octant reduction (absolute error < 5e-6 rad). atan2(0, 0) = 0.
// Branch-free.
TESSERA_FP_HD float Atan2F(float y, float x) {
  const float ax = fabsf(x), ay = fabsf(y);
  const float hi = ax > ay ? ax : ay, lo = ax > ay ? ay : ax;
  const float t = lo / (hi == 0.0f ? 1.0f : hi);
  const float s = Mul(t, t);
  float p = -0.013480470f;
  p = Mul(p, s) + 0.057477314f;
  p = Mul(p, s) - 0.121239071f;
  p = Mul(p, s) + 0.195635925f;
  p = Mul(p, s) - 0.332994597f;
  p = Mul(p, s) + 0.999995630f;
  float a = Mul(p, t);
  a = ay > ax ? 1.57079637f - a : a;
  a = x < 0.0f ? kPiF - a : a;
  return y < 0.0f ? -a : a;
}

// Difference a - b of two angles wrapped into [-pi, pi) (the paper's d_phi).
TESSERA_FP_HD double AngleDiff(double a, double b) {
  double d = a - b;
  if (d < -kPi) d = d + kTwoPi;
  else if (d >= kPi) d = d - kTwoPi;
  return d;
}
TESSERA_FP_HD float AngleDiffF(float a, float b) {
  const float d = a - b;
  // d - 2 pi * {-1, 0, 1}: arithmetic instead of branches, so loops vectorize.
  const float turns = static_cast<float>(static_cast<int>(d >= kPiF) - static_cast<int>(d < -kPiF));
  return d - Mul(kTwoPiF, turns);
}


// 1 + exp(-tau (v - mu)), the exponent clamped to [lo, hi] (within
// [-87, 88]): the sigmoid Z(v, mu, tau) is its reciprocal. The bounds are
// arguments (runtime values) rather than constants so that GCC does not turn
// the clamp into branches, which would stop loops over it from vectorizing.
TESSERA_FP_HD float SigmoidDenominatorF(float v, float mu, float tau, float lo, float hi) {
  const float a = -Mul(tau, v - mu);
  const float ac = a < lo ? lo : (a > hi ? hi : a);
  return 1.0f + ExpFInRange(ac);
}

}  // namespace fpmath
}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_KERNELS_FINGERPRINT_FP_MATH_H_
