// CUDA LSS / LSS-R: one probe against a whole gallery resident on the GPU.
//
// Two kernels, same scores: ScoreKernelMma (LssCudaKernel::kWarpMma, the
// default), one warp per comparison with step 1 on the tensor cores, and
// ScoreKernel (kBlock), one 128-thread block per comparison, the reference and
// the fallback. Steps 2 and 3 are one code path (SelectAndScore) that a warp
// or a whole block runs (WarpGroup, BlockGroup).
//
// Layout: the gallery is MccGallery's structure of arrays (template-blocked,
// word-major: consecutive threads reading consecutive cylinders of a template
// coalesce) with the fingerprint start-index table `start`. Each thread block
// keeps the probe's cylinders in shared memory for its whole life and walks
// gallery templates in a grid-stride loop (ScoreKernel: one template per
// block at a time; ScoreKernelMma: one per warp). Per template:
//   1. local similarities: for each entry of the nA x nB matrix (row = probe
//      cylinder, column = gallery cylinder) test directions, common cells,
//      mask inclusion, and count bits (__popcll in ScoreKernel, binary tensor
//      core products in ScoreKernelMma) - the same integers as the CPU, hence
//      the same lambda (lss_impl.h); the matrix lives in shared memory;
//   2. selection of the best K (nR for LSS-R, nP for LSS) by the key (value
//      descending, flat index ascending): a radix select over the float bit
//      patterns (positive floats order like their bits) finds the K-th key,
//      then an ordered scan compacts the selected entries in flat-index order
//      - the CPU's canonical order;
//   3. LSS-R: rho for every ordered pair of selected entries (lss_impl.h, in
//      the shared region the matrix used; kWarpMma's warps compute only the
//      pairs that pass a cheap distance test, CompactRelaxSelection), n_rel
//      relaxation steps in which thread t sums over k in ascending order
//      (the nonzero rho only: adding +0 changes no bit), then one warp picks the nP
//      pairs of highest efficiency (ties: lower t) and adds their relaxed
//      similarities in that order. LSS: the K entries sorted by key, summed.
// Every float operation and summation order is the CPU reference's, so the
// scores are identical bit for bit (lss_cuda_test).
//
// Multi-latent (EnqueueScoreGalleryMulti, issue 37): ScoreKernelMma with L
// probes in one launch, block b scoring latent b % L over the templates of
// group b / L, so a search batch reads the gallery once per pass instead of
// once per latent; its options (launch shape, step clock) change only the
// speed (lss_multi_cuda_test: every shape equals the CPU bit for bit).
//
// Why the selection is lean (it replaced an older warp-mma kernel whose
// selection cost more; H200 2026-12-02, 10^6 templates x 16 crops: 51.10 vs
// 45.10 M matches/s resident, bench/results/2026-12-02-h200-session6.md):
//   * the radix histogram packs two 16-bit counters per word (na x nb <= 25600
//     entries) and sits first in the scratch (16-byte aligned: one int4 per
//     lane clears it or reads a lane's 8 digits);
//   * the radix passes start at the highest bit where the largest and smallest
//     positive key differ (every positive key shares the bits above it, so the
//     skipped passes would put every entry in one digit), and stop as soon as
//     the K-th key's digit is taken whole: then the K best are exactly the keys
//     >= that prefix;
//   * the selected entries keep (row << 16 | column) instead of the flat index
//     (the same order), so rho needs no integer divisions, and rho's pair
//     (t, k) advances without dividing either;
//   * each efficiency lam / lambda0 is divided once, not once per pick.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/fingerprint/fp_math.h"
#include "kernels/fingerprint/lss.h"
#include "kernels/fingerprint/lss_impl.h"
#include "kernels/fingerprint/lss_mma_layout.h"

namespace tessera {
namespace fingerprint {
namespace cuda {
namespace {

constexpr int kThreads = 128;  // ScoreKernel's block
constexpr int kWarps = kThreads / 32;
constexpr unsigned kFull = 0xffffffffu;
// ScoreKernelMma: up to 8 warps (templates) per block, registers capped so
// that kMmaMinBlocks such blocks fit an SM (64 per thread; uncapped, the
// LSS-R kernel takes 70, i.e. 3 blocks); the other limit is the scratch the
// host plans (lss_mma::PlanSplit).
constexpr int kWarpKernelMaxWarps = 8;
constexpr int kMmaMinBlocks = 4;
// ScoreKernelMma's one optional step (kStageClock; same scores): the clock
// cycles of each step added up (StageClock), diagnostics for the benchmark.
// (Measured and removed, lss.h LssMultiOptions: transposed rho, a
// warp-aggregated radix histogram, rho coordinates in registers, sparse rho,
// count roots, skipped MMA products, compact lambda. The efficiency picks in
// registers and compact rho (CompactRelaxSelection) won and are always on.)

// Diagnostics: lane 0 of each warp adds the clock64() cycles between a
// comparison's step boundaries to counters[step] (cuda::kLssStageNames).
// Only kernels with kStageClock get one; the others pass null, which the
// inlined checks fold away.
struct StageClock {
  unsigned long long* counters;
  long long last = 0;
  __device__ void Start() { last = clock64(); }
  __device__ void Mark(int step) {
    const long long now = clock64();
    if ((threadIdx.x & 31) == 0) atomicAdd(counters + step, static_cast<unsigned long long>(now - last));
    last = now;
  }
};
__device__ __forceinline__ void MarkStep(StageClock* clock, int step) {
  if (clock != nullptr) clock->Mark(step);
}

struct ProbeArgs {
  const uint64_t* bits;  // n x 24, cylinder-major
  const uint64_t* mask;  // n x 4
  const float* x;
  const float* y;
  const float* theta;
  const int* count;       // popcount of each cylinder's bits
  const int* mask_count;  // popcount of each cylinder's mask (ScoreKernelMma)
  const uint4* frag;      // the A fragments of ScoreKernelMma: m_tiles x 7 chunks x 32 lanes
  int m_tiles;            // ceil(n / 16)
  int n;
};

struct GalleryArgs {
  const int32_t* start;
  const uint64_t* bits;
  const uint64_t* mask;
  const float* x;
  const float* y;
  const float* theta;
  const uint16_t* count;
  int num_templates;
  int max_size;  // the widest template the scratch holds
};

// One comparison's scratch in shared memory (a block's in ScoreKernel, a
// warp's in ScoreKernelMma), 16-byte aligned: the packed radix histogram, the
// probe x gallery similarity matrix (later rho), the selected entries, the
// lambda arrays.
struct ComparisonScratch {
  static constexpr int kHistWords = 128;  // 256 digits, two 16-bit counters per word
  // Bytes: lss_mma::ComparisonScratchBytes (the host plans with it).
  __device__ ComparisonScratch(unsigned char* base, int matrix_entries, int k_capacity)
      : hist(reinterpret_cast<int*>(base)),
        gamma(reinterpret_cast<float*>(hist + kHistWords)),
        sel_value(gamma + matrix_entries),
        sel_index(reinterpret_cast<int*>(sel_value + k_capacity)),
        lambda0(reinterpret_cast<float*>(sel_index + k_capacity)),
        lambda_a(lambda0 + k_capacity),
        lambda_b(lambda_a + k_capacity) {}
  int* hist;
  float* gamma;
  float* sel_value;
  int* sel_index;  // row << 16 | column
  float* lambda0;
  float* lambda_a;
  float* lambda_b;
};

// Exclusive prefix sum over the block; *total gets the block's sum. All
// threads must call it.
__device__ int BlockExclusiveScan(int v, int* warp_sums, int* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int inc = v;
  for (int o = 1; o < 32; o <<= 1) {
    const int other = __shfl_up_sync(kFull, inc, o);
    if (lane >= o) inc += other;
  }
  if (lane == 31) warp_sums[warp] = inc;
  __syncthreads();
  int before = 0, sum = 0;
  for (int w = 0; w < kWarps; ++w) {
    before += w < warp ? warp_sums[w] : 0;
    sum += warp_sums[w];
  }
  __syncthreads();  // warp_sums may be reused right away
  *total = sum;
  return before + inc - v;
}

__device__ __forceinline__ int WarpSum(int v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

// The threads that score one comparison together: one warp (ScoreKernelMma)
// or the whole block (ScoreKernel). Steps 2-3 are written once against this
// interface; a warp needs only __syncwarp and ballots, so warps on different
// templates never wait for each other.
struct WarpGroup {
  static constexpr int kSize = 32;
  __device__ int rank() const { return threadIdx.x & 31; }
  __device__ bool in_first_warp() const { return true; }
  __device__ void Sync() const { __syncwarp(); }
  // How many members before this one (by rank) have gt / eq set, and how
  // many in all.
  __device__ void CountBefore(bool gt, bool eq, int* before_gt, int* before_eq, int* total_gt, int* total_eq) const {
    const unsigned gt_mask = __ballot_sync(kFull, gt), eq_mask = __ballot_sync(kFull, eq);
    const unsigned lanes_before = (1u << rank()) - 1u;
    *before_gt = __popc(gt_mask & lanes_before);
    *before_eq = __popc(eq_mask & lanes_before);
    *total_gt = __popc(gt_mask);
    *total_eq = __popc(eq_mask);
  }
  // Gives every member the first warp's values (uniform across that warp);
  // also the barrier after which the radix histogram may be cleared.
  __device__ void ShareFromFirstWarp(int*, int*, int*) const { __syncwarp(); }
};

struct BlockGroup {
  static constexpr int kSize = kThreads;
  int* warp_sums;  // kWarps ints of shared memory (BlockExclusiveScan)
  int* shared;     // 3 ints of shared memory (ShareFromFirstWarp)
  __device__ int rank() const { return threadIdx.x; }
  __device__ bool in_first_warp() const { return threadIdx.x < 32; }
  __device__ void Sync() const { __syncthreads(); }
  __device__ void CountBefore(bool gt, bool eq, int* before_gt, int* before_eq, int* total_gt, int* total_eq) const {
    int total = 0;
    const int excl = BlockExclusiveScan(static_cast<int>(gt) | (static_cast<int>(eq) << 16), warp_sums, &total);
    *before_gt = excl & 0xffff;
    *before_eq = excl >> 16;
    *total_gt = total & 0xffff;
    *total_eq = total >> 16;
  }
  // The next write to `shared` comes after the next histogram barrier, which
  // every thread reaches only after reading it here.
  __device__ void ShareFromFirstWarp(int* a, int* b, int* c) const {
    if (threadIdx.x == 0) {
      shared[0] = *a;
      shared[1] = *b;
      shared[2] = *c;
    }
    __syncthreads();
    *a = shared[0];
    *b = shared[1];
    *c = shared[2];
  }
};

// LSS: the p selected entries ordered by key, summed in that order, over np.
// One thread. ((row << 16 | column) orders ties like the flat index.)
__device__ float SortedSelectionMean(float* sel_value, int* sel_index, int p, int np) {
  for (int a = 1; a < p; ++a) {
    const float v = sel_value[a];
    const int ix = sel_index[a];
    int b = a - 1;
    while (b >= 0 && lss_internal::KeyBefore(v, ix, sel_value[b], sel_index[b])) {
      sel_value[b + 1] = sel_value[b];
      sel_index[b + 1] = sel_index[b];
      --b;
    }
    sel_value[b + 1] = v;
    sel_index[b + 1] = ix;
  }
  float sum = 0.0f;
  for (int a = 0; a < p; ++a) sum = sum + sel_value[a];
  return p == 0 ? 0.0f : sum / static_cast<float>(np);
}

// One relaxation pass: nxt[t] for t = first, first + stride, ... < p (rho
// row-major: rho(t, k) at t p + k).
__device__ void RelaxationPass(const float* rho, const float* lam, float* nxt, int p, int first, int stride,
                               float denominator, const LssConstants& c) {
  for (int t = first; t < p; t += stride) {
    float sum = 0.0f;
    const float* row = rho + static_cast<size_t>(t) * p;
    for (int k = 0; k < p; ++k) sum = sum + fpmath::Mul(row[k], lam[k]);
    nxt[t] = lss_internal::Relaxed(lam[t], sum, denominator, c);
  }
}

// The np pairs of highest efficiency lam / lambda0 (ties: lower t), summed in
// selection order, each efficiency divided once into `eff` (p floats of
// scratch); picked entries get efficiency -2 (below every real one, which is
// >= 0, and below the -1 a search starts from). One whole warp; the score is
// valid in lane 0.
__device__ float EfficientPairsScore(float* eff, const float* lam, const float* lambda0, int p, int np, int lane) {
  for (int t = lane; t < p; t += 32) eff[t] = lam[t] / lambda0[t];
  __syncwarp();
  const int keep = min(np, p);
  float sum = 0.0f;
  for (int i = 0; i < keep; ++i) {
    float best_eff = -1.0f;
    int best_t = INT_MAX;
    for (int t = lane; t < p; t += 32) {
      const float e = eff[t];
      if (e > best_eff || (e == best_eff && t < best_t)) {
        best_eff = e;
        best_t = t;
      }
    }
    for (int o = 16; o > 0; o >>= 1) {
      const float other_eff = __shfl_down_sync(kFull, best_eff, o);
      const int other_t = __shfl_down_sync(kFull, best_t, o);
      if (other_eff > best_eff || (other_eff == best_eff && other_t < best_t)) {
        best_eff = other_eff;
        best_t = other_t;
      }
    }
    best_t = __shfl_sync(kFull, best_t, 0);
    if (lane == 0) {
      eff[best_t] = -2.0f;
      sum = sum + lam[best_t];
    }
    __syncwarp();
  }
  return fminf(1.0f, fmaxf(0.0f, sum / static_cast<float>(np)));
}

// EfficientPairsScore for p <= 32 (one pair per lane, t = lane): the same
// picks in the same order - the largest efficiency, ties to the lower t - by
// one max-reduction over keys and one ballot per pick instead of a five-step
// shuffle reduction (H100 2026-12-07, 10^6 x 16 latents: +9 % over the
// shuffle picks, bench/results/logs/2026-12-07-h100-issue37-r2/lss/). Efficiencies are finite and >= 0, so they order like
// their bit patterns; key = bits + 1, 0 once picked (below every unpicked
// key, which is >= 1). The relaxed values are summed in pick order, as there.
__device__ float EfficientPairsScoreInRegisters(const float* lam, const float* lambda0, int p, int np, int lane) {
  const bool mine = lane < p;
  const float my_lam = mine ? lam[lane] : 0.0f;
  const float e = mine ? my_lam / lambda0[lane] : 0.0f;
  unsigned key = mine ? __float_as_uint(e) + 1u : 0u;
  const int keep = min(np, p);
  float sum = 0.0f;
  for (int i = 0; i < keep; ++i) {
    const unsigned best = __reduce_max_sync(kFull, key);
    const int src = __ffs(__ballot_sync(kFull, key == best)) - 1;
    const float picked = __shfl_sync(kFull, my_lam, src);
    if (lane == src) key = 0u;
    sum = sum + picked;
  }
  return fminf(1.0f, fmaxf(0.0f, sum / static_cast<float>(np)));
}

// lss_internal::Rho with the probe-side relations computed on demand too:
// the same operations as Geometry + RhoFromGeometry (so the same value), but a
// pair rejected by the distance test (most of them) skips both atan2s.
__device__ __forceinline__ float RhoLazy(float xat, float yat, float tat, float xak, float yak, float tak, float xbt,
                                         float ybt, float tbt, float xbk, float ybk, float tbk, const LssConstants& c) {
  const lss_internal::LazyGeometry a{xat, yat, tat, xak, yak, tak};
  const lss_internal::LazyGeometry b{xbt, ybt, tbt, xbk, ybk, tbk};
  const float d1 = fabsf(a.dist() - b.dist());
  if (d1 >= c.cut1) return 0.0f;
  const float d2 = fabsf(fpmath::AngleDiffF(a.dir(), b.dir()));
  if (d2 >= c.cut2) return 0.0f;
  const float d3 = fabsf(fpmath::AngleDiffF(a.radial(), b.radial()));
  if (d3 >= c.cut3) return 0.0f;
  return lss_internal::RhoValue(d1, d2, d3, c);
}

// Keys that bound every positive one, for a caller that did not track the
// largest and smallest (RadixThreshold then starts at the top bit).
constexpr unsigned kAnyKeyHi = ~0u, kAnyKeyLo = 0u;

// Threshold key of the K best positive entries of gamma (K < n_pos): the
// selection is every positive entry with bits > *threshold plus the first
// *need_eq (flat order) with bits == *threshold. `hi`, `lo`: the largest and
// smallest positive key (or kAnyKeyHi, kAnyKeyLo). The whole group.
template <typename Group>
__device__ __forceinline__ void RadixThreshold(const Group& group, const ComparisonScratch& s, int entries, int K,
                                               unsigned hi, unsigned lo, unsigned* threshold, int* need_eq) {
  const unsigned diff = hi ^ lo;
  int top = diff == 0u ? 0 : 32 - __clz(static_cast<int>(diff));  // bits [0, top) vary among positive keys
  unsigned prefix = top >= 32 ? 0u : hi & (~0u << top);
  unsigned prefix_mask = top >= 32 ? 0u : ~0u << top;
  int remaining = K;
  int4* hist4 = reinterpret_cast<int4*>(s.hist);
  while (top > 0) {
    const int shift = top > 8 ? top - 8 : 0;
    const unsigned digit_mask = (1u << (top - shift)) - 1u;
    for (int i = group.rank(); i < ComparisonScratch::kHistWords / 4; i += Group::kSize) {
      hist4[i] = make_int4(0, 0, 0, 0);
    }
    group.Sync();
    for (int e = group.rank(); e < entries; e += Group::kSize) {
      const float v = s.gamma[e];
      const unsigned bits = __float_as_uint(v);
      if (v > 0.0f && (bits & prefix_mask) == prefix) {
        const unsigned d = (bits >> shift) & digit_mask;
        atomicAdd(&s.hist[d >> 1], 1 << ((d & 1u) * 16));
      }
    }
    group.Sync();
    int digit = 0, rest = 0, whole = 0;
    if (group.in_first_warp()) {
      // Lane l owns digits 255 - 8 l .. 248 - 8 l (largest first): words
      // 127 - 4 l .. 124 - 4 l, the odd digit in each word's high half.
      const int lane = threadIdx.x & 31;
      const int4 w = hist4[31 - lane];
      const int own[8] = {w.w >> 16, w.w & 0xffff, w.z >> 16, w.z & 0xffff,
                          w.y >> 16, w.y & 0xffff, w.x >> 16, w.x & 0xffff};
      int lane_sum = 0;
#pragma unroll
      for (int q = 0; q < 8; ++q) lane_sum += own[q];
      int inc = lane_sum;
      for (int o = 1; o < 32; o <<= 1) {
        const int other = __shfl_up_sync(kFull, inc, o);
        if (lane >= o) inc += other;
      }
      int above = inc - lane_sum;
      const bool mine = above < remaining && remaining <= inc;
      if (mine) {
#pragma unroll
        for (int q = 0; q < 8; ++q) {
          if (remaining <= above + own[q]) {
            digit = 255 - 8 * lane - q;
            rest = remaining - above;
            whole = rest == own[q];
            break;
          }
          above += own[q];
        }
      }
      const unsigned who = __ballot_sync(kFull, mine);
      const int src = who != 0 ? __ffs(who) - 1 : 0;
      digit = __shfl_sync(kFull, digit, src);
      rest = __shfl_sync(kFull, rest, src);
      whole = __shfl_sync(kFull, whole, src);
    }
    group.ShareFromFirstWarp(&digit, &rest, &whole);  // hist is cleared by the next pass
    prefix |= static_cast<unsigned>(digit) << shift;
    prefix_mask |= digit_mask << shift;
    if (whole) {
      // The digit's entries are all needed: the K best are the keys >= prefix
      // (which has the low bits clear; prefix > 0, since every positive key is
      // >= 0 and there are n_pos > K of them).
      *threshold = prefix - 1u;
      *need_eq = 0;
      return;
    }
    remaining = rest;
    top = shift;
  }
  *threshold = prefix;
  *need_eq = remaining;
}

// sqrt.approx.f32: a fast square root (relative error about 2^-22) for
// tests with a wide margin only; the exact values stay IEEE sqrtf.
__device__ __forceinline__ float SqrtApprox(float v) {
  float r;
  asm("sqrt.approx.f32 %0, %1;" : "=f"(r) : "f"(v));
  return r;
}

// True when the pair (t, k) surely has d1 = | |a_t - a_k| - |b_t - b_k| | >=
// cut1, so rho(t, k) = rho(k, t) = 0 (RhoLazy's first test). The distances
// here use approximate roots; the margin (1e-3 of the distances, plus 1e-3
// px) is thousands of times their error, so only pairs whose exact d1 is
// beyond the cut are skipped. Both orders: PairDistance(t, k) and (k, t) are
// the same bits (xk - xt = -(xt - xk) exactly, squares equal), so d1 is
// symmetric.
__device__ __forceinline__ bool SurelyBeyondDistanceCut(float xat, float yat, float xak, float yak, float xbt, float ybt,
                                                        float xbk, float ybk, float cut1) {
  using fpmath::Mul;
  const float dxa = xak - xat, dya = yak - yat, dxb = xbk - xbt, dyb = ybk - ybt;
  const float da = SqrtApprox(Mul(dxa, dxa) + Mul(dya, dya)), db = SqrtApprox(Mul(dxb, dxb) + Mul(dyb, dyb));
  return fabsf(da - db) > cut1 + 1e-3f * (da + db) + 1e-3f;
}

// The minutiae of selected entry t: its probe cylinder's (xa, ya, ta) and its
// gallery cylinder's (xb, yb, tb).
struct SelectedMinutiae {
  float xa, ya, ta, xb, yb, tb;
};
__device__ __forceinline__ SelectedMinutiae LoadSelected(const ComparisonScratch& s, int t, int base, const float* p_x,
                                                         const float* p_y, const float* p_t,
                                                         const GalleryArgs& gallery) {
  const int si = s.sel_index[t];
  const int r = si >> 16, b = base + (si & 0xffff);
  return {p_x[r], p_y[r], p_t[r], gallery.x[b], gallery.y[b], gallery.theta[b]};
}

// rho(t, k) of selected entries t, k (RhoLazy's argument order).
__device__ __forceinline__ float RhoOf(const SelectedMinutiae& t, const SelectedMinutiae& k, const LssConstants& c) {
  return RhoLazy(t.xa, t.ya, t.ta, k.xa, k.ya, k.ta, t.xb, t.yb, t.tb, k.xb, k.yb, k.tb, c);
}

// Lane `src`'s minutiae (every lane of the warp calls it).
__device__ __forceinline__ SelectedMinutiae ShuffleSelected(const SelectedMinutiae& m, int src) {
  return {__shfl_sync(kFull, m.xa, src), __shfl_sync(kFull, m.ya, src), __shfl_sync(kFull, m.ta, src),
          __shfl_sync(kFull, m.xb, src), __shfl_sync(kFull, m.yb, src), __shfl_sync(kFull, m.tb, src)};
}

// RelaxSelection for one warp and p <= 32 selected entries, the same lambdas
// bit for bit; the only path of kWarpMma's warps for such selections (H100
// 2026-12-07 round 7, vs the dense loop in the same run: 69.32 vs 67.32 M
// matches/s at 10^6 x 16 latents, 61.35 vs 59.87 at 10^5 x 64). Lane t holds
// entry t's minutiae. Why: most pairs fail rho's distance test, but in the
// dense loop one surviving lane of 32 makes the whole warp run the direction
// and radial tests, both atan2s and the sigmoids, so nearly every iteration
// costs the full path.
//   1. Every unordered pair {t, k} once (k = t + step mod p, step 1 .. p / 2;
//      for even p the last step only from t < p / 2): the approximate
//      distance test (SurelyBeyondDistanceCut, rho = 0 both ways when it
//      holds); the survivors are queued (t | k << 8) in the radix histogram's
//      words (unused after the selection), and each time 32 are queued,
//   2. the whole warp takes them, one pair per lane: RhoOf (t, k) and (k, t),
//      exactly as the dense loop computes them; nonzero values go to rho
//      (row-major) and set bit k of nz[t] (bit t of nz[k]).
// The relaxation then sums rho(t, k) lambda_k over the set bits only, in
// ascending k: the dense sum adds +0 for every other k (rho = 0, lambda
// finite), which leaves a float sum that starts at +0 unchanged. rho's unset
// entries are never read, so they are not cleared.
__device__ __forceinline__ const float* CompactRelaxSelection(StageClock* clock, const ComparisonScratch& s, int p,
                                                              int n_min, int base, const float* p_x, const float* p_y,
                                                              const float* p_t, const GalleryArgs& gallery,
                                                              const LssConstants& c, float** spare) {
  const int lane = threadIdx.x & 31;
  if (lane < p) s.lambda0[lane] = s.lambda_a[lane] = s.sel_value[lane];
  float* lam = s.lambda_a;
  float* nxt = s.lambda_b;
  if (n_min > 1 && c.relaxation_iterations > 0) {
    float* rho = s.gamma;
    unsigned* nz = reinterpret_cast<unsigned*>(s.hist);  // 32 words
    unsigned* queue = nz + 32;                           // up to 63 pairs (ComparisonScratch::kHistWords = 128)
    const SelectedMinutiae mine =
        lane < p ? LoadSelected(s, lane, base, p_x, p_y, p_t, gallery) : SelectedMinutiae{0, 0, 0, 0, 0, 0};
    if (lane < p) nz[lane] = 0u;
    __syncwarp();
    // The queued pair of this lane (every lane runs it; lanes >= count idle).
    auto rho_of_queued = [&](int first, int count) {
      const unsigned pair = lane < count ? queue[first + lane] : 0u;
      const int t = static_cast<int>(pair & 0xffu), k = static_cast<int>(pair >> 8);
      const SelectedMinutiae mt = ShuffleSelected(mine, t), mk = ShuffleSelected(mine, k);
      if (lane < count) {
        const float r_tk = RhoOf(mt, mk, c), r_kt = RhoOf(mk, mt, c);
        if (r_tk != 0.0f) {
          rho[t * p + k] = r_tk;
          atomicOr(nz + t, 1u << k);
        }
        if (r_kt != 0.0f) {
          rho[k * p + t] = r_kt;
          atomicOr(nz + k, 1u << t);
        }
      }
      __syncwarp();  // the queue's words may be written again
    };
    int queued = 0;
    const int half = p >> 1;
    for (int step = 1; step <= half; ++step) {
      int k = lane + step;
      if (k >= p) k -= p;
      const int src = lane < p ? k : 0;
      const float xak = __shfl_sync(kFull, mine.xa, src), yak = __shfl_sync(kFull, mine.ya, src);
      const float xbk = __shfl_sync(kFull, mine.xb, src), ybk = __shfl_sync(kFull, mine.yb, src);
      const bool active = lane < p && (2 * step != p || lane < half);
      const bool survives =
          active && !SurelyBeyondDistanceCut(mine.xa, mine.ya, xak, yak, mine.xb, mine.yb, xbk, ybk, c.cut1);
      const unsigned votes = __ballot_sync(kFull, survives);
      if (survives) queue[queued + __popc(votes & ((1u << lane) - 1u))] = static_cast<unsigned>(lane | (k << 8));
      queued += __popc(votes);
      __syncwarp();
      if (queued >= 32) {  // warp-uniform
        queued -= 32;
        rho_of_queued(queued, 32);
      }
    }
    if (queued > 0) rho_of_queued(0, queued);
    const unsigned nonzero = lane < p ? nz[lane] : 0u;
    const float* row = rho + lane * p;
    MarkStep(clock, 2);
    const float denominator = static_cast<float>(n_min - 1);
    for (int it = 0; it < c.relaxation_iterations; ++it) {
      if (lane < p) {
        float sum = 0.0f;
        for (unsigned m = nonzero; m != 0u; m &= m - 1u) {
          const int k = __ffs(m) - 1;
          sum = sum + fpmath::Mul(row[k], lam[k]);
        }
        nxt[lane] = lss_internal::Relaxed(lam[lane], sum, denominator, c);
      }
      __syncwarp();
      float* swap = lam;
      lam = nxt;
      nxt = swap;
    }
  } else {
    __syncwarp();
  }
  MarkStep(clock, 3);
  *spare = nxt;
  return lam;
}

// LSS-R rho + relaxation over the p > 0 selected entries: lambda0 and the
// first lambda from the selected values, rho of every ordered pair (in the
// matrix's place: p * p <= na * nb), then the relaxation passes; returns the
// final lambda and sets *spare to the lambda buffer it does not use. The
// whole group.
template <typename Group>
__device__ __forceinline__ const float* RelaxSelection(StageClock* clock, const Group& group,
                                                       const ComparisonScratch& s, int p, int n_min, int base,
                                                       const float* p_x, const float* p_y, const float* p_t,
                                                       const GalleryArgs& gallery, const LssConstants& c,
                                                       float** spare) {
  const int first = group.rank(), stride = Group::kSize;
  for (int t = first; t < p; t += stride) s.lambda0[t] = s.lambda_a[t] = s.sel_value[t];
  group.Sync();
  float* lam = s.lambda_a;
  float* nxt = s.lambda_b;
  if (n_min > 1 && c.relaxation_iterations > 0) {
    float* rho = s.gamma;
    // idx = t p + k walks first, first + stride, ...; t advances by
    // stride / p, k by stride % p, with one carry.
    const int step_t = stride / p, step_k = stride - step_t * p;
    int t = first / p, k = first - t * p;
    for (int idx = first; idx < p * p; idx += stride) {
      rho[idx] = t != k ? RhoOf(LoadSelected(s, t, base, p_x, p_y, p_t, gallery),
                                LoadSelected(s, k, base, p_x, p_y, p_t, gallery), c)
                        : 0.0f;
      t += step_t;
      k += step_k;
      if (k >= p) {
        k -= p;
        ++t;
      }
    }
    group.Sync();
    MarkStep(clock, 2);
    const float denominator = static_cast<float>(n_min - 1);
    for (int it = 0; it < c.relaxation_iterations; ++it) {
      RelaxationPass(rho, lam, nxt, p, first, stride, denominator, c);
      group.Sync();
      float* swap = lam;
      lam = nxt;
      nxt = swap;
    }
  }
  MarkStep(clock, 3);
  *spare = nxt;
  return lam;
}

// Steps 2-3 once the group's local-similarity matrix s.gamma (na x nb,
// row-major, n_pos positive entries, keys between lo and hi) is complete and
// visible to the group: selection of the K best, LSS-R rho + relaxation (or
// the LSS sort), and the score into scores[g].
template <bool kRelax, typename Group>
__device__ __forceinline__ void SelectAndScore(StageClock* clock, const Group& group, const ComparisonScratch& s,
                                               int n_pos, unsigned hi, unsigned lo, int na, int nb, int base, int g,
                                               const float* p_x, const float* p_y, const float* p_t,
                                               const GalleryArgs& gallery, const LssConstants& c,
                                               float* __restrict__ scores) {
  const int n_min = min(na, nb);
  const int np = c.np_table[n_min];
  const int K = kRelax ? n_min : np;
  const int entries = na * nb;
  unsigned threshold = 0;
  int need_eq = 0;
  if (n_pos > K) RadixThreshold(group, s, entries, K, hi, lo, &threshold, &need_eq);
  // Compaction in flat-index order (row and column divided out for the
  // selected entries only).
  int carry_gt = 0, carry_eq = 0;
  for (int chunk = 0; chunk < entries; chunk += Group::kSize) {
    const int e = chunk + group.rank();
    const float v = e < entries ? s.gamma[e] : 0.0f;
    const unsigned bits = __float_as_uint(v);
    const bool gt = v > 0.0f && bits > threshold;
    const bool eq = v > 0.0f && bits == threshold && need_eq > 0;
    int before_gt = 0, before_eq = 0, total_gt = 0, total_eq = 0;
    group.CountBefore(gt, eq, &before_gt, &before_eq, &total_gt, &total_eq);
    before_gt += carry_gt;
    before_eq += carry_eq;
    if (gt || (eq && before_eq < need_eq)) {
      const int pos = before_gt + min(before_eq, need_eq);
      const int r = e / nb;
      s.sel_value[pos] = v;
      s.sel_index[pos] = (r << 16) | (e - r * nb);
    }
    carry_gt += total_gt;
    carry_eq += total_eq;
  }
  const int p = carry_gt + min(carry_eq, need_eq);
  group.Sync();
  MarkStep(clock, 1);

  if (!kRelax) {
    if (group.rank() == 0) scores[g] = SortedSelectionMean(s.sel_value, s.sel_index, p, np);
    group.Sync();
    return;
  }
  if (p == 0) {
    if (group.rank() == 0) scores[g] = 0.0f;
    group.Sync();
    return;
  }
  float* spare = nullptr;
  // One warp and up to 32 entries: the compact rho (kWarpMma); otherwise
  // (kBlock's blocks, larger selections) the dense loop.
  const float* lam = Group::kSize == 32 && p <= 32
                         ? CompactRelaxSelection(clock, s, p, n_min, base, p_x, p_y, p_t, gallery, c, &spare)
                         : RelaxSelection(clock, group, s, p, n_min, base, p_x, p_y, p_t, gallery, c, &spare);
  if (group.in_first_warp()) {
    const float score = p <= 32 ? EfficientPairsScoreInRegisters(lam, s.lambda0, p, np, threadIdx.x & 31)
                                : EfficientPairsScore(spare, lam, s.lambda0, p, np, threadIdx.x & 31);
    if (group.rank() == 0) scores[g] = score;
  }
  group.Sync();
  MarkStep(clock, 4);
}

// --- LssCudaKernel::kBlock: one 128-thread block per comparison ---------------
// Step 1 with __popcll, one matrix entry per thread; block-wide barriers
// between the steps. The reference the benchmarks compare with, and a
// fallback.
template <bool kRelax>
__global__ void __launch_bounds__(kThreads) ScoreKernel(ProbeArgs probe, GalleryArgs gallery, LssConstants c,
                                                        int k_capacity, float* __restrict__ scores) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int na = probe.n;
  const int tid = threadIdx.x;
  // Shared layout: probe bits, masks, x, y, theta, counts (240 bytes per
  // cylinder, so the scratch after them stays 16-byte aligned); the scratch.
  uint64_t* p_bits = reinterpret_cast<uint64_t*>(smem);
  uint64_t* p_mask = p_bits + static_cast<size_t>(na) * kMccBitWords;
  float* p_x = reinterpret_cast<float*>(p_mask + static_cast<size_t>(na) * kMccMaskWords);
  float* p_y = p_x + na;
  float* p_t = p_y + na;
  int* p_count = reinterpret_cast<int*>(p_t + na);
  const ComparisonScratch scratch(reinterpret_cast<unsigned char*>(p_count + na), na * gallery.max_size, k_capacity);
  float* gamma = scratch.gamma;
  __shared__ int warp_sums[kWarps];
  __shared__ int first_warp_values[3];
  const BlockGroup group{warp_sums, first_warp_values};

  for (int i = tid; i < na * kMccBitWords; i += kThreads) p_bits[i] = probe.bits[i];
  for (int i = tid; i < na * kMccMaskWords; i += kThreads) p_mask[i] = probe.mask[i];
  for (int i = tid; i < na; i += kThreads) {
    p_x[i] = probe.x[i];
    p_y[i] = probe.y[i];
    p_t[i] = probe.theta[i];
    p_count[i] = probe.count[i];
  }
  __syncthreads();

  for (int g = blockIdx.x; g < gallery.num_templates; g += gridDim.x) {
    const int base = gallery.start[g];
    const int nb = gallery.start[g + 1] - base;
    if (na == 0 || nb == 0) {
      if (tid == 0) scores[g] = 0.0f;
      continue;  // uniform across the block
    }
    const int entries = na * nb;
    const uint64_t* g_bits = gallery.bits + static_cast<size_t>(kMccBitWords) * base;
    const uint64_t* g_mask = gallery.mask + static_cast<size_t>(kMccMaskWords) * base;

    // 1. Local similarities.
    int positives = 0;
    for (int e = tid; e < entries; e += kThreads) {
      const int r = e / nb, j = e - r * nb;
      float v = 0.0f;
      if (lss_internal::DirectionsMatchable(p_t[r], gallery.theta[base + j], c)) {
        uint64_t ma[kMccMaskWords], mb[kMccMaskWords];
        int common = 0;
        uint64_t a_out = 0, b_out = 0;
#pragma unroll
        for (int q = 0; q < kMccMaskWords; ++q) {
          ma[q] = p_mask[r * kMccMaskWords + q];
          mb[q] = g_mask[static_cast<size_t>(q) * nb + j];
          common += __popcll(ma[q] & mb[q]);
          a_out |= ma[q] & ~mb[q];
          b_out |= mb[q] & ~ma[q];
        }
        if (common >= c.min_common_cells) {
          int nab = 0, na_c = 0, nb_c = 0;
#pragma unroll
          for (int w = 0; w < kMccBitWords; ++w) {
            const uint64_t a = p_bits[r * kMccBitWords + w];
            const uint64_t b = g_bits[static_cast<size_t>(w) * nb + j];
            nab += __popcll(a & b);
            if (a_out != 0) na_c += __popcll(a & mb[w % kMccMaskWords]);
            if (b_out != 0) nb_c += __popcll(b & ma[w % kMccMaskWords]);
          }
          if (a_out == 0) na_c = p_count[r];
          if (b_out == 0) nb_c = gallery.count[base + j];
          v = lss_internal::LambdaFromCounts(na_c, nb_c, nab);
        }
      }
      gamma[e] = v;
      positives += v > 0.0f;
    }
    int n_pos = 0;
    BlockExclusiveScan(positives, warp_sums, &n_pos);  // also a barrier after the matrix writes
    SelectAndScore<kRelax>(nullptr, group, scratch, n_pos, kAnyKeyHi, kAnyKeyLo, na, nb, base, g, p_x, p_y, p_t, gallery, c,
                           scores);
  }
}

// --- LssCudaKernel::kWarpMma: one warp per comparison, tensor cores ----------
// One warp per gallery template and up to kWarpKernelMaxWarps templates per
// block (the probe in shared memory is shared by the block's warps): no
// block-wide barriers after the probe is loaded. Each warp's scratch is sized
// by the host (lss_mma::PlanSplit) for the gallery's typical template
// (MccDeviceGalleryView::scratch_template_size, widened to fill the planned
// occupancy) rather than its largest; templates wider than the scratch
// (nb outside nb_lo..nb_hi) are left to a second launch sized for them.
//
// Step 1 on the tensor cores. The four bit counts of every
// (probe cylinder, gallery cylinder) pair - |a & b|, |a & m_b|, |m_a & b| summed
// over the 6 direction layers, and |m_a & m_b| - are matrix products over
// {0, 1} with AND as the product and popcount as the sum, which
// mma.sync.m16n8k256 .b1 .and.popc computes exactly (32-bit integer
// accumulators). One 256-bit k-step is one layer (or the mask), so a 16 x 8
// tile of pairs costs 19 instructions instead of about 100 popcounts per pair.
// The counts are the integers ScoreKernel counts and the same branches pick
// |a| when m_a lies inside m_b (|m_a & m_b| == |m_a|, i.e. no cell of m_a
// outside m_b), so lambda, the matrix, and everything after it are the same
// bits.
// Fragment layouts (PTX ISA, mma.m16n8k256 with .b1; g = lane / 4, t = lane %
// 4, indices of 32-bit words of the 256-bit k-chunk): A a0 (row g, word t), a1
// (row g + 8, word t), a2 (row g, word t + 4), a3 (row g + 8, word t + 4); B
// b0 (column g, word t), b1 (column g, word t + 4); C c0, c1 (row g, columns
// 2t, 2t + 1), c2, c3 (row g + 8, the same columns). The probe's A fragments
// are laid out on the host in exactly this order (one 16-byte load per lane
// and chunk); the gallery's B words are read straight from MccGallery's
// word-major layout (32-bit word k of 64-bit word w of column j of a template
// of nb cylinders: 2 (w nb + j) + k % 2, little-endian).
constexpr int kMmaChunks = lss_mma::kChunks;

__device__ __forceinline__ void MmaAndPopc(int (&d)[4], const uint4& a, uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.and.popc {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
}

// The tensor-core kernel: templates of nb_lo..nb_hi cylinders only (the
// others are another launch's); gallery.max_size is the width the warps'
// scratch (warp_bytes each, after the probe's probe_bytes) is sized for.
//
// One probe (num_probes == 0: `single`, scores into `scores`) or many in one
// launch (num_probes = L > 0: `probes[L]` in device memory, latent l's scores
// at scores + l * score_stride): block b then scores latent b % L and walks
// the templates of group b / L (gridDim.x is a multiple of L), so the L
// blocks of a group read the same templates at about the same time - each
// template comes from DRAM once per pass and from L2 for the other latents,
// and one launch replaces L. Every comparison runs the same code either way.
template <bool kRelax, bool kStageClock>
__global__ void __launch_bounds__(kWarpKernelMaxWarps * 32, kMmaMinBlocks)
    ScoreKernelMma(ProbeArgs single, const ProbeArgs* __restrict__ probes, int num_probes, GalleryArgs gallery,
                   LssConstants c, int k_capacity, int probe_bytes, int warp_bytes, int nb_lo, int nb_hi,
                   float* __restrict__ scores, long long score_stride, unsigned long long* stage_cycles) {
  extern __shared__ __align__(16) unsigned char smem[];
  StageClock stage_clock{stage_cycles};
  StageClock* const clock = kStageClock ? &stage_clock : nullptr;
  int group_index = blockIdx.x, groups = gridDim.x;
  ProbeArgs probe = single;
  if (num_probes > 0) {
    const int l = blockIdx.x % num_probes;
    probe = probes[l];
    scores += l * score_stride;
    group_index = blockIdx.x / num_probes;
    groups = gridDim.x / num_probes;
  }
  const int na = probe.n;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  // Shared: the probe's A fragments, its x, y, theta, bit counts and mask
  // counts; then one scratch region per warp.
  const int frag_count = probe.m_tiles * kMmaChunks * 32;
  uint4* p_frag = reinterpret_cast<uint4*>(smem);
  float* p_x = reinterpret_cast<float*>(p_frag + frag_count);
  float* p_y = p_x + na;
  float* p_t = p_y + na;
  int* p_count = reinterpret_cast<int*>(p_t + na);
  int* p_mask_count = p_count + na;
  const ComparisonScratch scratch(smem + probe_bytes + static_cast<size_t>(warp) * warp_bytes,
                                  na * gallery.max_size, k_capacity);

  for (int i = threadIdx.x; i < frag_count; i += blockDim.x) p_frag[i] = probe.frag[i];
  for (int i = threadIdx.x; i < na; i += blockDim.x) {
    p_x[i] = probe.x[i];
    p_y[i] = probe.y[i];
    p_t[i] = probe.theta[i];
    p_count[i] = probe.count[i];
    p_mask_count[i] = probe.mask_count[i];
  }
  __syncthreads();  // the only block-wide barrier

  const int total_warps = groups * warps;
  for (int g = group_index * warps + warp; g < gallery.num_templates; g += total_warps) {
    const int base = gallery.start[g];
    const int nb = gallery.start[g + 1] - base;
    if (nb < nb_lo || nb > nb_hi) continue;  // the other launch's
    if (na == 0 || nb == 0) {
      if (lane == 0) scores[g] = 0.0f;
      continue;  // uniform across the warp
    }
    if (clock != nullptr) clock->Start();
    const uint32_t* g_bits = reinterpret_cast<const uint32_t*>(gallery.bits + static_cast<size_t>(kMccBitWords) * base);
    const uint32_t* g_mask = reinterpret_cast<const uint32_t*>(gallery.mask + static_cast<size_t>(kMccMaskWords) * base);

    // 1. Local similarities, 8 gallery columns x 16 probe rows per tile.
    int positives = 0;
    unsigned key_hi = 0u, key_lo = ~0u;  // largest / smallest positive key
    for (int col0 = 0; col0 < nb; col0 += lss_mma::kCols) {
      // B fragments of columns col0 .. col0 + 7 (zero beyond nb).
      const int col = col0 + lss_mma::BCol(lane);
      const bool col_ok = col < nb;
      uint32_t bb[kMccNd][2], bm[2];
#pragma unroll
      for (int reg = 0; reg < 2; ++reg) {
#pragma unroll
        for (int l = 0; l < kMccNd; ++l) {
          bb[l][reg] = col_ok ? g_bits[lss_mma::GalleryWordIndex(nb, col, l, lss_mma::BWord(lane, reg))] : 0u;
        }
        bm[reg] = col_ok ? g_mask[lss_mma::GalleryWordIndex(nb, col, lss_mma::kMaskChunk, lss_mma::BWord(lane, reg))]
                         : 0u;
      }
      // |m_b| of column `col` (its four lanes' words), then of this lane's
      // C columns j0 and j0 + 1.
      int mb_count = __popc(bm[0]) + __popc(bm[1]);
      mb_count += __shfl_xor_sync(kFull, mb_count, 1);
      mb_count += __shfl_xor_sync(kFull, mb_count, 2);
      const int j0 = col0 + lss_mma::CCol(lane, 0);
      int mb_c[2], count_b[2];
      float theta_b[2];
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        mb_c[q] = __shfl_sync(kFull, mb_count, lss_mma::CCol(lane, q) * 4);  // a lane of that column's group
        const bool ok = j0 + q < nb;
        theta_b[q] = ok ? gallery.theta[base + j0 + q] : 0.0f;
        count_b[q] = ok ? static_cast<int>(gallery.count[base + j0 + q]) : 0;
      }
      for (int row0 = 0; row0 < na; row0 += lss_mma::kRows) {
        const uint4* fa = p_frag + (row0 / lss_mma::kRows) * kMmaChunks * 32 + lane;
        const uint4 am = fa[kMccNd * 32];
        int nab[4] = {0, 0, 0, 0}, nac[4] = {0, 0, 0, 0}, nbc[4] = {0, 0, 0, 0}, common[4] = {0, 0, 0, 0};
#pragma unroll
        for (int l = 0; l < kMccNd; ++l) {
          const uint4 al = fa[l * 32];
          MmaAndPopc(nab, al, bb[l][0], bb[l][1]);
          MmaAndPopc(nac, al, bm[0], bm[1]);
          MmaAndPopc(nbc, am, bb[l][0], bb[l][1]);
        }
        MmaAndPopc(common, am, bm[0], bm[1]);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = row0 + lss_mma::CRow(lane, e), q = e & 1, j = col0 + lss_mma::CCol(lane, e);
          if (r >= na || j >= nb) continue;
          float v = 0.0f;
          if (lss_internal::DirectionsMatchable(p_t[r], theta_b[q], c) && common[e] >= c.min_common_cells) {
            const int na_c = common[e] == p_mask_count[r] ? p_count[r] : nac[e];  // m_a inside m_b: |a|
            const int nb_c = common[e] == mb_c[q] ? count_b[q] : nbc[e];          // m_b inside m_a: |b|
            v = lss_internal::LambdaFromCounts(na_c, nb_c, nab[e]);
          }
          scratch.gamma[r * nb + j] = v;
          if (v > 0.0f) {
            key_hi = max(key_hi, __float_as_uint(v));
            key_lo = min(key_lo, __float_as_uint(v));
          }
          positives += v > 0.0f;
        }
      }
    }
    const int n_pos = WarpSum(positives);
    __syncwarp();  // the matrix is complete
    key_hi = __reduce_max_sync(kFull, key_hi);
    key_lo = __reduce_min_sync(kFull, key_lo);
    MarkStep(clock, 0);
    SelectAndScore<kRelax>(clock, WarpGroup(), scratch, n_pos, key_hi, key_lo, na, nb, base, g, p_x, p_y, p_t, gallery,
                           c, scores);
  }
}

}  // namespace

// The probe's flattened block: bits, masks, then x, y, theta, bit counts,
// mask counts, then (16-byte aligned) the A fragments of ScoreKernelMma.
struct ProbeBlockLayout {
  size_t bits_bytes, mask_bytes, floats_bytes, frag_offset, frag_bytes, total;
  explicit ProbeBlockLayout(int na)
      : bits_bytes(static_cast<size_t>(na) * kMccBitWords * 8),
        mask_bytes(static_cast<size_t>(na) * kMccMaskWords * 8),
        floats_bytes(static_cast<size_t>(na) * 4),
        frag_offset((bits_bytes + mask_bytes + 5 * floats_bytes + 15) / 16 * 16),
        frag_bytes(static_cast<size_t>(lss_mma::ProbeFragmentWords(na)) * 4),
        total(std::max<size_t>(16, frag_offset + frag_bytes)) {}
};

namespace {

// Writes `probe` into `block` (layout.total bytes, ProbeBlockLayout).
void FillProbeBlock(const LssProbe& probe, const ProbeBlockLayout& layout, uint8_t* block) {
  const std::vector<MccCylinder>& cyl = probe.cylinders.cylinders;
  const int na = static_cast<int>(cyl.size());
  uint64_t* h_bits = reinterpret_cast<uint64_t*>(block);
  uint64_t* h_mask = reinterpret_cast<uint64_t*>(block + layout.bits_bytes);
  float* h_x = reinterpret_cast<float*>(block + layout.bits_bytes + layout.mask_bytes);
  float* h_y = h_x + na;
  float* h_theta = h_y + na;
  int* h_count = reinterpret_cast<int*>(h_theta + na);
  int* h_mask_count = h_count + na;
  for (int i = 0; i < na; ++i) {
    std::copy(cyl[i].bits, cyl[i].bits + kMccBitWords, h_bits + static_cast<size_t>(i) * kMccBitWords);
    std::copy(cyl[i].mask, cyl[i].mask + kMccMaskWords, h_mask + static_cast<size_t>(i) * kMccMaskWords);
    h_x[i] = cyl[i].x;
    h_y[i] = cyl[i].y;
    h_theta[i] = cyl[i].theta;
    h_count[i] = probe.bit_count[i];
    int mask_count = 0;
    for (int q = 0; q < kMccMaskWords; ++q) mask_count += __builtin_popcountll(cyl[i].mask[q]);
    h_mask_count[i] = mask_count;
  }
  lss_mma::PackProbeFragments(cyl.data(), na, reinterpret_cast<uint32_t*>(block + layout.frag_offset));
}

// The kernels' view of a probe block at device address `d`.
ProbeArgs ProbeArgsAt(const uint8_t* d, int na) {
  const ProbeBlockLayout layout(na);
  ProbeArgs pa;
  pa.bits = reinterpret_cast<const uint64_t*>(d);
  pa.mask = reinterpret_cast<const uint64_t*>(d + layout.bits_bytes);
  pa.x = reinterpret_cast<const float*>(d + layout.bits_bytes + layout.mask_bytes);
  pa.y = pa.x + na;
  pa.theta = pa.y + na;
  pa.count = reinterpret_cast<const int*>(pa.theta + na);
  pa.mask_count = pa.count + na;
  pa.frag = reinterpret_cast<const uint4*>(d + layout.frag_offset);
  pa.m_tiles = (na + lss_mma::kRows - 1) / lss_mma::kRows;
  pa.n = na;
  return pa;
}

size_t Align256(size_t n) { return (n + 255) / 256 * 256; }

}  // namespace

absl::StatusOr<DeviceLssProbe> DeviceLssProbe::Upload(const Stream& stream, const LssProbe& probe) {
  if (stream.backend() != Backend::kCuda) return absl::InvalidArgumentError("DeviceLssProbe::Upload needs a CUDA stream");
  const int na = static_cast<int>(probe.cylinders.cylinders.size());
  const ProbeBlockLayout layout(na);
  // One host block and one device buffer: a single allocation and copy.
  std::vector<uint8_t> block(layout.total);
  FillProbeBlock(probe, layout, block.data());
  DeviceLssProbe out;
  TESSERA_ASSIGN_OR_RETURN(out.block_, UploadVector(block, stream));  // pageable source: returns after the copy
  out.n_ = na;
  return out;
}

absl::StatusOr<DeviceLssProbeSet> DeviceLssProbeSet::Upload(const Stream& stream, const std::vector<LssProbe>& probes) {
  if (stream.backend() != Backend::kCuda) {
    return absl::InvalidArgumentError("DeviceLssProbeSet::Upload needs a CUDA stream");
  }
  DeviceLssProbeSet out;
  std::vector<size_t> offset;
  size_t total = 0;
  for (const LssProbe& p : probes) {
    const int na = static_cast<int>(p.cylinders.cylinders.size());
    out.n_.push_back(na);
    out.max_n_ = std::max(out.max_n_, na);
    offset.push_back(total);
    total += Align256(ProbeBlockLayout(na).total);
  }
  // Every probe's block in one buffer (one copy), then their ProbeArgs.
  std::vector<uint8_t> blocks(std::max<size_t>(total, 16), 0);
  for (size_t i = 0; i < probes.size(); ++i) {
    FillProbeBlock(probes[i], ProbeBlockLayout(out.n_[i]), blocks.data() + offset[i]);
  }
  TESSERA_ASSIGN_OR_RETURN(out.blocks_, UploadVector(blocks, stream));
  const uint8_t* d = static_cast<const uint8_t*>(out.blocks_->data());
  std::vector<ProbeArgs> args;
  for (size_t i = 0; i < probes.size(); ++i) args.push_back(ProbeArgsAt(d + offset[i], out.n_[i]));
  TESSERA_ASSIGN_OR_RETURN(out.args_, UploadVector(args, stream));
  return out;
}

namespace {

size_t Align16(size_t n) { return (n + 15) / 16 * 16; }

// The probe's share of a kWarpMma block: its A fragments, x, y, theta, bit
// and mask counts (then one scratch region per warp).
size_t MmaProbeBytes(int na) {
  return Align16(static_cast<size_t>(lss_mma::ProbeFragmentWords(na)) * 4 + static_cast<size_t>(na) * 4 * 5);
}

int MaxNp(const LssConstants& constants) {
  int max_np = 0;
  for (int n = 0; n <= kMccMaxMinutiae; ++n) max_np = std::max<int>(max_np, constants.np_table[n]);
  return max_np;
}

GalleryArgs GalleryArgsOf(const MccDeviceGalleryView& gallery) {
  GalleryArgs ga;
  ga.start = gallery.start;
  ga.bits = gallery.bits;
  ga.mask = gallery.mask;
  ga.x = gallery.x;
  ga.y = gallery.y;
  ga.theta = gallery.theta;
  ga.count = gallery.bit_count;
  ga.num_templates = gallery.num_templates;
  ga.max_size = std::max(1, gallery.max_template_size);
  return ga;
}

// Lets `kernel` take `shared` bytes of dynamic shared memory and returns how
// many of its blocks of `threads` fit an SM (RESOURCE_EXHAUSTED when none).
template <typename Kernel>
absl::StatusOr<int> BlocksPerSm(Kernel kernel, int threads, size_t shared) {
  TESSERA_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
  int per_sm = 0;
  TESSERA_CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, shared));
  if (per_sm < 1) {
    return absl::ResourceExhaustedError(absl::StrCat("lss: ", shared, " bytes of shared memory per block do not fit"));
  }
  return per_sm;
}

using MmaKernel = void (*)(ProbeArgs, const ProbeArgs*, int, GalleryArgs, LssConstants, int, int, int, int, int,
                          float*, long long, unsigned long long*);

// The one place that picks ScoreKernelMma's instantiation: LSS has no rho
// and no step clock (its kernel ignores stage_cycles).
MmaKernel PickMmaKernel(MccScore kind, bool stage_clock) {
  if (kind != MccScore::kLssR) return ScoreKernelMma<false, false>;
  return stage_clock ? ScoreKernelMma<true, true> : ScoreKernelMma<true, false>;
}

// The probes of one kWarpMma launch: one (`single`, num_probes 0) or
// num_probes in device memory (`many`); `n`: the largest cylinder count,
// which the shared-memory plan is sized for.
struct MmaProbes {
  ProbeArgs single{};
  const ProbeArgs* many = nullptr;
  int num_probes = 0;
  int n = 0;
};

// kWarpMma's launches (lss_mma::PlanSplit): each template of up to `width`
// cylinders is scored by warps whose scratch holds an na x width matrix; the
// few larger ones by a second launch sized for the largest.
absl::Status LaunchWarpMma(cudaStream_t s, int ordinal, const MmaProbes& probes, GalleryArgs ga, MccScore kind,
                           const LssConstants& constants, size_t probe_bytes, int max_np, int scratch_size,
                           float* device_scores, long long score_stride, unsigned long long* stage_cycles,
                           int templates_per_warp) {
  const MmaKernel kernel = PickMmaKernel(kind, stage_cycles != nullptr);
  int sm_shared = 0, reserved = 0, block_optin = 0, sms = 0;
  TESSERA_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sm_shared, cudaDevAttrMaxSharedMemoryPerMultiprocessor, ordinal));
  TESSERA_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, ordinal));
  TESSERA_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&block_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, ordinal));
  TESSERA_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ordinal));
  // Blocks per SM the registers allow (no shared memory).
  int register_blocks = 0;
  TESSERA_CUDA_RETURN_IF_ERROR(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&register_blocks, kernel, kWarpKernelMaxWarps * 32, 0));
  lss_mma::SplitDevice device;
  device.shared_per_sm = sm_shared;
  device.reserved_per_block = reserved;
  device.max_shared_per_block = block_optin;
  device.register_blocks = register_blocks;
  device.max_warps_per_block = kWarpKernelMaxWarps;
  const lss_mma::SplitPlan plan = lss_mma::PlanSplit(probes.n, ga.max_size, scratch_size, max_np, probe_bytes, device);
  // Scratch up to the largest SM share: the plan assumes the full carveout.
  TESSERA_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
  const int latents = std::max(1, probes.num_probes);
  for (int pass = 0; pass < plan.passes; ++pass) {
    const lss_mma::SplitPlan::Pass& p = plan.pass[pass];
    if (p.warps < 1) {
      return absl::ResourceExhaustedError(absl::StrCat("lss: ", probe_bytes + p.warp_bytes,
                                                       " bytes of shared memory for one warp do not fit"));
    }
    const size_t shared = probe_bytes + static_cast<size_t>(p.warps) * p.warp_bytes;
    TESSERA_ASSIGN_OR_RETURN(const int per_sm, BlocksPerSm(kernel, p.warps * 32, shared));
    ga.max_size = p.width;
    // Template groups per latent: as many as fill the GPU once with every
    // latent's blocks (at least one); with templates_per_warp, enough for
    // that many templates per warp (many waves, balanced by the hardware).
    const long long warp_templates = static_cast<long long>(p.warps) * std::max(1, templates_per_warp);
    const int groups =
        templates_per_warp > 0
            ? static_cast<int>(std::max(1LL, std::min((ga.num_templates + warp_templates - 1) / warp_templates,
                                                      static_cast<long long>(INT_MAX / 2 / latents))))
            : std::max(1, std::min((ga.num_templates + p.warps - 1) / p.warps, per_sm * sms / latents));
    kernel<<<groups * latents, p.warps * 32, shared, s>>>(
        probes.single, probes.many, probes.num_probes, ga, constants, p.k_capacity, static_cast<int>(probe_bytes),
        static_cast<int>(p.warp_bytes), p.nb_lo, p.nb_hi, device_scores, score_stride, stage_cycles);
    TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("lss ScoreKernelMma");
  }
  return absl::OkStatus();
}

// kBlock's launch: the probe's bits, masks, x, y, theta, bit counts, then the
// block's scratch for the largest template.
absl::Status LaunchBlock(cudaStream_t s, int ordinal, const ProbeArgs& pa, const GalleryArgs& ga, MccScore kind,
                         const LssConstants& constants, int max_np, float* device_scores) {
  const int na = pa.n;
  const int k_capacity = lss_mma::SelectionCapacity(na, ga.max_size, max_np);
  const size_t shared = static_cast<size_t>(na) * (kMccBitWords + kMccMaskWords) * 8 + static_cast<size_t>(na) * 4 * 4 +
                        lss_mma::ComparisonScratchBytes(na * ga.max_size, k_capacity);
  auto kernel = kind == MccScore::kLssR ? ScoreKernel<true> : ScoreKernel<false>;
  TESSERA_ASSIGN_OR_RETURN(const int per_sm, BlocksPerSm(kernel, kThreads, shared));
  int sms = 0;
  TESSERA_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ordinal));
  const int blocks = std::max(1, std::min(ga.num_templates, per_sm * sms));
  kernel<<<blocks, kThreads, shared, s>>>(pa, ga, constants, k_capacity, device_scores);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("lss ScoreKernel");
  return absl::OkStatus();
}

}  // namespace

absl::Status EnqueueScoreGallery(const Stream& stream, const DeviceLssProbe& probe, const MccDeviceGalleryView& gallery,
                                 MccScore kind, const LssConstants& constants, float* device_scores,
                                 LssCudaKernel variant) {
  if (variant != LssCudaKernel::kBlock && variant != LssCudaKernel::kWarpMma) {
    return absl::InvalidArgumentError(absl::StrCat("lss: unknown CUDA kernel variant ", static_cast<int>(variant),
                                                   "; valid: block, warp-mma"));
  }
  const int na = probe.n_;
  const int max_nb = gallery.max_template_size;
  if (gallery.num_templates == 0) return absl::OkStatus();
  if (static_cast<long long>(na) * std::max(1, max_nb) > kLssCudaMaxMatrixEntries) {
    return absl::FailedPreconditionError(absl::StrCat("lss: probe of ", na, " cylinders against gallery templates of up to ",
                                                      max_nb, " exceeds the CUDA kernel's ", kLssCudaMaxMatrixEntries,
                                                      "-entry shared-memory matrix; use the CPU backend"));
  }
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  const ProbeArgs pa = ProbeArgsAt(static_cast<const uint8_t*>(probe.block_->data()), na);
  const GalleryArgs ga = GalleryArgsOf(gallery);
  const int max_np = MaxNp(constants);
  if (variant == LssCudaKernel::kBlock) {
    return LaunchBlock(s, stream.ordinal(), pa, ga, kind, constants, max_np, device_scores);
  }
  MmaProbes probes;
  probes.single = pa;
  probes.n = na;
  // The default kernel (compact rho since round 7) in one wave of blocks
  // (templates_per_warp 0): 62.36 M matches/s for 16 latents at 10^6 on the
  // H100 with the dense rho (round 7, "single x L"); many waves were measured
  // for the multi-latent launch only.
  return LaunchWarpMma(s, stream.ordinal(), probes, ga, kind, constants, MmaProbeBytes(na), max_np,
                       gallery.scratch_template_size, device_scores, 0, nullptr, /*templates_per_warp=*/0);
}

absl::Status EnqueueScoreGalleryMulti(const Stream& stream, const DeviceLssProbeSet& probes,
                                      const MccDeviceGalleryView& gallery, MccScore kind,
                                      const LssConstants& constants, float* device_scores, size_t score_stride,
                                      const LssMultiOptions& options) {
  const int max_nb = gallery.max_template_size;
  if (gallery.num_templates == 0 || probes.size() == 0) return absl::OkStatus();
  if (static_cast<long long>(probes.max_n_) * std::max(1, max_nb) > kLssCudaMaxMatrixEntries) {
    return absl::FailedPreconditionError(absl::StrCat("lss: probe of ", probes.max_n_,
                                                      " cylinders against gallery templates of up to ", max_nb,
                                                      " exceeds the CUDA kernel's ", kLssCudaMaxMatrixEntries,
                                                      "-entry shared-memory matrix; use the CPU backend"));
  }
  if (score_stride < static_cast<size_t>(gallery.num_templates) && probes.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat("lss: score stride ", score_stride, " below the ",
                                                   gallery.num_templates, " templates"));
  }
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  MmaProbes mp;
  mp.many = static_cast<const ProbeArgs*>(probes.args_->data());
  mp.num_probes = probes.size();
  mp.n = probes.max_n_;
  return LaunchWarpMma(s, stream.ordinal(), mp, GalleryArgsOf(gallery), kind, constants,
                       MmaProbeBytes(probes.max_n_), MaxNp(constants), gallery.scratch_template_size, device_scores,
                       static_cast<long long>(score_stride), options.stage_cycles,
                       std::max(0, options.templates_per_warp));
}

absl::Status ScoreGalleryToDevice(const Stream& stream, const LssProbe& probe, const MccDeviceGallery& gallery,
                                  MccScore kind, const LssConstants& constants, float* device_scores,
                                  LssCudaKernel variant) {
  if (gallery.num_templates() == 0) return absl::OkStatus();
  TESSERA_ASSIGN_OR_RETURN(DeviceLssProbe device_probe, DeviceLssProbe::Upload(stream, probe));
  TESSERA_RETURN_IF_ERROR(
      EnqueueScoreGallery(stream, device_probe, gallery.view(), kind, constants, device_scores, variant));
  // The probe buffer must outlive the kernel.
  TESSERA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(static_cast<cudaStream_t>(stream.native())));
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace fingerprint
}  // namespace tessera
