// LSS / LSS-R arithmetic shared by lss_cpu.cc and lss.cu (internal): the same
// float operations in the same order on both backends.
#ifndef TESSERA_KERNELS_FINGERPRINT_LSS_IMPL_H_
#define TESSERA_KERNELS_FINGERPRINT_LSS_IMPL_H_

#include "kernels/fingerprint/fp_math.h"
#include "kernels/fingerprint/lss.h"

namespace tessera {
namespace fingerprint {
namespace lss_internal {

TESSERA_FP_HD bool DirectionsMatchable(float theta_a, float theta_b, const LssConstants& c) {
  return fabsf(fpmath::AngleDiffF(theta_a, theta_b)) <= c.delta_theta;
}

// lambda from |c_a|, |c_b| and |a & b|.
TESSERA_FP_HD float LambdaFromCounts(int na, int nb, int nab) {
  if (na + nb == 0) return 0.0f;
  const int nx = na + nb - 2 * nab;
  return 1.0f - sqrtf(static_cast<float>(nx)) / (sqrtf(static_cast<float>(na)) + sqrtf(static_cast<float>(nb)));
}

// rho from the three differences: Z1 Z2 Z3 = 1 / ((1 + e1)(1 + e2)(1 + e3)),
// 0 when a difference is at or beyond its cut. Branch-free.
TESSERA_FP_HD float RhoValue(float d1, float d2, float d3, const LssConstants& c) {
  using fpmath::Mul;
  const float q = Mul(Mul(fpmath::SigmoidDenominatorF(d1, c.mu1, c.tau1, c.exp_lo, c.exp_hi),
                          fpmath::SigmoidDenominatorF(d2, c.mu2, c.tau2, c.exp_lo, c.exp_hi)),
                      fpmath::SigmoidDenominatorF(d3, c.mu3, c.tau3, c.exp_lo, c.exp_hi));
  const float v = 1.0f / q;
  return ((d1 < c.cut1) & (d2 < c.cut2) & (d3 < c.cut3)) ? v : 0.0f;
}

// Relations between two minutiae t, k of one template (the parts of rho that
// depend on one template only): the distance |m_k - m_t|, the direction
// difference dphi(theta_t, theta_k) and the radial angle dR(m_t, m_k).
struct PairGeometry {
  float dist, dir, radial;
};

TESSERA_FP_HD float PairDistance(float xt, float yt, float xk, float yk) {
  using fpmath::Mul;
  const float dx = xk - xt, dy = yk - yt;
  return sqrtf(Mul(dx, dx) + Mul(dy, dy));
}
TESSERA_FP_HD float PairDirection(float tt, float tk) { return fpmath::AngleDiffF(tt, tk); }
// dR(m_t, m_k) = dphi(theta_t, atan2(y_t - y_k, x_k - x_t))
TESSERA_FP_HD float PairRadial(float xt, float yt, float tt, float xk, float yk) {
  return fpmath::AngleDiffF(tt, fpmath::Atan2F(yt - yk, xk - xt));
}

// The three compatibility factors from the relations in A and in B; rho = 0
// when one of them is below 1e-7 (see lss.h). The second template's
// relations are passed lazily through `b` (a functor with dist(), dir(),
// radial()) so that rejected pairs skip the atan2.
template <typename LazyB>
TESSERA_FP_HD float RhoFromGeometry(const PairGeometry& a, LazyB& b, const LssConstants& c) {
  using fpmath::AngleDiffF;
  using fpmath::Mul;
  const float d1 = fabsf(a.dist - b.dist());
  if (d1 >= c.cut1) return 0.0f;
  const float d2 = fabsf(AngleDiffF(a.dir, b.dir()));
  if (d2 >= c.cut2) return 0.0f;
  const float d3 = fabsf(AngleDiffF(a.radial, b.radial()));
  if (d3 >= c.cut3) return 0.0f;
  return RhoValue(d1, d2, d3, c);
}

// Geometry of (x_t, y_t, theta_t) -> (x_k, y_k, theta_k), computed on demand.
struct LazyGeometry {
  float xt, yt, tt, xk, yk, tk;
  TESSERA_FP_HD float dist() const { return PairDistance(xt, yt, xk, yk); }
  TESSERA_FP_HD float dir() const { return PairDirection(tt, tk); }
  TESSERA_FP_HD float radial() const { return PairRadial(xt, yt, tt, xk, yk); }
};

TESSERA_FP_HD PairGeometry Geometry(float xt, float yt, float tt, float xk, float yk, float tk) {
  return PairGeometry{PairDistance(xt, yt, xk, yk), PairDirection(tt, tk), PairRadial(xt, yt, tt, xk, yk)};
}

// rho(t, k) for pairs (a_t, b_t) and (a_k, b_k).
TESSERA_FP_HD float Rho(float xat, float yat, float tat, float xak, float yak, float tak, float xbt, float ybt,
                        float tbt, float xbk, float ybk, float tbk, const LssConstants& c) {
  const PairGeometry a = Geometry(xat, yat, tat, xak, yak, tak);
  LazyGeometry b{xbt, ybt, tbt, xbk, ybk, tbk};
  return RhoFromGeometry(a, b, c);
}

// One relaxation update of lambda_t given the sum over k != t.
TESSERA_FP_HD float Relaxed(float lambda_t, float support_sum, float denominator, const LssConstants& c) {
  using fpmath::Mul;
  return Mul(c.w_r, lambda_t) + Mul(c.one_minus_w_r, support_sum / denominator);
}

// Sort key of a local similarity: larger value first, then lower flat index.
// Positive floats order like their bit patterns.
TESSERA_FP_HD bool KeyBefore(float va, int ia, float vb, int ib) { return va > vb || (va == vb && ia < ib); }

}  // namespace lss_internal
}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_KERNELS_FINGERPRINT_LSS_IMPL_H_
