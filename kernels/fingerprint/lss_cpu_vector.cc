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

// rho(t, k) for every k < p of one row t (pair t: probe minutia rt, gallery
// coordinates (xt, yt, tt)); pair k's probe minutia is rows[k] and its
// gallery coordinates (gx, gy, gt)[k]. The probe relations come from the
// probe's n x n tables (gathered), the gallery ones are computed. The same
// values as lss_internal::RhoFromGeometry, without its early exits, so the
// loop vectorizes (one clone per ISA level). rows/gx/gy/gt are padded to p
// (a multiple of 16) with valid indices.
__attribute__((target_clones("avx512f", "avx2", "default"), noinline)) void RhoRow(
    int p, int rt, int n, const int* __restrict rows, const float* __restrict pair_dist,
    const float* __restrict pair_dir, const float* __restrict pair_radial, const float* __restrict gx,
    const float* __restrict gy, const float* __restrict gt, float xt, float yt, float tt, const LssConstants& c,
    float* __restrict out) {
  const float* dist = pair_dist + static_cast<size_t>(rt) * n;
  const float* dir = pair_dir + static_cast<size_t>(rt) * n;
  const float* rad = pair_radial + static_cast<size_t>(rt) * n;
  for (int k = 0; k < p; ++k) {
    const int rk = rows[k];
    const float d1 = fabsf(dist[rk] - lss_internal::PairDistance(xt, yt, gx[k], gy[k]));
    const float d2 = fabsf(fpmath::AngleDiffF(dir[rk], lss_internal::PairDirection(tt, gt[k])));
    const float d3 = fabsf(fpmath::AngleDiffF(rad[rk], lss_internal::PairRadial(xt, yt, tt, gx[k], gy[k])));
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
