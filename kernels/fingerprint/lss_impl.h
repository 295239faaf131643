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

// --- Upper bound of a score, for pruning -------------------------------------
// Bucket of a local similarity v in (0, 1] for the value histogram the bound
// reads: v * 256 is exact (a power of two), so every v in bucket b satisfies
// v < (b + 1) / 256 (bucket 256 holds v = 1 only).
constexpr int kValueBuckets = 257;
TESSERA_FP_HD int ValueBucket(float v) {
  const int b = static_cast<int>(v * 256.0f);
  return b < 256 ? b : 256;
}

// Upper bound of the sum of the `count` largest values counted in `hist`
// (kValueBuckets buckets), in units of 1/256: every value is at most its
// bucket's upper edge (b + 1) / 256. Integer arithmetic, so exact.
TESSERA_FP_HD int TopSumFromHistogram256(const int* hist, int count) {
  int sum = 0;
  for (int b = kValueBuckets - 1; b >= 0 && count > 0; --b) {
    const int take = hist[b] < count ? hist[b] : count;
    sum += take * (b + 1);
    count -= take;
  }
  return sum;
}

// An upper bound of the LSS-R score (kind LSS-R) or the LSS score of a
// comparison from what is known right after the local similarities:
//   n_min = min(nA, nB), n_pos = positive local similarities,
//   top_keep = (an upper bound of) the sum of the min(nP, p) largest of them,
//   top_p = (an upper bound of) the sum of the p = min(n_min, n_pos) largest.
// Only scores that cannot be below it are exact; the caller skips the rest of
// the comparison (selection, rho, relaxation) when it is below the running
// threshold. The value is monotone in top_keep and top_p, so upper bounds of
// them give an upper bound.
//
// Proof (LSS-R). Let lambda0_t > 0 (t < p) be the selected similarities,
// c = (1 - wR) / (n_min - 1) and S = sum_t lambda0_t <= top_p. One relaxation
// step is lambda'_t = wR lambda_t + c sum_{k != t} rho(t, k) lambda_k with
// 0 <= rho <= 1 (rho = 1 / ((1 + e1)(1 + e2)(1 + e3)), each factor >= 1, so the
// float value is <= 1 too; rho(t, t) = 0) and every lambda >= 0. With wR, c >= 0
// the map is monotone in every lambda_k, so lambda^(i) <= u^(i) elementwise for
//   u^(0) = lambda0,  u^(i+1)_t = wR u_t + c (sum_k u_k - u_t)   (rho := 1).
// Summing, sum_k u^(i)_k = g^i S with g = wR + c (p - 1); with a = wR - c,
//   u^(T)_t = a^T lambda0_t + K S,  K = c sum_{i<T} a^(T-1-i) g^i
// (K_0 = 0, K_{i+1} = a K_i + c g^i). The score sums keep = min(nP, p) relaxed
// values (whichever the efficiency picks) over nP, so it is at most
//   (|a|^T top_keep + keep max(K, 0) top_p) / nP.
// Without relaxation (n_min = 1 or T = 0) it is at most top_keep / nP; LSS is
// exactly (the float sum of) the nP largest over nP, also <= top_keep / nP.
// Float rounding: every quantity is a sum of nonnegative terms, each float
// operation (multiply, add, divide) rounds up by at most a factor (1 + 2^-24);
// one relaxation step for one t performs p + 3 of them in a chain (p - 1 adds,
// the rho * lambda product, the division, wR * lambda, (1 - wR) * ..., the
// add), the final sum keep - 1 adds and a division: the float score is at most
// (1 + 2^-24)^E times the real bound, E = T (n_min + 3) + nP + 2. We multiply
// by 1 + E 2^-22 >= (1 + 2^-24)^E (for E 2^-24 < 0.1), which also covers the
// double rounding of this function (relative 1e-15 per operation).
TESSERA_FP_HD double ScoreUpperBound(bool relaxed, int n_min, int n_pos, int top_keep_256, int top_p_256,
                                     const LssConstants& c) {
  const int np = c.np_table[n_min];
  const int p = n_pos < n_min ? n_pos : n_min;
  if (p <= 0 || np <= 0) return 0.0;
  const int keep = np < p ? np : p;
  const double top_keep = top_keep_256 / 256.0, top_p = top_p_256 / 256.0;
  int ops = np + 2;
  double bound = top_keep;
  if (relaxed && n_min > 1 && c.relaxation_iterations > 0) {
    const double w = c.w_r, cc = static_cast<double>(c.one_minus_w_r) / (n_min - 1);
    if (!(w >= 0.0) || !(cc >= 0.0)) return 1e300;  // not monotone: no bound (never prune)
    const double a = w - cc, g = w + cc * (p - 1);
    double a_pow = 1.0, g_pow = 1.0, k = 0.0;
    for (int i = 0; i < c.relaxation_iterations; ++i) {
      k = a * k + cc * g_pow;
      g_pow *= g;
      a_pow *= a < 0 ? -a : a;
    }
    bound = a_pow * top_keep + keep * (k > 0.0 ? k : 0.0) * top_p;
    ops += c.relaxation_iterations * (n_min + 3);
  }
  return bound / np * (1.0 + ops * (1.0 / 4194304.0));  // 2^-22 per operation
}

// ScoreUpperBound from the value histogram of the n_pos positive local
// similarities (ValueBucket; kValueBuckets counts). LSS sums the min(nP, n_pos)
// largest, LSS-R relaxes the p = min(n_min, n_pos) largest and sums min(nP, p).
TESSERA_FP_HD double HistogramScoreUpperBound(const int* hist, bool relaxed, int n_min, int n_pos,
                                              const LssConstants& c) {
  const int np = c.np_table[n_min];
  const int p = relaxed ? (n_pos < n_min ? n_pos : n_min) : n_pos;
  const int keep = np < p ? np : p;
  return ScoreUpperBound(relaxed, n_min, n_pos, TopSumFromHistogram256(hist, keep), TopSumFromHistogram256(hist, p),
                         c);
}

// An upper bound of the LSS-R score once rho is known, before the
// relaxation: max_lambda0 = the largest selected similarity, max_row_sum =
// max_t sum_k rho(t, k) (the float rho values the relaxation uses, rho(t, t)
// = 0). Proof: with c = (1 - wR) / (n_min - 1) and wR, c >= 0, one step gives
//   lambda'_t = wR lambda_t + c sum_k rho(t, k) lambda_k <= (wR + c R) max_k lambda_k,
// so after T steps every lambda is at most (wR + c R)^T max_lambda0 and the
// score (keep = min(nP, p) of them over nP) at most keep (wR + c R)^T
// max_lambda0 / nP. Float rounding as in ScoreUpperBound. Incompatible pairs
// (impostors) have small row sums, so this bound is close to their scores,
// unlike ScoreUpperBound's rho = 1.
TESSERA_FP_HD double RelaxedScoreUpperBound(double max_lambda0, double max_row_sum, int p, int n_min,
                                            const LssConstants& c) {
  const int np = c.np_table[n_min];
  if (p <= 0 || np <= 0) return 0.0;
  const int keep = np < p ? np : p;
  const double w = c.w_r, cc = static_cast<double>(c.one_minus_w_r) / (n_min > 1 ? n_min - 1 : 1);
  if (!(w >= 0.0) || !(cc >= 0.0)) return 1e300;  // not monotone: never prune
  const double factor = w + cc * max_row_sum;
  double m = max_lambda0;
  for (int i = 0; i < c.relaxation_iterations; ++i) m *= factor;
  const int ops = c.relaxation_iterations * (n_min + 3) + np + 2;
  return keep * m / np * (1.0 + ops * (1.0 / 4194304.0));
}

}  // namespace lss_internal
}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_KERNELS_FINGERPRINT_LSS_IMPL_H_
