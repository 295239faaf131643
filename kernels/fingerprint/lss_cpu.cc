// CPU reference of the MCC local similarities and the LSS / LSS-R scores
// (also the CPU backend). Bit-identical to lss.cu: same float operations
// (lss_impl.h), same selection rule and summation order.
#if defined(__x86_64__)
#pragma GCC target("popcnt")
#endif

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/fingerprint/fp_math.h"
#include "kernels/fingerprint/lss.h"
#include "kernels/fingerprint/lss_impl.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define TESSERA_FP_AVX512 "avx512f,avx512vl,avx512dq,avx512vpopcntdq"
#endif

namespace tessera {
namespace fingerprint {
namespace cpu {
// Vectorized loops (lss_cpu_vector.cc, compiled without this file's
// "#pragma GCC target", which would suppress their per-ISA clones).
namespace lss_vector {
void RhoColumn(int P, int k, int n, const int* rows, const float* pair_dist, const float* pair_dir,
               const float* pair_radial, const float* gx, const float* gy, const float* gt, const LssConstants& c,
               float* out);
void RelaxStep(int p, int stride, const float* rho_t, const float* lambda, float denominator, const LssConstants& c,
               float* sum, float* next);
void RhoSparse(int count, const int32_t* probe_index, const float* d1, const float* d2, const float* pair_radial,
               const float* xt, const float* yt, const float* tt, const float* xk, const float* yk,
               const LssConstants& c, float* rho);
}  // namespace lss_vector

namespace {

using lss_vector::RelaxStep;
using lss_vector::RhoColumn;

using lss_internal::DirectionsMatchable;
using lss_internal::LambdaFromCounts;

struct Entry {
  float value;
  int index;  // r * nB + c
};

struct EntryKeyBefore {
  bool operator()(const Entry& a, const Entry& b) const {
    return lss_internal::KeyBefore(a.value, a.index, b.value, b.index);
  }
};

inline int Popcount(uint64_t v) { return __builtin_popcountll(v); }

// sqrtf(i) for every possible popcount (correctly rounded, so equal to the
// device's sqrtf).
struct SqrtTable {
  float v[kMccBitWords * 64 + 1];
  SqrtTable() {
    for (int i = 0; i <= kMccBitWords * 64; ++i) v[i] = sqrtf(static_cast<float>(i));
  }
};
const SqrtTable& Sqrts() {
  static const SqrtTable* table = new SqrtTable();
  return *table;
}

// lambda_internal::LambdaFromCounts with table square roots.
inline float LambdaFromCountsTable(int na, int nb, int nab, const float* sq) {
  if (na + nb == 0) return 0.0f;
  return 1.0f - sq[na + nb - 2 * nab] / (sq[na] + sq[nb]);
}

// Local similarity of probe cylinder a and gallery cylinder b (directions
// already matchable). `*_xmask` are the masks repeated for every layer (24
// words). With m = ma & mb: |c_a| = |a| - |a & (ma & ~mb)|, so only the mask
// words where the masks differ cost extra popcounts; |c_a xor c_b| =
// |c_a| + |c_b| - 2 |a & b|.
struct ScalarKernel {
  static inline float Lambda(const uint64_t* a_bits, const uint64_t* a_mask, const uint64_t* /*a_xmask*/,
                             int a_count, const uint64_t* b_bits, const uint64_t* b_mask,
                             const uint64_t* /*b_xmask*/, int b_count, const LssConstants& c, const float* sq) {
    int common = 0;
    uint64_t da[kMccMaskWords], db[kMccMaskWords];
    uint64_t any_a = 0, any_b = 0;
    for (int q = 0; q < kMccMaskWords; ++q) {
      common += Popcount(a_mask[q] & b_mask[q]);
      da[q] = a_mask[q] & ~b_mask[q];
      db[q] = b_mask[q] & ~a_mask[q];
      any_a |= da[q];
      any_b |= db[q];
    }
    if (common < c.min_common_cells) return 0.0f;
    int n0 = 0, n1 = 0, n2 = 0, n3 = 0;
    for (int w = 0; w < kMccBitWords; w += 4) {
      n0 += Popcount(a_bits[w] & b_bits[w]);
      n1 += Popcount(a_bits[w + 1] & b_bits[w + 1]);
      n2 += Popcount(a_bits[w + 2] & b_bits[w + 2]);
      n3 += Popcount(a_bits[w + 3] & b_bits[w + 3]);
    }
    int na = a_count, nb = b_count;
    if (any_a != 0) {
      for (int q = 0; q < kMccMaskWords; ++q) {
        if (da[q] == 0) continue;
        for (int k = 0; k < kMccNd; ++k) na -= Popcount(a_bits[k * kMccLayerWords + q] & da[q]);
      }
    }
    if (any_b != 0) {
      for (int q = 0; q < kMccMaskWords; ++q) {
        if (db[q] == 0) continue;
        for (int k = 0; k < kMccNd; ++k) nb -= Popcount(b_bits[k * kMccLayerWords + q] & db[q]);
      }
    }
    return LambdaFromCountsTable(na, nb, (n0 + n1) + (n2 + n3), sq);
  }
};


int BitCount(const MccCylinder& c) {
  int n = 0;
  for (int w = 0; w < kMccBitWords; ++w) n += Popcount(c.bits[w]);
  return n;
}

// Entries are keyed (r << ColumnBits(nb)) | j for probe row r and gallery
// column j: the same order as the flat index r * nb + j (rows first, then
// columns), which the selection's ties and the row-major order use, and
// decoded with a shift and a mask instead of a division.
inline int ColumnBits(int nb) { return nb <= 1 ? 0 : 32 - __builtin_clz(static_cast<unsigned>(nb - 1)); }

struct Scratch {
  // The positive local similarities of one comparison as they are found:
  // values[i] with flat index r * nB + j in index[i], i < n_found. Sized once
  // for the largest comparison (plus 8 lanes of slack for full-vector
  // stores of compressed lanes) and never shrunk: no push_back, no zeroing.
  std::vector<float> values;
  std::vector<int32_t> index;
  size_t n_found = 0;
  std::vector<int32_t> buckets;  // Avx512Path::Histogram: ValueBucket of each value
  // The ones SelectBest keeps: entries[0, n_entries).
  std::vector<Entry> entries;
  size_t n_entries = 0;
  std::vector<float> rho_t, lambda0, lambda, next, sum;
  std::vector<uint8_t> taken;
  std::vector<int32_t> keys, order, rank;
  // SelectBestAvx512's compressed survivors (capacity as values + 16).
  std::vector<float> kept_values, edge_values;
  std::vector<int32_t> kept_index, edge_index;
  std::vector<int> rows, columns;
  std::vector<float> gx, gy, gt;
  std::vector<float> px, py, pt;  // the selected pairs' probe minutiae (sparse rho)
  std::vector<double> row_sum;
  std::vector<Entry> boundary;
  // Sparse rho (RhoCandidatesAvx512, RhoSparse): the pairs (t, k) that pass
  // the distance and direction cuts, row by row (row t is [row_begin[t],
  // row_begin[t + 1]), k ascending), sized p * p + 16; with each pair's
  // gallery coordinates (x, y, theta of t; x, y of k) side by side, so that
  // RhoSparse loads them instead of gathering them lane by lane.
  std::vector<int32_t> sparse_k, sparse_probe_index, row_begin;
  std::vector<float> sparse_d1, sparse_d2, sparse_rho;
  std::vector<float> sparse_xt, sparse_yt, sparse_tt, sparse_xk, sparse_yk;
  // RelaxEllAvx512: the sparse rows 16 per group, step by step.
  std::vector<int32_t> ell_offset, ell_k;
  std::vector<float> ell_rho;
};

Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

// Keeps the `limit` best entries by key (value descending, index ascending),
// in no particular order: a 256-bucket histogram of the values (in (0, 1])
// finds the bucket holding the limit-th best; entries above it are kept and
// only that bucket is ordered exactly. Linear and nearly branch-free.
using lss_internal::ValueBucket;

// `hist` counts the entries per ValueBucket (filled while collecting them).
// Reads values/index[0, n_found), writes entries[0, n_entries).
void SelectBest(Scratch& s, size_t limit, const int* hist) {
  Entry* entries = s.entries.data();
  const float* values = s.values.data();
  const int32_t* index = s.index.data();
  const size_t n = s.n_found;
  if (n <= limit) {
    for (size_t i = 0; i < n; ++i) {
      entries[i].value = values[i];
      entries[i].index = index[i];
    }
    s.n_entries = n;
    return;
  }
  auto bucket = ValueBucket;
  size_t above = 0;
  int b = 256;
  while (above + hist[b] < limit) above += hist[b--];
  s.boundary.clear();
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    const float v = values[i];
    const int k = bucket(v);
    if (k > b) {
      entries[kept].value = v;
      entries[kept].index = index[i];
      ++kept;
    } else if (k == b) {
      s.boundary.push_back({v, index[i]});
    }
  }
  const size_t need = limit - above;  // from the boundary bucket, by exact key
  std::nth_element(s.boundary.begin(), s.boundary.begin() + (need - 1), s.boundary.end(), EntryKeyBefore());
  for (size_t i = 0; i < need; ++i) entries[kept++] = s.boundary[i];
  s.n_entries = kept;
}

#if defined(__x86_64__)
// SelectBest, 16 values at a time: the bucket of each value, the ones above
// the boundary bucket and the ones in it compressed in registers and stored
// as whole vectors (no branch per value). The same entries in the same order.
__attribute__((target(TESSERA_FP_AVX512))) void SelectBestAvx512(Scratch& s, size_t limit, const int* hist) {
  const size_t n = s.n_found;
  if (n <= limit) {
    SelectBest(s, limit, hist);
    return;
  }
  if (s.kept_values.size() < n + 16) {
    s.kept_values.resize(n + 16);
    s.kept_index.resize(n + 16);
    s.edge_values.resize(n + 16);
    s.edge_index.resize(n + 16);
  }
  size_t above = 0;
  int b = 256;
  while (above + hist[b] < limit) above += hist[b--];
  const float* values = s.values.data();
  const int32_t* index = s.index.data();
  const __m512 scale = _mm512_set1_ps(256.0f);
  const __m512i top = _mm512_set1_epi32(256), boundary = _mm512_set1_epi32(b);
  size_t kept = 0, edge = 0;
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 lanes = n - i >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(lanes, values + i);
    const __m512i id = _mm512_maskz_loadu_epi32(lanes, index + i);
    // ValueBucket: static_cast<int>(v * 256) (truncation), at most 256.
    const __m512i bucket = _mm512_min_epi32(_mm512_cvttps_epi32(_mm512_mul_ps(v, scale)), top);
    const __mmask16 is_above = lanes & _mm512_cmpgt_epi32_mask(bucket, boundary);
    const __mmask16 is_edge = lanes & _mm512_cmpeq_epi32_mask(bucket, boundary);
    _mm512_storeu_ps(s.kept_values.data() + kept, _mm512_maskz_compress_ps(is_above, v));
    _mm512_storeu_si512(s.kept_index.data() + kept, _mm512_maskz_compress_epi32(is_above, id));
    kept += __builtin_popcount(is_above);
    _mm512_storeu_ps(s.edge_values.data() + edge, _mm512_maskz_compress_ps(is_edge, v));
    _mm512_storeu_si512(s.edge_index.data() + edge, _mm512_maskz_compress_epi32(is_edge, id));
    edge += __builtin_popcount(is_edge);
  }
  Entry* entries = s.entries.data();
  for (size_t i = 0; i < kept; ++i) entries[i] = {s.kept_values[i], s.kept_index[i]};
  s.boundary.resize(edge);
  for (size_t i = 0; i < edge; ++i) s.boundary[i] = {s.edge_values[i], s.edge_index[i]};
  const size_t need = limit - above;  // from the boundary bucket, by exact key
  std::nth_element(s.boundary.begin(), s.boundary.begin() + (need - 1), s.boundary.end(), EntryKeyBefore());
  for (size_t i = 0; i < need; ++i) entries[kept++] = s.boundary[i];
  s.n_entries = kept;
}
#endif

#if defined(__x86_64__)
// The first half of rho for every pair (t, k != t) of the p selected pairs,
// 16 t at a time: d1 (distances) and d2 (directions) exactly as RhoColumn
// computes them (the same IEEE operations per lane; AngleDiffF's
// d - 2 pi * {-1, 0, 1} is a masked add/subtract of 2 pi, the same results).
// Only the pairs with d1 < cut1 and d2 < cut2 are kept (compressed in
// registers, stored as whole vectors): rho is exactly 0 for the others, and
// about a fifth pass, so the atan2 and the three exponentials (RhoSparse) run
// on a fifth of the pairs. Returns how many were kept.
__attribute__((target(TESSERA_FP_AVX512))) int RhoCandidatesAvx512(int p, int n, const int* rows, const float* px,
                                                                  const float* py, const float* pt, const float* gx,
                                                                  const float* gy, const float* gt,
                                                                  const LssConstants& c, Scratch& s) {
  const __m512 two_pi = _mm512_set1_ps(fpmath::kTwoPiF);
  const __m512 pi = _mm512_set1_ps(fpmath::kPiF), minus_pi = _mm512_set1_ps(-fpmath::kPiF);
  const __m512 cut1 = _mm512_set1_ps(c.cut1), cut2 = _mm512_set1_ps(c.cut2);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  // AngleDiffF(a, b) per lane (no lambda: it would not carry the target ISA).
#define TESSERA_ANGLE_DIFF(out, a, b)                                                  \
  do {                                                                                 \
    const __m512 d_ = _mm512_sub_ps(a, b);                                             \
    const __mmask16 above_ = _mm512_cmp_ps_mask(d_, pi, _CMP_GE_OQ);                   \
    const __mmask16 below_ = _mm512_cmp_ps_mask(d_, minus_pi, _CMP_LT_OQ);             \
    out = _mm512_mask_add_ps(_mm512_mask_sub_ps(d_, above_, d_, two_pi), below_, d_, two_pi); \
  } while (0)
  int32_t* out_k = s.sparse_k.data();
  float* out_xt = s.sparse_xt.data();
  float* out_yt = s.sparse_yt.data();
  float* out_tt = s.sparse_tt.data();
  float* out_xk = s.sparse_xk.data();
  float* out_yk = s.sparse_yk.data();
  int32_t* out_index = s.sparse_probe_index.data();
  float* out_d1 = s.sparse_d1.data();
  float* out_d2 = s.sparse_d2.data();
  int count = 0;
  for (int t = 0; t < p; ++t) {
    s.row_begin[t] = count;
    const __m512i row_base = _mm512_set1_epi32(rows[t] * n);
    const __m512 xt = _mm512_set1_ps(gx[t]), yt = _mm512_set1_ps(gy[t]), tt = _mm512_set1_ps(gt[t]);
    const __m512 pxt = _mm512_set1_ps(px[t]), pyt = _mm512_set1_ps(py[t]), ptt = _mm512_set1_ps(pt[t]);
    for (int k0 = 0; k0 < p; k0 += 16) {
      __mmask16 lanes = p - k0 >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (p - k0)) - 1);
      if (t >= k0 && t < k0 + 16) lanes &= static_cast<__mmask16>(~(1u << (t - k0)));  // rho(t, t) = 0
      const __m512i rk = _mm512_maskz_loadu_epi32(lanes, rows + k0);
      const __m512i ia = _mm512_add_epi32(row_base, rk);
      // The probe's relations, recomputed as PrepareProbe computed them
      // (PairDistance, PairDirection: the same operations, so the same
      // floats as its tables) instead of two gathers.
      const __m512 pxk = _mm512_maskz_loadu_ps(lanes, px + k0);
      const __m512 pyk = _mm512_maskz_loadu_ps(lanes, py + k0);
      const __m512 ptk = _mm512_maskz_loadu_ps(lanes, pt + k0);
      const __m512 pdx = _mm512_sub_ps(pxk, pxt), pdy = _mm512_sub_ps(pyk, pyt);
      const __m512 pd = _mm512_sqrt_ps(_mm512_add_ps(_mm512_mul_ps(pdx, pdx), _mm512_mul_ps(pdy, pdy)));
      __m512 pdir;
      TESSERA_ANGLE_DIFF(pdir, ptt, ptk);
      const __m512 xk = _mm512_maskz_loadu_ps(lanes, gx + k0);
      const __m512 yk = _mm512_maskz_loadu_ps(lanes, gy + k0);
      const __m512 tk = _mm512_maskz_loadu_ps(lanes, gt + k0);
      const __m512 dx = _mm512_sub_ps(xk, xt), dy = _mm512_sub_ps(yk, yt);
      const __m512 dist = _mm512_sqrt_ps(_mm512_add_ps(_mm512_mul_ps(dx, dx), _mm512_mul_ps(dy, dy)));
      const __m512 d1 = _mm512_abs_ps(_mm512_sub_ps(pd, dist));
      __m512 gallery_dir, dir_diff;
      TESSERA_ANGLE_DIFF(gallery_dir, tt, tk);
      TESSERA_ANGLE_DIFF(dir_diff, pdir, gallery_dir);
      const __m512 d2 = _mm512_abs_ps(dir_diff);
      const __mmask16 keep = lanes & _mm512_cmp_ps_mask(d1, cut1, _CMP_LT_OQ) & _mm512_cmp_ps_mask(d2, cut2, _CMP_LT_OQ);
      if (keep == 0) continue;
      // One compress gives the kept lanes' positions; the five other
      // vectors follow them by permutes: on Intel cores a register compress
      // is two shuffle-port uops and a permute one (that port also runs the
      // popcounts). Lanes past the kept ones hold copies of kept values,
      // never read (count advances by the kept lanes only).
      const __m512i kept_lane = _mm512_maskz_compress_epi32(keep, lane);
      _mm512_storeu_si512(out_k + count, _mm512_add_epi32(kept_lane, _mm512_set1_epi32(k0)));
      _mm512_storeu_ps(out_xt + count, xt);  // the same in every lane: no compress
      _mm512_storeu_ps(out_yt + count, yt);
      _mm512_storeu_ps(out_tt + count, tt);
      _mm512_storeu_ps(out_xk + count, _mm512_permutexvar_ps(kept_lane, xk));
      _mm512_storeu_ps(out_yk + count, _mm512_permutexvar_ps(kept_lane, yk));
      _mm512_storeu_si512(out_index + count, _mm512_permutexvar_epi32(kept_lane, ia));
      _mm512_storeu_ps(out_d1 + count, _mm512_permutexvar_ps(kept_lane, d1));
      _mm512_storeu_ps(out_d2 + count, _mm512_permutexvar_ps(kept_lane, d2));
      count += __builtin_popcount(keep);
    }
  }
  s.row_begin[p] = count;
  return count;
#undef TESSERA_ANGLE_DIFF
}
#endif

#if defined(__x86_64__)
// The relaxation over the sparse rho (rows [row_begin[t], row_begin[t + 1])
// of sparse_k / sparse_rho, k ascending), 16 rows t per vector: the rows are
// laid out column by column per group of 16 (ELL: step i holds entry i of
// every row of the group; rho 0 and k = 0 past a row's end), so each lane
// sums its own row in its own order and the 16 sums (and their divisions)
// run side by side instead of one dependent chain of scalar adds per row.
// The same floats as the scalar loop: each lane adds the same products in
// the same order, then +0 products (rho = 0 times a lambda in [0, 1]) that
// leave a nonnegative sum unchanged; Relaxed's mul, div and add per lane.
// s.lambda[0, p) in, relaxed values out.
__attribute__((target(TESSERA_FP_AVX512))) void RelaxEllAvx512(Scratch& s, int p, int iterations, float denominator,
                                                              const LssConstants& c) {
  const int groups = (p + 15) / 16, P = groups * 16;
  const int32_t* begin = s.row_begin.data();
  s.ell_offset.resize(groups + 1);
  int steps = 0;
  for (int g = 0; g < groups; ++g) {
    s.ell_offset[g] = steps;
    int longest = 0;
    for (int t = 16 * g; t < std::min(p, 16 * g + 16); ++t) longest = std::max(longest, begin[t + 1] - begin[t]);
    steps += longest;
  }
  s.ell_offset[groups] = steps;
  s.ell_rho.assign(static_cast<size_t>(steps) * 16, 0.0f);
  s.ell_k.assign(static_cast<size_t>(steps) * 16, 0);
  for (int t = 0; t < p; ++t) {
    const size_t base = static_cast<size_t>(s.ell_offset[t / 16]) * 16 + (t & 15);
    for (int e = begin[t]; e < begin[t + 1]; ++e) {
      s.ell_rho[base + static_cast<size_t>(e - begin[t]) * 16] = s.sparse_rho[e];
      s.ell_k[base + static_cast<size_t>(e - begin[t]) * 16] = s.sparse_k[e];
    }
  }
  s.lambda.resize(P);
  std::fill(s.lambda.begin() + p, s.lambda.end(), 0.0f);
  s.next.resize(P);
  const __m512 w_r = _mm512_set1_ps(c.w_r), one_minus_w_r = _mm512_set1_ps(c.one_minus_w_r);
  const __m512 denom = _mm512_set1_ps(denominator);
  for (int it = 0; it < iterations; ++it) {
    const float* lambda = s.lambda.data();
    float* next = s.next.data();
    // lambda[k] by a permute of one or two registers where p <= 32.
    const __m512 lo = _mm512_loadu_ps(lambda), hi = P > 16 ? _mm512_loadu_ps(lambda + 16) : lo;
    for (int g = 0; g < groups; ++g) {
      __m512 sum = _mm512_setzero_ps();
      for (int i = s.ell_offset[g]; i < s.ell_offset[g + 1]; ++i) {
        const __m512i k = _mm512_loadu_si512(s.ell_k.data() + static_cast<size_t>(i) * 16);
        const __m512 r = _mm512_loadu_ps(s.ell_rho.data() + static_cast<size_t>(i) * 16);
        const __m512 lk = P <= 32 ? _mm512_permutex2var_ps(lo, k, hi) : _mm512_i32gather_ps(k, lambda, 4);
        sum = _mm512_add_ps(sum, _mm512_mul_ps(r, lk));
      }
      const __m512 lt = _mm512_loadu_ps(lambda + 16 * g);
      _mm512_storeu_ps(next + 16 * g, _mm512_add_ps(_mm512_mul_ps(w_r, lt),
                                                    _mm512_mul_ps(one_minus_w_r, _mm512_div_ps(sum, denom))));
    }
    s.lambda.swap(s.next);
  }
}
#endif

// rho and the relaxation for the p selected pairs (rows, gx, gy, gt and
// lambda set, padded to P): s.lambda[0, p) becomes the relaxed values.
// Returns false, without relaxing, when threshold > 0 and the bound from rho's
// row sums (RelaxedScoreUpperBound) is below it. Dense: every rho(t, k) by
// vectorized columns (any ISA).
bool RelaxDense(Scratch& s, const LssProbe& probe, int p, int P, int n_min, const LssConstants& c,
                float threshold) {
  const int na = static_cast<int>(probe.cylinders.cylinders.size());
  // rho transposed: rho_t[k * P + t] = rho(t, k); rho(t, t) = 0, and 0 for
  // the padding t >= p. Column k is one vectorized pass (RhoColumn) that
  // writes every t < P, so nothing is zeroed beforehand and nothing is
  // transposed.
  if (s.rho_t.size() < static_cast<size_t>(p) * P) s.rho_t.resize(static_cast<size_t>(p) * P);
  for (int k = 0; k < p; ++k) {
    float* col = s.rho_t.data() + static_cast<size_t>(k) * P;
    RhoColumn(P, k, na, s.rows.data(), probe.pair_dist.data(), probe.pair_dir.data(), probe.pair_radial.data(),
              s.gx.data(), s.gy.data(), s.gt.data(), c, col);
    col[k] = 0.0f;
    for (int t = p; t < P; ++t) col[t] = 0.0f;
  }
  if (threshold > 0.0f) {
    // max_t sum_k rho(t, k), each row summed in double over ascending k.
    s.row_sum.assign(p, 0.0);
    for (int k = 0; k < p; ++k) {
      const float* col = s.rho_t.data() + static_cast<size_t>(k) * P;
      for (int t = 0; t < p; ++t) s.row_sum[t] += col[t];
    }
    const double max_row_sum = *std::max_element(s.row_sum.begin(), s.row_sum.end());
    float max_lambda0 = 0.0f;
    for (int t = 0; t < p; ++t) max_lambda0 = std::max(max_lambda0, s.lambda0[t]);
    if (lss_internal::RelaxedScoreUpperBound(max_lambda0, max_row_sum, p, n_min, c) < threshold) {
      return false;
    }
  }
  // Each t sums rho(t, k) lambda_k over k in ascending order, as the CUDA
  // kernel does; the loops are interchanged so the p sums vectorize.
  s.lambda.resize(P, 0.0f);
  s.next.assign(P, 0.0f);
  s.sum.resize(P);
  const float denominator = static_cast<float>(n_min - 1);
  for (int it = 0; it < c.relaxation_iterations; ++it) {
    RelaxStep(p, P, s.rho_t.data(), s.lambda.data(), denominator, c, s.sum.data(), s.next.data());
    s.lambda.swap(s.next);
  }
  return true;
}

#if defined(__x86_64__)
// The same with rho sparse (AVX-512): RhoCandidatesAvx512 keeps the pairs
// within the distance and direction cuts, RhoSparse computes their rho, and
// the relaxation sums only those, each t over ascending k as RelaxDense does;
// the pairs left out have rho = 0 exactly and would add +0 to sums of
// nonnegative terms, so every float (and the double row sums) is RelaxDense's.
bool RelaxSparse(Scratch& s, const LssProbe& probe, int p, int /*P*/, int n_min, const LssConstants& c,
                 float threshold) {
  const int na = static_cast<int>(probe.cylinders.cylinders.size());
  const size_t capacity = static_cast<size_t>(p) * p + 16;
  if (s.sparse_k.size() < capacity) {
    for (auto* v : {&s.sparse_xt, &s.sparse_yt, &s.sparse_tt, &s.sparse_xk, &s.sparse_yk}) v->resize(capacity);
    s.sparse_k.resize(capacity);
    s.sparse_probe_index.resize(capacity);
    s.sparse_d1.resize(capacity);
    s.sparse_d2.resize(capacity);
    s.sparse_rho.resize(capacity);
  }
  s.row_begin.resize(p + 1);
  s.px.resize(p);
  s.py.resize(p);
  s.pt.resize(p);
  for (int t = 0; t < p; ++t) {
    const MccCylinder& cyl = probe.cylinders.cylinders[s.rows[t]];
    s.px[t] = cyl.x;
    s.py[t] = cyl.y;
    s.pt[t] = cyl.theta;
  }
  const int count = RhoCandidatesAvx512(p, na, s.rows.data(), s.px.data(), s.py.data(), s.pt.data(), s.gx.data(),
                                        s.gy.data(), s.gt.data(), c, s);
  lss_vector::RhoSparse(count, s.sparse_probe_index.data(), s.sparse_d1.data(), s.sparse_d2.data(),
                        probe.pair_radial.data(), s.sparse_xt.data(), s.sparse_yt.data(), s.sparse_tt.data(),
                        s.sparse_xk.data(), s.sparse_yk.data(), c, s.sparse_rho.data());
  const float* rho = s.sparse_rho.data();
  const int32_t* begin = s.row_begin.data();
  if (threshold > 0.0f) {
    // max_t sum_k rho(t, k), each row summed in double over ascending k.
    double max_row_sum = 0.0;
    for (int t = 0; t < p; ++t) {
      double row = 0.0;
      for (int e = begin[t]; e < begin[t + 1]; ++e) row += rho[e];
      max_row_sum = std::max(max_row_sum, row);
    }
    float max_lambda0 = 0.0f;
    for (int t = 0; t < p; ++t) max_lambda0 = std::max(max_lambda0, s.lambda0[t]);
    if (lss_internal::RelaxedScoreUpperBound(max_lambda0, max_row_sum, p, n_min, c) < threshold) return false;
  }
  RelaxEllAvx512(s, p, c.relaxation_iterations, static_cast<float>(n_min - 1), c);
  return true;
}
#endif

// The global score from the nonzero local similarities (any order) of the
// probe against gallery template with cylinders at (bx, by, bt)[0..nb).
// threshold > 0 (LSS-R): kLssPrunedScore once RelaxedScoreUpperBound (from
// rho's row sums) is below it, before the relaxation.
// sparse_rho: rho through RhoCandidatesAvx512 + RhoSparse (AVX-512 only)
// instead of dense columns; the same floats.
__attribute__((always_inline)) inline float GlobalScore(Scratch& s, const LssProbe& probe, int nb, const float* bx,
                                                        const float* by, const float* bt,
                  MccScore kind, const LssConstants& c, float threshold, bool sparse_rho) {
  const int na = static_cast<int>(probe.cylinders.cylinders.size());
  const int n_min = std::min(na, nb);
  const int np = c.np_table[n_min];
  const int column_bits = ColumnBits(nb);
  Entry* entries = s.entries.data();
  size_t n_entries = s.n_entries;
  if (n_entries == 0 || np == 0) return 0.0f;
  if (kind == MccScore::kLss) {
    const size_t k = std::min<size_t>(np, n_entries);
    std::partial_sort(entries, entries + k, entries + n_entries, EntryKeyBefore());
    float sum = 0.0f;
    for (size_t i = 0; i < k; ++i) sum = sum + entries[i].value;
    return sum / static_cast<float>(np);
  }
  // LSS-R: the nR best pairs (ScoreImpl keeps at most nR), in row-major
  // (flat index) order.
  const size_t nr = static_cast<size_t>(n_min);
  if (n_entries > nr) {
    std::nth_element(entries, entries + (nr - 1), entries + n_entries, EntryKeyBefore());
    n_entries = nr;
  }
  const int p = static_cast<int>(n_entries);
  s.lambda0.resize(p);
  s.lambda.resize(p);
  s.next.resize(p);
  s.sum.resize(p);
  s.keys.resize(p);
  s.order.resize(p);
  {
    // Row-major order by counting: the keys are distinct, so entry i
    // goes to position #{j : key_j < key_i} (a branch-free p x p loop
    // that vectorizes; p = nR is small; faster than std::sort here). The
    // loop over i is the inner one: all p counts grow side by side in
    // vector lanes, with no horizontal sum (a latency chain) per entry.
    int32_t* keys = s.keys.data();
    int32_t* sorted_index = s.order.data();
    s.rank.resize(p);
    int32_t* position = s.rank.data();
    for (int i = 0; i < p; ++i) {
      keys[i] = entries[i].index;
      position[i] = 0;
    }
    for (int j = 0; j < p; ++j) {
      const int32_t key_j = keys[j];
      for (int i = 0; i < p; ++i) position[i] += key_j < keys[i];
    }
    for (int i = 0; i < p; ++i) {
      s.lambda0[position[i]] = entries[i].value;
      sorted_index[position[i]] = keys[i];
    }
    for (int t = 0; t < p; ++t) {
      entries[t].value = s.lambda[t] = s.lambda0[t];
      entries[t].index = sorted_index[t];
    }
  }
  if (n_min > 1 && c.relaxation_iterations > 0) {
    // Vector loops run over P >= p lanes (a multiple of 16, zero padding) so
    // they need no scalar epilogue; padded lanes compute values never used.
    const int P = (p + 15) & ~15;
    s.rows.assign(P, 0);  // padding: a valid probe index
    s.columns.resize(p);
    s.gx.assign(P, 0.0f);
    s.gy.assign(P, 0.0f);
    s.gt.assign(P, 0.0f);
    for (int t = 0; t < p; ++t) {
      s.rows[t] = entries[t].index >> column_bits;
      s.columns[t] = entries[t].index & ((1 << column_bits) - 1);
      s.gx[t] = bx[s.columns[t]];
      s.gy[t] = by[s.columns[t]];
      s.gt[t] = bt[s.columns[t]];
    }
#if defined(__x86_64__)
    const bool kept = sparse_rho ? RelaxSparse(s, probe, p, P, n_min, c, threshold)
                                 : RelaxDense(s, probe, p, P, n_min, c, threshold);
#else
    const bool kept = RelaxDense(s, probe, p, P, n_min, c, threshold);
#endif
    if (!kept) return kLssPrunedScore;  // skip the relaxation and the efficiency choice
  }
  // The np pairs of highest efficiency lambda / lambda0 (ties: lower t),
  // summed in that order. Ranking by counting: pair t's place is the number
  // of pairs before it in (efficiency descending, t ascending), all distinct;
  // the same order as picking the best remaining one np times.
  const int keep = std::min(np, p);
  s.next.resize(p);
  s.order.resize(p);
  float* efficiency = s.next.data();
  int32_t* order = s.order.data();
  s.rank.resize(p);
  int32_t* place = s.rank.data();
  for (int t = 0; t < p; ++t) {
    efficiency[t] = s.lambda[t] / s.lambda0[t];
    place[t] = 0;
  }
  // All p places counted side by side (inner loop over t), as above.
  for (int j = 0; j < p; ++j) {
    const float e_j = efficiency[j];
    for (int t = 0; t < p; ++t) place[t] += (e_j > efficiency[t]) | ((e_j == efficiency[t]) & (j < t));
  }
  for (int t = 0; t < p; ++t) {
    if (place[t] < keep) order[place[t]] = t;
  }
  float sum = 0.0f;
  for (int i = 0; i < keep; ++i) sum = sum + s.lambda[order[i]];
  const float score = sum / static_cast<float>(np);
  return std::min(1.0f, std::max(0.0f, score));
}

}  // namespace

float LocalSimilarity(const MccCylinder& a, const MccCylinder& b, const LssConstants& c) {
  if (!DirectionsMatchable(a.theta, b.theta, c)) return 0.0f;
  return ScalarKernel::Lambda(a.bits, a.mask, nullptr, BitCount(a), b.bits, b.mask, nullptr, BitCount(b), c,
                              Sqrts().v);
}

std::vector<float> LocalSimilarityMatrix(const MccTemplate& a, const MccTemplate& b, const LssConstants& c) {
  const size_t na = a.cylinders.size(), nb = b.cylinders.size();
  std::vector<float> m(na * nb);
  for (size_t r = 0; r < na; ++r)
    for (size_t j = 0; j < nb; ++j) m[r * nb + j] = LocalSimilarity(a.cylinders[r], b.cylinders[j], c);
  return m;
}

namespace {

// One gallery cylinder (column j) against the probe cylinders at sorted
// positions [lo, hi): local similarities, entries and histogram.
struct RangeArgs {
  const LssProbe* probe;
  float tb, inner_lo, inner_hi;  // direction of b; the surely matchable band
  const uint64_t* b_bits;
  const uint64_t* b_mask;
  const uint64_t* b_planes;  // LayerSumPlanes of b_bits
  int b_count;
  int j, column_bits;  // entry key: (r << column_bits) | j (ColumnBits)
  const LssConstants* c;
  const float* sq;
  float* values;    // Scratch::values
  int32_t* index;   // Scratch::index
  size_t* n_found;  // Scratch::n_found
};

// Values and indices go to separate arrays (the histogram is counted after
// the whole collection): building an Entry on the stack and copying it as one
// 64-bit word stalled on store forwarding.
inline void AddEntry(const RangeArgs& a, float v, int r) {
  const size_t i = (*a.n_found)++;
  a.values[i] = v;
  a.index[i] = (r << a.column_bits) | a.j;
}

// Directions strictly inside [tb - delta + 1e-3, tb + delta - 1e-3] are
// matchable whatever the rounding (the float difference is within 1e-6 of
// the exact one), so the exact test only runs near the range's edges.
inline bool Matchable(const RangeArgs& a, int q) {
  const float ta = a.probe->sorted_theta[q];
  return (ta > a.inner_lo && ta < a.inner_hi) ||
         DirectionsMatchable(a.probe->cylinders.cylinders[a.probe->by_theta[q]].theta, a.tb, *a.c);
}

// Positions in the sorted directions sorted[0, na) (ascending): lo = first
// >= lo_theta, hi = first > hi_theta, wrap_lo = first >= lo_theta + 2 pi,
// wrap_hi = first > hi_theta - 2 pi (std::lower_bound / upper_bound).
struct SearchBounds {
  int lo, hi, wrap_lo, wrap_hi;
};

struct ScalarPath {
  static constexpr bool kAvx512 = false;
  // hist[b] = #{i < n : ValueBucket(values[i]) == b}. Four partial tables:
  // consecutive values often share a bucket, and one table would chain every
  // increment through store forwarding.
  static void Histogram(const float* values, size_t n, int* hist, int32_t* /*buckets*/) {
    int part[4][lss_internal::kValueBuckets] = {};
    const size_t n4 = n & ~static_cast<size_t>(3);
    for (size_t i = 0; i < n4; i += 4) {
      ++part[0][ValueBucket(values[i])];
      ++part[1][ValueBucket(values[i + 1])];
      ++part[2][ValueBucket(values[i + 2])];
      ++part[3][ValueBucket(values[i + 3])];
    }
    for (size_t i = n4; i < n; ++i) ++part[0][ValueBucket(values[i])];
    for (int b = 0; b < lss_internal::kValueBuckets; ++b) {
      hist[b] = (part[0][b] + part[1][b]) + (part[2][b] + part[3][b]);
    }
  }
  static void Search(const float* sorted, int na, float lo_theta, float hi_theta, SearchBounds* out) {
    out->lo = static_cast<int>(std::lower_bound(sorted, sorted + na, lo_theta) - sorted);
    out->hi = static_cast<int>(std::upper_bound(sorted, sorted + na, hi_theta) - sorted);
    out->wrap_lo = static_cast<int>(std::lower_bound(sorted, sorted + na, lo_theta + fpmath::kTwoPiF) - sorted);
    out->wrap_hi = static_cast<int>(std::upper_bound(sorted, sorted + na, hi_theta - fpmath::kTwoPiF) - sorted);
  }
  static void Range(const RangeArgs& a, int lo, int hi) {
    const LssProbe& p = *a.probe;
    for (int q = lo; q < hi; ++q) {
      if (!Matchable(a, q)) continue;
      const int r = p.by_theta[q];
      const MccCylinder& cyl = p.cylinders.cylinders[r];
      const float v = ScalarKernel::Lambda(cyl.bits, cyl.mask, nullptr, p.bit_count[r], a.b_bits, a.b_mask, nullptr,
                                           a.b_count, *a.c, a.sq);
      if (v > 0.0f) AddEntry(a, v, r);
    }
  }
};

#if defined(__x86_64__)
// Eight probe cylinders at a time with AVX-512: the probe's words are laid out
// by sorted position (LssProbe::soa_*), so lane l of word w is cylinder
// q0 + l's word w. The same integer counts as ScalarKernel; the float steps
// (sqrt, add, divide, subtract) are IEEE per lane, hence the same lambdas.
// popcount(a[0..8) & b) per lane, b broadcast.
__attribute__((target(TESSERA_FP_AVX512), always_inline)) inline __m512i AndPopcount(const uint64_t* a, long long b) {
  return _mm512_popcnt_epi64(_mm512_and_si512(_mm512_loadu_si512(a), _mm512_set1_epi64(b)));
}

struct Avx512Path {
  static constexpr bool kAvx512 = true;
  // ScalarPath::Search by counting, 16 directions at a time and branch-free:
  // in an ascending array the first position >= x is #{q : sorted[q] < x}
  // (the binary searches' branches were mispredicted half the time).
  __attribute__((target(TESSERA_FP_AVX512))) static void Search(const float* sorted, int na, float lo_theta,
                                                                float hi_theta, SearchBounds* out) {
    const __m512 lo = _mm512_set1_ps(lo_theta), hi = _mm512_set1_ps(hi_theta);
    const __m512 wrap_lo = _mm512_set1_ps(lo_theta + fpmath::kTwoPiF);
    const __m512 wrap_hi = _mm512_set1_ps(hi_theta - fpmath::kTwoPiF);
    int n_lo = 0, n_hi = 0, n_wrap_lo = 0, n_wrap_hi = 0;
    for (int q0 = 0; q0 < na; q0 += 16) {
      const __mmask16 lanes =
          na - q0 >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (na - q0)) - 1);
      const __m512 v = _mm512_maskz_loadu_ps(lanes, sorted + q0);
      n_lo += __builtin_popcount(_mm512_mask_cmp_ps_mask(lanes, v, lo, _CMP_LT_OQ));
      n_hi += __builtin_popcount(_mm512_mask_cmp_ps_mask(lanes, v, hi, _CMP_LE_OQ));
      n_wrap_lo += __builtin_popcount(_mm512_mask_cmp_ps_mask(lanes, v, wrap_lo, _CMP_LT_OQ));
      n_wrap_hi += __builtin_popcount(_mm512_mask_cmp_ps_mask(lanes, v, wrap_hi, _CMP_LE_OQ));
    }
    out->lo = n_lo;
    out->hi = n_hi;
    out->wrap_lo = n_wrap_lo;
    out->wrap_hi = n_wrap_hi;
  }
  // ScalarPath::Histogram with the buckets (ValueBucket: truncation of
  // v * 256, at most 256) computed 16 at a time into `buckets` (n + 16
  // ints), then counted from memory in a second loop: read back from a
  // register in the same loop, GCC extracts them lane by lane, which on
  // Intel cores runs on the shuffle port the popcounts need.
  __attribute__((target(TESSERA_FP_AVX512))) static void Histogram(const float* values, size_t n, int* hist,
                                                                   int32_t* buckets) {
    const __m512 scale = _mm512_set1_ps(256.0f);
    const __m512i top = _mm512_set1_epi32(256);
    for (size_t i = 0; i < n; i += 16) {
      const __mmask16 lanes = n - i >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1);
      const __m512 v = _mm512_maskz_loadu_ps(lanes, values + i);
      _mm512_storeu_si512(buckets + i, _mm512_min_epi32(_mm512_cvttps_epi32(_mm512_mul_ps(v, scale)), top));
    }
    int part[4][lss_internal::kValueBuckets] = {};
    const size_t n4 = n & ~static_cast<size_t>(3);
    for (size_t i = 0; i < n4; i += 4) {
      ++part[0][buckets[i]];
      ++part[1][buckets[i + 1]];
      ++part[2][buckets[i + 2]];
      ++part[3][buckets[i + 3]];
    }
    for (size_t i = n4; i < n; ++i) ++part[0][buckets[i]];
    for (int b = 0; b < lss_internal::kValueBuckets; ++b) {
      hist[b] = (part[0][b] + part[1][b]) + (part[2][b] + part[3][b]);
    }
  }
  __attribute__((target(TESSERA_FP_AVX512))) static void Range(const RangeArgs& a, int lo, int hi) {
    const LssProbe& p = *a.probe;
    const int stride = p.soa_stride;
    const uint64_t* A = p.soa_bits.data();
    const uint64_t* M = p.soa_mask.data();
    // b's words are broadcast from memory where they are used (an embedded
    // broadcast operand): 28 broadcast registers kept across the loop made
    // GCC spill the popcount accumulator to the stack.
    const long long* b_bits = reinterpret_cast<const long long*>(a.b_bits);
    __m512i bm[kMccMaskWords];
    for (int q = 0; q < kMccMaskWords; ++q) bm[q] = _mm512_set1_epi64(static_cast<long long>(a.b_mask[q]));
    const __m512i min_common = _mm512_set1_epi64(a.c->min_common_cells);
    const __m256 inner_lo = _mm256_set1_ps(a.inner_lo), inner_hi = _mm256_set1_ps(a.inner_hi);
    for (int q0 = lo; q0 < hi; q0 += 8) {
      const __mmask8 lanes = hi - q0 >= 8 ? static_cast<__mmask8>(0xff) : static_cast<__mmask8>((1u << (hi - q0)) - 1);
      const __m256 ta = _mm256_loadu_ps(p.sorted_theta.data() + q0);
      const __mmask8 inner =
          _mm256_cmp_ps_mask(ta, inner_lo, _CMP_GT_OQ) & _mm256_cmp_ps_mask(ta, inner_hi, _CMP_LT_OQ);
      __mmask8 m = lanes & inner;
      for (unsigned edge = lanes & ~inner; edge != 0; edge &= edge - 1) {
        const int l = __builtin_ctz(edge);
        if (Matchable(a, q0 + l)) m |= static_cast<__mmask8>(1u << l);
      }
      if (m == 0) continue;
      __m512i ma[kMccMaskWords];
      __m512i common = _mm512_setzero_si512(), a_out = _mm512_setzero_si512(), b_out = _mm512_setzero_si512();
      for (int q = 0; q < kMccMaskWords; ++q) {
        ma[q] = _mm512_loadu_si512(M + static_cast<size_t>(q) * stride + q0);
        common = _mm512_add_epi64(common, _mm512_popcnt_epi64(_mm512_and_si512(ma[q], bm[q])));
        a_out = _mm512_or_si512(a_out, _mm512_andnot_si512(bm[q], ma[q]));
        b_out = _mm512_or_si512(b_out, _mm512_andnot_si512(ma[q], bm[q]));
      }
      m &= _mm512_cmpge_epi64_mask(common, min_common);
      if (m == 0) continue;
      // Four accumulators (integer adds: the order does not matter).
      __m512i acc0 = _mm512_setzero_si512(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
      const uint64_t* aq = A + q0;
      static_assert(kMccBitWords % 4 == 0, "four accumulators");
      for (int w = 0; w < kMccBitWords; w += 4) {
        acc0 = _mm512_add_epi64(acc0, AndPopcount(aq + static_cast<size_t>(w) * stride, b_bits[w]));
        acc1 = _mm512_add_epi64(acc1, AndPopcount(aq + static_cast<size_t>(w + 1) * stride, b_bits[w + 1]));
        acc2 = _mm512_add_epi64(acc2, AndPopcount(aq + static_cast<size_t>(w + 2) * stride, b_bits[w + 2]));
        acc3 = _mm512_add_epi64(acc3, AndPopcount(aq + static_cast<size_t>(w + 3) * stride, b_bits[w + 3]));
      }
      const __m512i nab = _mm512_add_epi64(_mm512_add_epi64(acc0, acc1), _mm512_add_epi64(acc2, acc3));
      __m512i na = _mm512_loadu_si512(p.soa_count.data() + q0);
      __m512i nb = _mm512_set1_epi64(a.b_count);
      const __mmask8 need_a = _mm512_test_epi64_mask(a_out, a_out) & m;
      const __mmask8 need_b = _mm512_test_epi64_mask(b_out, b_out) & m;
      // |c_a| = |a & mb| and |c_b| = |b & ma| where the masks differ, from
      // the layer-sum planes (LayerSumPlanes): |a & m| = sum_q |p0_q & m_q| +
      // 2 |p1_q & m_q| + 4 |p2_q & m_q|, 12 popcounts instead of 24 (the same
      // integers). The probe's planes are precomputed (soa_layer_sum), b's
      // once per gallery cylinder.
      static_assert(kMccMaskWords == 4, "mask words per layer");
      // a's count is taken for every block, blended by lane: 47 % of the
      // blocks need it (45 % of the lanes, FVC2002 B) and which ones is
      // random, so a branch on need_a was mispredicted about half the time
      // (Intel profile, 2026-12-02); skipping its 12 popcounts saves less.
      // need_b is kept as a branch: 94 % of the blocks take it (predicted).
      {
        const uint64_t* P = p.soa_layer_sum.data() + q0;
        __m512i x0 = _mm512_setzero_si512(), x1 = x0, x2 = x0;
        for (int q = 0; q < kMccMaskWords; ++q) {
          const uint64_t* pq = P + static_cast<size_t>(3 * q) * stride;
          x0 = _mm512_add_epi64(x0, _mm512_popcnt_epi64(_mm512_and_si512(_mm512_loadu_si512(pq), bm[q])));
          x1 = _mm512_add_epi64(x1, _mm512_popcnt_epi64(_mm512_and_si512(_mm512_loadu_si512(pq + stride), bm[q])));
          x2 = _mm512_add_epi64(x2,
                                _mm512_popcnt_epi64(_mm512_and_si512(_mm512_loadu_si512(pq + 2 * stride), bm[q])));
        }
        const __m512i count = _mm512_add_epi64(x0, _mm512_add_epi64(_mm512_slli_epi64(x1, 1), _mm512_slli_epi64(x2, 2)));
        na = _mm512_mask_blend_epi64(need_a, na, count);
      }
      if (need_b != 0) {
        const long long* bp = reinterpret_cast<const long long*>(a.b_planes);
        __m512i x0 = _mm512_setzero_si512(), x1 = x0, x2 = x0;
        for (int q = 0; q < kMccMaskWords; ++q) {
          x0 = _mm512_add_epi64(x0, _mm512_popcnt_epi64(_mm512_and_si512(_mm512_set1_epi64(bp[3 * q]), ma[q])));
          x1 = _mm512_add_epi64(x1, _mm512_popcnt_epi64(_mm512_and_si512(_mm512_set1_epi64(bp[3 * q + 1]), ma[q])));
          x2 = _mm512_add_epi64(x2, _mm512_popcnt_epi64(_mm512_and_si512(_mm512_set1_epi64(bp[3 * q + 2]), ma[q])));
        }
        const __m512i count = _mm512_add_epi64(x0, _mm512_add_epi64(_mm512_slli_epi64(x1, 1), _mm512_slli_epi64(x2, 2)));
        nb = _mm512_mask_blend_epi64(need_b, nb, count);
      }
      // lambda = 1 - sqrt(nx) / (sqrt(na) + sqrt(nb)), 0 when na + nb = 0.
      // sqrt(na), sqrt(nb) of the whole bit counts are precomputed (the
      // probe's soa_sqrt_count, b's from the table: sqrtf is correctly
      // rounded, so the same floats); only lanes whose masks differ take
      // square roots of their counts. Counts go to float straight from 64-bit
      // lanes (vcvtqq2ps, exact below 2^24): one shuffle-port uop fewer than
      // narrowing to 32 bits first.
      const __m512i sum = _mm512_add_epi64(na, nb);
      const __m512i nx = _mm512_sub_epi64(sum, _mm512_add_epi64(nab, nab));
      __m256 fa = _mm256_loadu_ps(p.soa_sqrt_count.data() + q0);
      fa = _mm256_mask_sqrt_ps(fa, need_a, _mm512_cvtepi64_ps(na));
      __m256 fb = _mm256_set1_ps(a.sq[a.b_count]);
      if (need_b != 0) fb = _mm256_mask_sqrt_ps(fb, need_b, _mm512_cvtepi64_ps(nb));
      const __m256 fx = _mm256_sqrt_ps(_mm512_cvtepi64_ps(nx));
      const __m256 lambda = _mm256_sub_ps(_mm256_set1_ps(1.0f), _mm256_div_ps(fx, _mm256_add_ps(fa, fb)));
      const __mmask8 nonempty = _mm512_test_epi64_mask(sum, sum);
      const __mmask8 positive = _mm256_cmp_ps_mask(lambda, _mm256_setzero_ps(), _CMP_GT_OQ);
      // The kept lanes, compressed in registers and stored as full vectors
      // (the buffers have 8 lanes of slack): no per-entry scalar work. No
      // branch on `keep` either: it is known only at the end of the square
      // root and division chain, and a mispredicted branch there exposed
      // that chain's latency (Intel profile, 2026-12-02: the instructions
      // after vsqrtps / vdivps were the hottest of Range); storing nothing
      // new when keep = 0 costs two stores.
      const __mmask8 keep = m & nonempty & positive;
      const __m256i rows = _mm256_maskz_loadu_epi32(lanes, p.by_theta.data() + q0);
      const __m256i flat = _mm256_or_si256(_mm256_slli_epi32(rows, a.column_bits), _mm256_set1_epi32(a.j));
      const size_t at = *a.n_found;
      _mm256_storeu_ps(a.values + at, _mm256_maskz_compress_ps(keep, lambda));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.index + at), _mm256_maskz_compress_epi32(keep, flat));
      *a.n_found = at + __builtin_popcount(keep);
    }
  }
};
#endif

// always_inline: each instantiation is expanded into a wrapper compiled for
// its ISA (ScoreAvx512 below), so the popcount kernel inlines too.
// threshold > 0: returns kLssPrunedScore instead when the score's upper bound
// (lss_impl.h) from the local similarities' histogram is below it.
template <typename Path>
__attribute__((always_inline)) inline float ScoreImpl(const LssProbe& probe, const MccGallery& gallery, int t,
                                                      MccScore kind, const LssConstants& c, float threshold) {
  const std::vector<MccCylinder>& pa = probe.cylinders.cylinders;
  const int na = static_cast<int>(pa.size());
  const int nb = gallery.template_size(t);
  if (na == 0 || nb == 0) return 0.0f;
  const int column_bits = ColumnBits(nb);
  Scratch& s = ThreadScratch();
  const size_t capacity = static_cast<size_t>(na) * nb + 8;
  if (s.values.size() < capacity) {
    s.values.resize(capacity);
    s.index.resize(capacity);
    s.buckets.resize(capacity + 16);
    s.entries.resize(capacity);
  }
  s.n_found = 0;
  const float* sq = Sqrts().v;
  const size_t start = gallery.start[t];
  const uint64_t* gb = &gallery.bits[start * kMccBitWords];
  const uint64_t* gm = &gallery.mask[start * kMccMaskWords];
  const float* bt = &gallery.theta[start];
  const float* sorted = probe.sorted_theta.data();
  // Probe cylinders whose direction may be within delta_theta of theta_b form
  // a circular range of the sorted directions; the exact test runs inside it.
  const float reach = c.delta_theta + 1e-3f;
  // Only the best `limit` entries can be used (nR for LSS-R, nP for LSS);
  // SelectBest keeps them after all are collected.
  const size_t limit = kind == MccScore::kLssR ? static_cast<size_t>(std::min(na, nb))
                                               : static_cast<size_t>(c.np_table[std::min(na, nb)]);
  alignas(64) uint64_t b_bits[kMccBitWords];
  uint64_t b_mask[kMccMaskWords];
  for (int j = 0; j < nb; ++j) {
    const float tb = bt[j];
    for (int w = 0; w < kMccBitWords; ++w) b_bits[w] = gb[static_cast<size_t>(w) * nb + j];
    for (int w = 0; w < kMccMaskWords; ++w) b_mask[w] = gm[static_cast<size_t>(w) * nb + j];
    const int b_count = gallery.bit_count[start + j];
    // The probe positions whose direction may be within delta_theta of tb:
    // the main range and the parts that wrap around 0 / 2 pi. The exact test
    // runs inside them. A wrapped part next to the main range is merged with
    // it into one range of the positions twice round the circle (LssProbe):
    // below 0, it starts in the first round near 2 pi (the band moved by
    // 2 pi); past 2 pi, it runs on into positions >= na. Fewer, longer
    // ranges leave fewer idle lanes. (Plain code, not a lambda: the closure
    // would not carry the caller's target ISA, and the popcount kernel must
    // inline.)
    int ranges[3][2] = {{0, 0}, {0, 0}, {0, 0}};
    float band_shift = 0.0f;
    const float lo_theta = tb - reach, hi_theta = tb + reach;
    if (reach >= fpmath::kPiF) {
      ranges[0][1] = na;
    } else {
      SearchBounds bounds;
      Path::Search(sorted, na, lo_theta, hi_theta, &bounds);
      const int lo = bounds.lo, hi = bounds.hi;
      ranges[0][0] = lo;
      ranges[0][1] = hi;
      if (lo_theta < 0.0f) {
        ranges[1][0] = std::max(bounds.wrap_lo, hi);
        ranges[1][1] = na;
        if (lo == 0 && ranges[1][0] < na) {  // [w', na) + [0, hi) = [w', na + hi)
          ranges[0][0] = ranges[1][0];
          ranges[0][1] = na + hi;
          ranges[1][0] = ranges[1][1] = 0;
          band_shift = fpmath::kTwoPiF;
        }
      }
      if (hi_theta > fpmath::kTwoPiF) {
        ranges[2][0] = 0;
        ranges[2][1] = std::min(bounds.wrap_hi, lo);
        if (hi == na && band_shift == 0.0f) {  // [lo, na) + [0, w') = [lo, na + w')
          ranges[0][1] = na + ranges[2][1];
          ranges[2][1] = 0;
        }
      }
    }
    uint64_t b_planes[3 * kMccMaskWords];
    LayerSumPlanes(b_bits, b_planes);
    RangeArgs args{&probe, tb, tb - c.delta_theta + 1e-3f, tb + c.delta_theta - 1e-3f,
                   b_bits, b_mask, b_planes, b_count, j, column_bits, &c, sq, s.values.data(), s.index.data(),
                   &s.n_found};
    for (int i = 0; i < 3; ++i) {
      if (ranges[i][1] <= ranges[i][0]) continue;
      if (i == 0 && band_shift != 0.0f) {
        RangeArgs shifted = args;
        shifted.inner_lo = (tb + band_shift) - c.delta_theta + 1e-3f;
        shifted.inner_hi = (tb + band_shift) + c.delta_theta - 1e-3f;
        Path::Range(shifted, ranges[i][0], ranges[i][1]);
      } else {
        Path::Range(args, ranges[i][0], ranges[i][1]);
      }
    }
  }
  int hist[lss_internal::kValueBuckets];
  Path::Histogram(s.values.data(), s.n_found, hist, s.buckets.data());
  if (threshold > 0.0f &&
      lss_internal::HistogramScoreUpperBound(hist, kind == MccScore::kLssR, std::min(na, nb),
                                             static_cast<int>(s.n_found), c) < threshold) {
    return kLssPrunedScore;  // the score is below the threshold: skip selection and relaxation
  }
#if defined(__x86_64__)
  if (Path::kAvx512) {
    SelectBestAvx512(s, limit, hist);
  } else {
    SelectBest(s, limit, hist);
  }
#else
  SelectBest(s, limit, hist);
#endif
  return GlobalScore(s, probe, nb, &gallery.x[start], &gallery.y[start], bt, kind, c, threshold, Path::kAvx512);
}

bool CpuHasAvx512Popcount() {
#if defined(__x86_64__)
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vpopcntdq");
  }();
  return has;
#else
  return false;
#endif
}

}  // namespace

// kAuto: kAvx512 wherever the CPU has AVX-512 VPOPCNTDQ, on every vendor.
// Measured side by side in one fingerprint_cpu_bench run each
// (single-thread LSS-R, FVC2002 DB1-DB4, 2026-12-02): Intel Xeon (family 6
// model 207, the H200 host) 83.5 K matches/s vs 39.8 K on kScalar, and 59.9 K
// vs 26.1 K in a slower round (2.1-2.3x); AMD EPYC (the dev VM) 120.0 K vs
// 54.3 K (2.2x). The vector path wins by the same factor on both, so the rule
// is the CPU feature alone, with no vendor or model test.
LssCpuPath ResolveCpuPath(LssCpuPath requested) {
  const bool vector = CpuHasAvx512Popcount();
  switch (requested) {
    case LssCpuPath::kScalar:
      return LssCpuPath::kScalar;
    case LssCpuPath::kAvx512:
      return vector ? requested : LssCpuPath::kScalar;
    case LssCpuPath::kAuto:
      break;
  }
  // kAuto, and any value outside the enum.
  return vector ? LssCpuPath::kAvx512 : LssCpuPath::kScalar;
}

std::vector<LssCpuPath> AvailableCpuPaths() {
  std::vector<LssCpuPath> paths = {LssCpuPath::kScalar};
  if (CpuHasAvx512Popcount()) {
    paths.push_back(LssCpuPath::kAvx512);
  }
  return paths;
}

const char* LssCpuPathName(LssCpuPath path) {
  switch (path) {
    case LssCpuPath::kAuto:
      return "auto";
    case LssCpuPath::kScalar:
      return "scalar-popcnt";
    case LssCpuPath::kAvx512:
      return "avx512-vpopcntdq";
  }
  return "unknown";
}

const char* PopcountPath(const LssConstants& c) { return LssCpuPathName(ResolveCpuPath(c.cpu_path)); }

absl::StatusOr<LssCpuPath> ParseLssCpuPath(absl::string_view name) {
  if (name == "scalar") return LssCpuPath::kScalar;
  for (LssCpuPath path : {LssCpuPath::kAuto, LssCpuPath::kScalar, LssCpuPath::kAvx512}) {
    if (name == LssCpuPathName(path)) return path;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown LSS CPU path '", name,
                                                 "' (auto, scalar-popcnt, avx512-vpopcntdq)"));
}

#if defined(__x86_64__)
__attribute__((target(TESSERA_FP_AVX512), noinline)) float ScoreAvx512(const LssProbe& probe,
                                                                               const MccGallery& gallery, int t,
                                                                               MccScore kind, const LssConstants& c,
                                                                               float threshold) {
  return ScoreImpl<Avx512Path>(probe, gallery, t, kind, c, threshold);
}
#endif

__attribute__((noinline)) float ScoreScalar(const LssProbe& probe, const MccGallery& gallery, int t, MccScore kind,
                                            const LssConstants& c, float threshold) {
  return ScoreImpl<ScalarPath>(probe, gallery, t, kind, c, threshold);
}

float ScoreOrPrune(const LssProbe& probe, const MccGallery& gallery, int t, MccScore kind, const LssConstants& c,
                   float threshold) {
  switch (ResolveCpuPath(c.cpu_path)) {
#if defined(__x86_64__)
    case LssCpuPath::kAvx512:
      return ScoreAvx512(probe, gallery, t, kind, c, threshold);
#endif
    default:
      return ScoreScalar(probe, gallery, t, kind, c, threshold);
  }
}

float Score(const LssProbe& probe, const MccGallery& gallery, int t, MccScore kind, const LssConstants& c) {
  return ScoreOrPrune(probe, gallery, t, kind, c, 0.0f);
}

double ScoreUpperBound(const MccTemplate& a, const MccTemplate& b, MccScore kind, const LssConstants& c) {
  const int na = static_cast<int>(a.cylinders.size()), nb = static_cast<int>(b.cylinders.size());
  if (na == 0 || nb == 0) return 0.0;
  int hist[lss_internal::kValueBuckets] = {0};
  int n_pos = 0;
  for (int r = 0; r < na; ++r) {
    for (int j = 0; j < nb; ++j) {
      const float v = LocalSimilarity(a.cylinders[r], b.cylinders[j], c);
      if (v > 0.0f) {
        ++hist[ValueBucket(v)];
        ++n_pos;
      }
    }
  }
  return lss_internal::HistogramScoreUpperBound(hist, kind == MccScore::kLssR, std::min(na, nb), n_pos, c);
}

float Score(const MccTemplate& a, const MccTemplate& b, MccScore kind, const LssConstants& c) {
  MccGallery g;
  g.Append(b);
  return Score(PrepareProbe(a), g, 0, kind, c);
}

namespace {

// The positive local similarities of a x b, best first (KeyBefore order).
std::vector<Entry> SortedPositiveSimilarities(const MccTemplate& a, const MccTemplate& b, const LssConstants& c) {
  const int na = static_cast<int>(a.cylinders.size()), nb = static_cast<int>(b.cylinders.size());
  std::vector<Entry> all;
  for (int r = 0; r < na; ++r)
    for (int j = 0; j < nb; ++j) {
      const float v = LocalSimilarity(a.cylinders[r], b.cylinders[j], c);
      if (v > 0.0f) all.push_back({v, r * nb + j});
    }
  std::sort(all.begin(), all.end(), EntryKeyBefore());
  return all;
}

}  // namespace

float ReferenceScore(const MccTemplate& a, const MccTemplate& b, MccScore kind, const LssConstants& c) {
  // Written for clarity, not speed: the definition the optimized path and
  // the CUDA kernel must reproduce exactly.
  if (kind == MccScore::kLssR) return ReferenceLssRSelection(a, b, c).score;
  const int na = static_cast<int>(a.cylinders.size()), nb = static_cast<int>(b.cylinders.size());
  if (na == 0 || nb == 0) return 0.0f;
  const int np = c.np_table[std::min(na, nb)];
  const std::vector<Entry> all = SortedPositiveSimilarities(a, b, c);
  float sum = 0.0f;
  for (int i = 0; i < np && i < static_cast<int>(all.size()); ++i) sum = sum + all[i].value;
  return sum / static_cast<float>(np);
}

LssRSelection ReferenceLssRSelection(const MccTemplate& a, const MccTemplate& b, const LssConstants& c) {
  LssRSelection out;
  const int na = static_cast<int>(a.cylinders.size()), nb = static_cast<int>(b.cylinders.size());
  if (na == 0 || nb == 0) return out;
  const int n_min = std::min(na, nb);
  const int np = c.np_table[n_min];
  out.np = np;
  std::vector<Entry> all = SortedPositiveSimilarities(a, b, c);
  if (static_cast<int>(all.size()) > n_min) all.resize(n_min);
  std::sort(all.begin(), all.end(), [](const Entry& x, const Entry& y) { return x.index < y.index; });
  const int p = static_cast<int>(all.size());
  if (p == 0) return out;
  std::vector<float> lambda0(p), lambda(p), next(p);
  for (int t = 0; t < p; ++t) lambda0[t] = lambda[t] = all[t].value;
  if (n_min > 1) {
    std::vector<float> rho(static_cast<size_t>(p) * p, 0.0f);
    for (int t = 0; t < p; ++t)
      for (int k = 0; k < p; ++k) {
        if (k == t) continue;
        const MccCylinder& at = a.cylinders[all[t].index / nb];
        const MccCylinder& ak = a.cylinders[all[k].index / nb];
        const MccCylinder& bt = b.cylinders[all[t].index % nb];
        const MccCylinder& bk = b.cylinders[all[k].index % nb];
        rho[static_cast<size_t>(t) * p + k] =
            lss_internal::Rho(at.x, at.y, at.theta, ak.x, ak.y, ak.theta, bt.x, bt.y, bt.theta, bk.x, bk.y, bk.theta, c);
      }
    const float denominator = static_cast<float>(n_min - 1);
    for (int it = 0; it < c.relaxation_iterations; ++it) {
      for (int t = 0; t < p; ++t) {
        float sum = 0.0f;
        for (int k = 0; k < p; ++k) sum = sum + fpmath::Mul(rho[static_cast<size_t>(t) * p + k], lambda[k]);
        next[t] = lss_internal::Relaxed(lambda[t], sum, denominator, c);
      }
      lambda.swap(next);
    }
  }
  std::vector<uint8_t> taken(p, 0);
  float sum = 0.0f;
  for (int i = 0; i < std::min(np, p); ++i) {
    int best = -1;
    float best_eff = 0.0f;
    for (int t = 0; t < p; ++t) {
      const float eff = lambda[t] / lambda0[t];
      if (!taken[t] && (best < 0 || eff > best_eff)) {
        best = t;
        best_eff = eff;
      }
    }
    taken[best] = 1;
    sum = sum + lambda[best];
    out.pairs.push_back({all[best].index / nb, all[best].index % nb, lambda0[best], lambda[best]});
  }
  out.score = std::min(1.0f, std::max(0.0f, sum / static_cast<float>(np)));
  return out;
}

void ScoreGallery(const LssProbe& probe, const MccGallery& gallery, MccScore kind, const LssConstants& c,
                  float* scores, int threads) {
  const int n = gallery.num_templates();
  if (threads <= 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = std::min(threads, std::max(1, n));
  if (threads == 1) {
    for (int t = 0; t < n; ++t) scores[t] = Score(probe, gallery, t, kind, c);
    return;
  }
  std::vector<std::thread> pool;
  for (int w = 0; w < threads; ++w) {
    pool.emplace_back([&, w] {
      for (int t = w; t < n; t += threads) scores[t] = Score(probe, gallery, t, kind, c);
    });
  }
  for (auto& th : pool) th.join();
}

}  // namespace cpu
}  // namespace fingerprint
}  // namespace tessera
