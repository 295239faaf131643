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

// Column k of rho: out[t] = rho(t, k) for every t < P (pair t: probe minutia
// rows[t], gallery coordinates (gx, gy, gt)[t]); the caller zeroes the
// diagonal t = k. The probe relations of (rows[t], rows[k]) come from the
// probe's n x n tables (gathered), the gallery ones are computed. The same
// values as lss_internal::RhoFromGeometry, without its early exits, so the
// loop vectorizes (one clone per ISA level): about a fifth of the selected
// pairs pass the distance and direction cuts, too many for a compacted second
// pass to pay. rows/gx/gy/gt are padded to P (a multiple of 16) with valid
// indices; padded lanes compute values never used.
__attribute__((target_clones("avx512f", "avx2", "default"), noinline)) void RhoColumn(
    int P, int k, int n, const int* __restrict rows, const float* __restrict pair_dist,
    const float* __restrict pair_dir, const float* __restrict pair_radial, const float* __restrict gx,
    const float* __restrict gy, const float* __restrict gt, const LssConstants& c, float* __restrict out) {
  const int rk = rows[k];
  const float xk = gx[k], yk = gy[k], tk = gt[k];
  for (int t = 0; t < P; ++t) {
    const int ia = rows[t] * n + rk;
    const float xt = gx[t], yt = gy[t], tt = gt[t];
    const float d1 = fabsf(pair_dist[ia] - lss_internal::PairDistance(xt, yt, xk, yk));
    const float d2 = fabsf(fpmath::AngleDiffF(pair_dir[ia], lss_internal::PairDirection(tt, tk)));
    const float d3 = fabsf(fpmath::AngleDiffF(pair_radial[ia], lss_internal::PairRadial(xt, yt, tt, xk, yk)));
    out[t] = lss_internal::RhoValue(d1, d2, d3, c);
  }
}

// rho of the pairs (t, k) that passed the distance and direction cuts
// (lss_cpu.cc, RhoCandidatesAvx512: d1[i], d2[i] as RhoColumn computes them;
// the gallery coordinates of t and k in xt, yt, tt, xk, yk): the radial
// difference d3 and RhoValue, the same float operations as RhoColumn.
// probe_index[i] = rows[t] * n + rows[k]. Every input but pair_radial is
// read in order (no per-lane gathers: on Intel cores GCC's emulated gathers
// are a scalar load and an insert on the shuffle port per lane).
__attribute__((target_clones("avx512f", "avx2", "default"), noinline)) void RhoSparse(
    int count, const int32_t* __restrict probe_index, const float* __restrict d1, const float* __restrict d2,
    const float* __restrict pair_radial, const float* __restrict xt, const float* __restrict yt,
    const float* __restrict tt, const float* __restrict xk, const float* __restrict yk, const LssConstants& c,
    float* __restrict rho) {
  for (int i = 0; i < count; ++i) {
    const float radial = lss_internal::PairRadial(xt[i], yt[i], tt[i], xk[i], yk[i]);
    const float d3 = fabsf(fpmath::AngleDiffF(pair_radial[probe_index[i]], radial));
    rho[i] = lss_internal::RhoValue(d1[i], d2[i], d3, c);
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
