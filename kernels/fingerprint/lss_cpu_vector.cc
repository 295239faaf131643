// The vectorizable loops of the CPU LSS-R (see lss_cpu.cc). GCC builds one
// clone per ISA level (AVX-512, AVX2, baseline) and picks one at load time;
// every clone does the same IEEE operations per element (no FMA contraction:
// -ffp-contract=off), so all give the scalar reference's floats. Kept apart
// from lss_cpu.cc, whose "#pragma GCC target" would suppress the clones.
#include "kernels/fingerprint/fp_math.h"
#include "kernels/fingerprint/lss.h"
#include "kernels/fingerprint/lss_impl.h"

namespace tessera {
namespace fingerprint {
namespace cpu {
namespace lss_vector {

// rho(t, k) for every k of one row t: the probe relations (t -> k) are given
// (ad, adir, arad), the gallery ones computed from the coordinates. The same
// values as lss_internal::RhoFromGeometry, without its early exits, so the
// loop vectorizes (one clone per ISA level).
__attribute__((target_clones("avx512f", "avx2", "default"), noinline)) void RhoRow(
    int p, const float* __restrict ad, const float* __restrict adir, const float* __restrict arad,
    const float* __restrict gx, const float* __restrict gy, const float* __restrict gt, float xt, float yt, float tt,
    const LssConstants& c, float* __restrict out) {
  for (int k = 0; k < p; ++k) {
    const float d1 = fabsf(ad[k] - lss_internal::PairDistance(xt, yt, gx[k], gy[k]));
    const float d2 = fabsf(fpmath::AngleDiffF(adir[k], lss_internal::PairDirection(tt, gt[k])));
    const float d3 = fabsf(fpmath::AngleDiffF(arad[k], lss_internal::PairRadial(xt, yt, tt, gx[k], gy[k])));
    out[k] = lss_internal::RhoValue(d1, d2, d3, c);
  }
}

// One relaxation step for all t < stride: next[t] = Relaxed(lambda[t],
// sum_{k < p} rho(t, k) lambda[k]), rho(t, k) = rho_t[k * stride + t]; each
// sum runs over k in ascending order.
__attribute__((target_clones("avx512f", "avx2", "default"), noinline)) void RelaxStep(
    int p, int stride, const float* __restrict rho_t, const float* __restrict lambda, float denominator,
    const LssConstants& c, float* __restrict sum, float* __restrict next) {
  for (int t = 0; t < stride; ++t) sum[t] = 0.0f;
  for (int k = 0; k < p; ++k) {
    const float* col = rho_t + static_cast<size_t>(k) * stride;
    const float lk = lambda[k];
    for (int t = 0; t < stride; ++t) sum[t] = sum[t] + fpmath::Mul(col[t], lk);
  }
  for (int t = 0; t < stride; ++t) next[t] = lss_internal::Relaxed(lambda[t], sum[t], denominator, c);
}

}  // namespace lss_vector
}  // namespace cpu
}  // namespace fingerprint
}  // namespace tessera
