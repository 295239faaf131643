// DMC kernels 2-4, per-thread code shared by dmc_cpu.cc and dmc.cu
// (internal): the same float operations in the same order on both backends
// (fp_math.h rules), so outputs are bit-identical.
#ifndef TESSERA_KERNELS_FINGERPRINT_DMC_IMPL_H_
#define TESSERA_KERNELS_FINGERPRINT_DMC_IMPL_H_

#include "kernels/fingerprint/dmc.h"
#include "kernels/fingerprint/fp_math.h"
#include "kernels/fingerprint/lss_impl.h"

namespace tessera {
namespace fingerprint {
namespace dmc_internal {

#if defined(__CUDA_ARCH__)
#define TESSERA_DMC_POPCOUNT(v) __popcll(v)
#else
#define TESSERA_DMC_POPCOUNT(v) __builtin_popcountll(v)
#endif

// cos and sin of x (|x| < 2^20) by quadrant reduction, r = x - n pi/2 in
// [-pi/4, pi/4] (Cody-Waite, pi/2 split in two), and Taylor polynomials of
// degree 10 / 11 (error < 1e-9 before rounding). Deterministic: fp_math.h's
// operations only (the library's cosf/sinf differ between host and device).
TESSERA_FP_HD void CosSinF(float x, float* c, float* s) {
  using fpmath::Mul;
  constexpr float kTwoOverPi = 0.636619772f;
  constexpr float kPiOver2Hi = 1.5703125f;  // 8 significant bits: n * hi is exact
  constexpr float kPiOver2Lo = 4.83826794897e-04f;
  const float n = fpmath::FloorSmallF(Mul(x, kTwoOverPi) + 0.5f);
  const float r = (x - Mul(n, kPiOver2Hi)) - Mul(n, kPiOver2Lo);
  const float r2 = Mul(r, r);
  float ps = -1.0f / 39916800.0f;  // -1/11!
  ps = Mul(ps, r2) + 1.0f / 362880.0f;
  ps = Mul(ps, r2) - 1.0f / 5040.0f;
  ps = Mul(ps, r2) + 1.0f / 120.0f;
  ps = Mul(ps, r2) - 1.0f / 6.0f;
  const float sr = r + Mul(Mul(ps, r2), r);
  float pc = -1.0f / 3628800.0f;  // -1/10!
  pc = Mul(pc, r2) + 1.0f / 40320.0f;
  pc = Mul(pc, r2) - 1.0f / 720.0f;
  pc = Mul(pc, r2) + 1.0f / 24.0f;
  pc = Mul(pc, r2) - 0.5f;
  const float cr = 1.0f + Mul(pc, r2);
  const int q = static_cast<int>(n) & 3;  // two's complement: also right for n < 0
  // q = 0: (cr, sr); 1: (-sr, cr); 2: (-cr, -sr); 3: (sr, -cr)
  const float cq = (q & 1) ? sr : cr;
  const float sq = (q & 1) ? cr : sr;
  *c = (q == 1 || q == 2) ? -cq : cq;
  *s = (q >= 2) ? -sq : sq;
}

// LUT_D bin of a direction: floor(wrap(theta) * z / 2 pi), clamped.
TESSERA_FP_HD int DirectionBin(float theta) {
  using fpmath::Mul;
  const float turns = fpmath::FloorSmallF(Mul(theta, 0.159154943f));  // 1 / 2 pi
  const float wrapped = theta - Mul(turns, fpmath::kTwoPiF);
  const int b = static_cast<int>(Mul(wrapped, static_cast<float>(kDmcLutBins) * 0.159154943f));
  return b < 0 ? 0 : (b >= kDmcLutBins ? kDmcLutBins - 1 : b);
}

// Template of batch cylinder i: the largest t with start[t] <= i.
TESSERA_FP_HD int TemplateOf(const int32_t* start, int num_templates, int i) {
  int lo = 0, hi = num_templates - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (start[mid] <= i) lo = mid; else hi = mid - 1;
  }
  return lo;
}

// Kernel 2 for one gallery cylinder, given its words (bits: kMccBitWords,
// mask: kMccMaskWords), direction and bit count; the latent accessors come
// from `latent` (bits/mask/theta/bit_count may point to shared memory).
struct LocalMatch {
  int best;
  float similarity;
};
TESSERA_FP_HD LocalMatch MatchOne(const uint64_t* g_bits, const uint64_t* g_mask, float g_theta, int g_count,
                                  const uint64_t* l_bits, const uint64_t* l_mask, const float* l_theta,
                                  const uint16_t* l_count, const int32_t* lut_offset, const int16_t* lut_index,
                                  const DmcConstants& c) {
  const int bin = DirectionBin(g_theta);
  LocalMatch m{-1, 0.0f};
  float best = c.min_similarity;
  for (int q = lut_offset[bin]; q < lut_offset[bin + 1]; ++q) {
    const int l = lut_index[q];
    if (!(fabsf(fpmath::AngleDiffF(l_theta[l], g_theta)) <= c.delta_theta)) continue;
    const uint64_t* lm = l_mask + l * kMccMaskWords;
    int common = 0;
    uint64_t l_out = 0, g_out = 0;
#if defined(__CUDACC__)
#pragma unroll
#endif
    for (int w = 0; w < kMccMaskWords; ++w) {
      common += TESSERA_DMC_POPCOUNT(lm[w] & g_mask[w]);
      l_out |= lm[w] & ~g_mask[w];
      g_out |= g_mask[w] & ~lm[w];
    }
    if (common < c.min_common_cells) continue;
    const uint64_t* lb = l_bits + l * kMccBitWords;
    int nab = 0, nl = 0, ng = 0;
#if defined(__CUDACC__)
#pragma unroll
#endif
    for (int w = 0; w < kMccBitWords; ++w) {
      nab += TESSERA_DMC_POPCOUNT(lb[w] & g_bits[w]);
      if (l_out != 0) nl += TESSERA_DMC_POPCOUNT(lb[w] & g_mask[w % kMccMaskWords]);
      if (g_out != 0) ng += TESSERA_DMC_POPCOUNT(g_bits[w] & lm[w % kMccMaskWords]);
    }
    if (l_out == 0) nl = l_count[l];
    if (g_out == 0) ng = g_count;
    const float v = lss_internal::LambdaFromCounts(nl, ng, nab);
    if (v > best) {  // strict: ties keep the lower l (bins list l ascending)
      best = v;
      m.best = l;
      m.similarity = v;
    }
  }
  return m;
}

// Kernel 3 for cylinder i of a template occupying [begin, end) of x/y/theta.
TESSERA_FP_HD float QualityOne(const float* x, const float* y, const float* theta, int begin, int end, int i,
                               const DmcConstants& c) {
  using fpmath::Mul;
  const float xi = x[i], yi = y[i], ti = theta[i];
  float sum_c = 0.0f, sum_w = 0.0f;
  for (int j = begin; j < end; ++j) {
    const float dx = x[j] - xi, dy = y[j] - yi;
    const float d2 = Mul(dx, dx) + Mul(dy, dy);
    if (j == i || d2 > c.quality_radius2) continue;  // most of the template: skip exp and cos
    const float w = fpmath::ExpF(Mul(d2, c.quality_exp_scale));
    float cs, sn;
    CosSinF(Mul(2.0f, fpmath::AngleDiffF(theta[j], ti)), &cs, &sn);
    sum_c = sum_c + Mul(w, cs);
    sum_w = sum_w + w;
  }
  const float q = 0.5f + Mul(0.5f, sum_c / (sum_w + c.quality_prior));
  return q < 0.0f ? 0.0f : (q > 1.0f ? 1.0f : q);
}

// Kernel 4 for cylinder i of a template occupying [begin, end) of the batch.
// Writes count[i] and members[j * n_total + i]. Every thread runs the whole
// loop (virtual match: latent minutia 0 stands in for a missing one).
TESSERA_FP_HD void ClusterOne(const float* gx, const float* gy, const float* gt, const int16_t* best, int begin,
                              int end, int i, int n_total, const float* lx, const float* ly, const float* lt,
                              const DmcConstants& c, uint8_t* count, uint8_t* members) {
  using fpmath::AngleDiffF;
  using fpmath::Mul;
  const int l = best[i];
  const bool has = l >= 0;
  const int lr = has ? l : 0;
  const float xi = gx[i], yi = gy[i];
  const float xl = lx[lr], yl = ly[lr];
  const float a = AngleDiffF(gt[i], lt[lr]);
  float ca, sa;
  CosSinF(a, &ca, &sa);
  int n = 1;
  members[i] = static_cast<uint8_t>(i - begin);
  for (int k = begin; k < end; ++k) {
    const int lk = best[k];
    const int lkr = lk >= 0 ? lk : 0;
    const float dx = lx[lkr] - xl, dy = ly[lkr] - yl;
    const float px = xi + (Mul(dx, ca) + Mul(dy, sa));
    const float py = yi + (Mul(dy, ca) - Mul(dx, sa));
    const float ex = px - gx[k], ey = py - gy[k];
    const float e2 = Mul(ex, ex) + Mul(ey, ey);
    const float da = fabsf(AngleDiffF(AngleDiffF(lt[lkr], gt[k]), -a));
    const float rx = gx[k] - xi, ry = gy[k] - yi;
    const float r2 = Mul(rx, rx) + Mul(ry, ry);
    const bool ok = has && lk >= 0 && k != i && lk != l && e2 <= c.cluster_distance2 && da <= c.cluster_angle &&
                    r2 <= c.cluster_radius2 && n < kDmcMaxClusterSize;
    if (ok) {
      members[static_cast<size_t>(n) * n_total + i] = static_cast<uint8_t>(k - begin);
      ++n;
    }
  }
  count[i] = has ? static_cast<uint8_t>(n) : 0;
}

}  // namespace dmc_internal
}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_KERNELS_FINGERPRINT_DMC_IMPL_H_
