// MCC matching: local similarities between cylinders and the LSS / LSS-R
// global scores (Cappelli et al., TPAMI 2010, sections 4-5).
//
// Local similarity of two bit cylinders a, b with masks ma, mb:
//   matchable when |dphi(theta_a, theta_b)| <= delta_theta (pi/2, plus 1e-5 rad
//   so that exactly 90 degrees counts whatever the float rounding) and the
//   cells valid in both, |ma & mb|, are at least minME (0.6) of the cells in
//   the circle; then with c_a = a & mb, c_b = b & ma (bits already vanish
//   outside their own mask) and ||v|| = sqrt(popcount(v)):
//     lambda = 1 - ||c_a xor c_b|| / (||c_a|| + ||c_b||)
//   and 0 when not matchable or ||c_a|| + ||c_b|| = 0. Popcounts use
//   |c_a xor c_b| = |c_a| + |c_b| - 2 |a & b|, and |c_a| = |a| when ma is a
//   subset of mb (the common case), so most pairs need one popcount pass.
// LSS: n_P = minNP + round(Z(min(nA, nB), muP, tauP) (maxNP - minNP)) with
//   Z(v, mu, tau) = 1 / (1 + exp(-tau (v - mu))); the score is the mean of
//   the n_P largest local similarities (nA, nB: valid cylinders).
// LSS-R: the nR = min(nA, nB) largest local similarities (ties: lower row,
//   then column first; zero entries are never selected, so fewer pairs may
//   remain) are relaxed n_rel times:
//     lambda_t <- wR lambda_t + (1 - wR) sum_{k != t} rho(t, k) lambda_k / (nR - 1)
//   with rho(t, k) = Z(d1, mu1, tau1) Z(d2, mu2, tau2) Z(d3, mu3, tau3):
//     d1 = | |a_rt - a_rk| - |b_ct - b_ck| |               (distances)
//     d2 = | dphi(dphi(theta_a_rt, theta_a_rk), dphi(theta_b_ct, theta_b_ck)) |
//     d3 = | dphi(dR(a_rt, a_rk), dR(b_ct, b_ck)) |,
//          dR(m1, m2) = dphi(theta_1, atan2(y1 - y2, x2 - x1))   (radial angles)
//   then the n_P pairs of highest efficiency lambda_t / lambda_t^0 are kept
//   and the score is the sum of their relaxed similarities divided by n_P.
//   A factor Z below 1e-7 (d1 > mu1 + ln(1e7)/|tau1|, ...) makes rho exactly
//   0: this changes rho by less than 1e-7 and skips most of the work.
// Parameters (the paper's): delta_theta = pi/2, minME = 0.6, minNP = 4,
// maxNP = 12, muP = 20, tauP = 2/5, n_rel = 5, wR = 1/2, mu1 = 5, tau1 = -8/5,
// mu2 = mu3 = pi/12, tau2 = tau3 = -30.
//
// Scores are in [0, 1] and identical, bit for bit, between the CPU reference
// and the CUDA kernel (fp_math.h; same selection and summation order).
#ifndef TESSERA_KERNELS_FINGERPRINT_LSS_H_
#define TESSERA_KERNELS_FINGERPRINT_LSS_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/buffer.h"
#include "common/device.h"
#include "kernels/fingerprint/mcc.h"

namespace tessera {
namespace fingerprint {

enum class MccScore { kLss, kLssR };

// What a pruned comparison reports instead of its score (cpu::ScoreOrPrune,
// the pruning CUDA kernel): the score is provably below the threshold given,
// so it cannot enter a top list whose k-th best already reaches that
// threshold. Ranks below every score.
inline constexpr float kLssPrunedScore = -std::numeric_limits<float>::infinity();

struct LssParams {
  float delta_theta = 1.57079633f;  // pi/2
  double min_matchable = 0.6;       // minME, fraction of the cells in the circle
  int min_np = 4;
  int max_np = 12;
  double mu_p = 20.0;
  double tau_p = 0.4;
  int relaxation_iterations = 5;
  float w_r = 0.5f;
  float mu_rho1 = 5.0f, tau_rho1 = -1.6f;
  float mu_rho2 = 0.261799388f, tau_rho2 = -30.0f;  // pi/12
  float mu_rho3 = 0.261799388f, tau_rho3 = -30.0f;
};

// The code path of the CPU matcher (cpu::Score and friends). Every path gives
// the same scores bit for bit; they differ only in speed, which depends on the
// CPU (cpu::ResolveCpuPath says which one a call runs).
enum class LssCpuPath : uint8_t {
  kAuto = 0,   // the fastest on this CPU by the rule in cpu::ResolveCpuPath
  kScalar,     // scalar POPCNT, dense rho (any x86-64 / other CPU)
  kAvx512,     // AVX-512 VPOPCNTDQ on 512-bit vectors (8 probe cylinders per zmm)
};

// Everything derived from LssParams and MccParams that the CPU and CUDA code
// share (so both see the same floats).
struct LssConstants {
  float delta_theta;
  int min_common_cells;  // ceil(minME * cells in circle)
  int relaxation_iterations;
  float w_r, one_minus_w_r;
  float mu1, tau1, cut1;  // cut: the d beyond which Z < 1e-7 (infinity for tau >= 0)
  float mu2, tau2, cut2;
  float mu3, tau3, cut3;
  float exp_lo, exp_hi;  // -87, 88: the range of the sigmoid exponents
  uint8_t np_table[kMccMaxMinutiae + 1];  // n_P for min(nA, nB) = 0..255
  // CPU only (the CUDA kernels ignore it; last, so their layout is unchanged):
  // the path this call's CPU scoring runs, travelling with every call.
  LssCpuPath cpu_path = LssCpuPath::kAuto;
};
// cpu_path is kAuto, or kScalar when the environment has TESSERA_FP_NO_AVX512=1
// (read here, never written: a default for whole processes, e.g. services).
LssConstants MakeLssConstants(const LssParams& params, const MccParams& mcc = {});

// A probe prepared for many comparisons: bit counts, mask classes, and for
// the CPU matcher its cylinders ordered by direction and the pairwise
// relations (distance, direction difference, radial angle; row-major n x n).
struct LssProbe {
  MccTemplate cylinders;
  std::vector<uint16_t> bit_count;
  std::vector<uint8_t> full_mask;
  // Sorted positions go round the circle twice: position q < n is the q-th
  // cylinder by theta, position n + q the same cylinder with theta + 2 pi, so
  // the directions within delta_theta of any gallery direction are one
  // contiguous range of positions even where they wrap around 0 / 2 pi.
  std::vector<int> by_theta;        // cylinder index at each position (2n)
  std::vector<float> sorted_theta;  // their thetas (padded with +inf to soa_stride)
  // The cylinders by sorted position as structure of arrays for the SIMD
  // matcher: word w of position q at soa_bits[w * soa_stride + q] (masks
  // likewise), bit counts in soa_count; zero padding to a multiple of 8.
  // soa_layer_sum: the kMccNd layers' bits added per cell as three bit planes
  // (cell count = p0 + 2 p1 + 4 p2), plane b of mask word q at
  // soa_layer_sum[(q * 3 + b) * soa_stride + pos], so |a & m| takes 12
  // popcounts instead of 24.
  int soa_stride = 0;
  std::vector<uint64_t> soa_bits, soa_mask, soa_layer_sum;
  std::vector<int64_t> soa_count;
  std::vector<float> soa_sqrt_count;  // sqrtf(soa_count[q]): |c_a| = |a| needs no square root
  std::vector<float> pair_dist, pair_dir, pair_radial;
};
LssProbe PrepareProbe(const MccTemplate& probe, const MccParams& mcc = {});

// A cylinder's kMccNd layers added cell by cell, as three bit planes: the
// number of layers with cell i of mask word q set is bit i of
// planes[3q] + 2 planes[3q + 1] + 4 planes[3q + 2]. So for any cell mask m,
// |bits & m| (m repeated in every layer) = sum_q |p0 & m_q| + 2 |p1 & m_q| +
// 4 |p2 & m_q|: 12 popcounts instead of 24 (exact integers).
inline void LayerSumPlanes(const uint64_t* bits, uint64_t* planes) {
  static_assert(kMccNd < 8, "three planes count up to 7 layers");
  for (int q = 0; q < kMccMaskWords; ++q) {
    uint64_t p0 = 0, p1 = 0, p2 = 0;
    for (int k = 0; k < kMccNd; ++k) {
      const uint64_t x = bits[k * kMccLayerWords + q];
      const uint64_t carry0 = p0 & x;
      p0 ^= x;
      const uint64_t carry1 = p1 & carry0;
      p1 ^= carry0;
      p2 ^= carry1;
    }
    planes[3 * q] = p0;
    planes[3 * q + 1] = p1;
    planes[3 * q + 2] = p2;
  }
}

namespace cpu {

// lambda(a, b) for one pair of cylinders.
float LocalSimilarity(const MccCylinder& a, const MccCylinder& b, const LssConstants& c);

// Row-major nA x nB matrix of local similarities.
std::vector<float> LocalSimilarityMatrix(const MccTemplate& a, const MccTemplate& b, const LssConstants& c);

// Global score of a probe against template `t` of the gallery (the reference
// and the CPU backend).
float Score(const LssProbe& probe, const MccGallery& gallery, int t, MccScore kind, const LssConstants& c);

// Score, or kLssPrunedScore when an upper bound of the score computed from
// the local similarities alone (lss_impl.h ScoreUpperBound: relaxation with
// every rho = 1, values rounded up to 1/256, float rounding covered) is below
// `threshold`; the score is then < threshold. Pruned comparisons skip the
// selection, rho and the relaxation. threshold <= 0 never prunes. Scores it
// returns are Score's bit for bit.
float ScoreOrPrune(const LssProbe& probe, const MccGallery& gallery, int t, MccScore kind, const LssConstants& c,
                   float threshold);

// The upper bound ScoreOrPrune compares with the threshold, for a pair of
// templates (tests: it is >= Score on every pair).
double ScoreUpperBound(const MccTemplate& a, const MccTemplate& b, MccScore kind, const LssConstants& c);

// The definition written plainly (full matrix, full sort, no vector code):
// Score must return exactly this. For tests.
float ReferenceScore(const MccTemplate& a, const MccTemplate& b, MccScore kind, const LssConstants& c);

// One pair of cylinders that an LSS-R score sums.
struct LssRPair {
  int a = 0;           // index into a.cylinders (MccCylinder::minutia is the input minutia)
  int b = 0;           // index into b.cylinders
  float local = 0;     // lambda^0: the local similarity, before relaxation
  float relaxed = 0;   // lambda^(n_rel): after relaxation, what the score adds up
};

// The LSS-R score with the pairs behind it: the pairs of highest efficiency
// lambda / lambda^0 after relaxation that the score sums, min(n_P, p) of
// them (p: the relaxed pairs, see the header comment), in the order taken
// (efficiency descending; ties: the lower flat index r * nB + c first).
// Only valid cylinders exist in an MccTemplate, so every pair joins two
// valid cylinders.
struct LssRSelection {
  float score = 0;  // ReferenceScore(a, b, kLssR, c), bit for bit
  int np = 0;       // n_P, the score's divisor (0 when a template is empty)
  std::vector<LssRPair> pairs;
};
// ReferenceScore(kLssR) is this function's score: one computation, so the
// pairs are exactly those of the score (and of Score, which equals it).
LssRSelection ReferenceLssRSelection(const MccTemplate& a, const MccTemplate& b, const LssConstants& c);

// Convenience: two templates.
float Score(const MccTemplate& a, const MccTemplate& b, MccScore kind, const LssConstants& c);

// The path a call with cpu_path = `requested` runs on this CPU: kAuto becomes
// the automatic choice (see lss_cpu.cc for the rule and the measurements
// behind it), a vector path the CPU lacks becomes kScalar. Never kAuto.
LssCpuPath ResolveCpuPath(LssCpuPath requested);
// The paths that run as themselves on this CPU (kScalar first), for tests and
// benchmarks that compare them.
std::vector<LssCpuPath> AvailableCpuPaths();
// "auto", "scalar-popcnt", "avx512-vpopcntdq".
const char* LssCpuPathName(LssCpuPath path);
// The name of the path a call with these constants runs (ResolveCpuPath).
const char* PopcountPath(const LssConstants& c);
// LssCpuPathName's inverse ("scalar" also names kScalar); INVALID_ARGUMENT
// naming the text and the accepted names otherwise.
absl::StatusOr<LssCpuPath> ParseLssCpuPath(absl::string_view name);

// Scores against every gallery template with `threads` threads (0 = all
// hardware threads).
void ScoreGallery(const LssProbe& probe, const MccGallery& gallery, MccScore kind, const LssConstants& c,
                  float* scores, int threads = 1);

}  // namespace cpu

// ---------------------------------------------------------------------------
// CUDA: the gallery lives on the GPU; each probe is scored against all of it
// (one thread block per gallery template, the probe's cylinders in shared
// memory; see lss.cu).
// A gallery (or one batch of a gallery) in device memory, not owned: the
// MccGallery layout with the batch's own start table (start[0] = 0).
struct MccDeviceGalleryView {
  const int32_t* start = nullptr;
  const uint64_t* bits = nullptr;
  const uint64_t* mask = nullptr;
  const float* x = nullptr;
  const float* y = nullptr;
  const float* theta = nullptr;
  const uint16_t* bit_count = nullptr;
  const uint8_t* full_mask = nullptr;
  int num_templates = 0;
  int num_cylinders = 0;
  int max_template_size = 0;
  // LssCudaKernel::kWarpMma: the template size its warps' scratch must hold
  // (LssScratchTemplateSize: a high percentile of the sizes); larger
  // templates go to a second launch. 0: one launch sized for
  // max_template_size.
  int scratch_template_size = 0;
  int ordinal = 0;
};

// The `quantile` (0..1) of the template sizes of a start table (num_templates
// + 1 entries, nondecreasing): the scratch_template_size for kWarpMma.
// 0 for an empty table.
inline constexpr double kLssScratchQuantile = 0.9;
int LssScratchTemplateSize(const int32_t* start, int num_templates, double quantile = kLssScratchQuantile);

class MccDeviceGallery {
 public:
  // Uploads `gallery` to GPU `stream.ordinal()`. FAILED_PRECONDITION without
  // CUDA.
  static absl::StatusOr<MccDeviceGallery> Upload(const MccGallery& gallery, const Stream& stream);

  int num_templates() const { return num_templates_; }
  int num_cylinders() const { return num_cylinders_; }
  int max_template_size() const { return max_template_size_; }
  int scratch_template_size() const { return scratch_template_size_; }  // LssScratchTemplateSize
  int ordinal() const { return ordinal_; }
  size_t bytes() const;

  // Device pointers (see MccGallery for the layout).
  const int32_t* start() const;
  const uint64_t* bits() const;
  const uint64_t* mask() const;
  const float* x() const;
  const float* y() const;
  const float* theta() const;
  const uint16_t* bit_count() const;
  const uint8_t* full_mask() const;
  MccDeviceGalleryView view() const;

 private:
  int num_templates_ = 0;
  int num_cylinders_ = 0;
  int max_template_size_ = 0;
  int scratch_template_size_ = 0;
  int ordinal_ = 0;
  std::shared_ptr<Buffer> start_, bits_, mask_, x_, y_, theta_, bit_count_, full_mask_;
};

// Largest probe x gallery-template sizes the CUDA kernel accepts: the local
// similarity matrix of one comparison lives in shared memory.
inline constexpr int kLssCudaMaxMatrixEntries = 160 * 160;

// Scores `probe` against every template of `gallery`; `scores` (host memory,
// gallery.num_templates() floats) is written when the call returns.
absl::Status ScoreGallery(const Stream& stream, const LssProbe& probe, const MccDeviceGallery& gallery,
                          MccScore kind, const LssConstants& constants, float* scores);

namespace cuda {
// CUDA kernel variants, same scores bit for bit:
// kWarpMma (the default): one warp per gallery template and up to 8
//   templates per block (warp barriers only), the local similarities' bit
//   counts on the tensor cores (binary AND + popcount matrix products, exact
//   integers; lss_mma_layout.h); registers capped at 64 so 4 blocks of 8 warps
//   fit an SM, warp scratch sized for the gallery's typical template
//   (MccDeviceGalleryView::scratch_template_size) with the larger templates
//   in a second launch, a packed radix histogram and a selection that skips
//   the leading digits all keys share and stops once the K-th key's digit is
//   taken whole (lss.cu).
// kBlock: one 128-thread block per gallery template (block-wide barriers
//   between the steps), kept as the benchmarks' reference and a fallback.
// H200, 2026-12-02 (bench/results/2026-12-02-h200-session6.md, run 2),
// fingerprint_pipeline_bench, 10^6 templates x 16 latent crops: warp-mma 51.10
// M matches/s resident vs block 28.35 (1.80x), streamed 48.62 vs 27.07,
// whole impressions 30.39 vs 18.50; top-100 lists identical to block's. It
// replaced an older tensor-core kernel (3 blocks per SM, scratch for the
// largest template, a four-pass selection) that it beat in every row: 45.10
// resident (1.13x), 43.50 streamed, 25.46 whole impressions; 1.08-1.19x at
// 10^5 (issue 16). The plain warp kernel (0.88x block) was removed before.
enum class LssCudaKernel { kBlock, kWarpMma };

// "block", "warp-mma" (for logs and benchmark rows).
const char* LssCudaKernelName(LssCudaKernel kernel);

// Same, with `device_scores` in device memory (gallery.num_templates()
// floats); returns once they are written.
absl::Status ScoreGalleryToDevice(const Stream& stream, const LssProbe& probe, const MccDeviceGallery& gallery,
                                  MccScore kind, const LssConstants& constants, float* device_scores,
                                  LssCudaKernel variant = LssCudaKernel::kWarpMma);

// A probe uploaded once for many asynchronous launches (the pipeline scores
// each probe against many gallery batches).
class DeviceLssProbe {
 public:
  // Copies the probe to GPU `stream.ordinal()`; returns once it is there.
  static absl::StatusOr<DeviceLssProbe> Upload(const Stream& stream, const LssProbe& probe);
  int num_cylinders() const { return n_; }

 private:
  friend absl::Status EnqueueScoreGallery(const Stream&, const DeviceLssProbe&, const MccDeviceGalleryView&, MccScore,
                                          const LssConstants&, float*, LssCudaKernel);
  std::shared_ptr<Buffer> block_;  // bits, masks, x, y, theta, bit counts
  int n_ = 0;
};

// Enqueues the scoring kernel on `stream` and returns without waiting:
// `device_scores` (gallery.num_templates() floats) are written when the stream
// reaches this point. The probe and the gallery memory must stay alive until
// then. Same scores as ScoreGalleryToDevice (it is this plus a wait).
absl::Status EnqueueScoreGallery(const Stream& stream, const DeviceLssProbe& probe, const MccDeviceGalleryView& gallery,
                                 MccScore kind, const LssConstants& constants, float* device_scores,
                                 LssCudaKernel variant = LssCudaKernel::kWarpMma);

// Multi-latent scoring: all latents of a search batch in ONE kWarpMma launch
// (EnqueueScoreGalleryMulti). Block b scores latent b % L against the
// templates of group b / L, so the L blocks of a group read each gallery
// template at about the same time: it comes from DRAM once per pass (L2
// serves the other latents) and one launch replaces L. Every comparison runs
// the single-latent kernel's code, so the scores are its (and the CPU's)
// bit for bit. The options change only speed (same scores).
// Measured and removed (H100, 2026-12-07, 10^6 x 16 latents, vs the plain
// kernel in the same run; bench/results/logs/2026-12-07-h100-issue37-r2/lss/
// and bench/results/2026-12-07-h100-issue37-round6.md):
// rho transposed 0.93x, warp-aggregated histogram 0.94x, rho coordinates in
// registers 0.98x, sparse rho 0.90x, count roots 0.90x, skipped MMA products
// 0.91x. Register efficiency picks won (+9 % alone, +9 % over sparse rho) and
// are always on. Round 7 (bench/results/2026-12-07-h100-issue37-lssr-round7.md):
// compact rho (distance test first, exact rho of the survivors 32 at a time)
// won, 69.32 vs 67.32 M/s (10^6 x 16) and 61.35 vs 59.87 (10^5 x 64), always
// on; compact lambda (lambdas of the matchable entries 32 at a time) lost,
// 0.87x.
struct LssMultiOptions {
  // Launch shape: blocks of about this many templates per warp, many waves,
  // so the hardware balances latents of different sizes; 0: one wave of
  // blocks per latent walking the gallery (a one-wave multi-latent launch
  // waits for its largest latent's blocks). H100 2026-12-07, 10^6 x 16:
  // 4 -> 60.7 M matches/s, 16 -> 58.3, 64 -> 57.1, 0 -> 43.5 (single-latent
  // launches x 16: 57.2). Round 7 (dense rho): 2 -> 69.23, 4 -> 67.32,
  // 8 -> 65.95, 0 -> 46.89; with compact rho in round 8.
  int templates_per_warp = 4;
  // Diagnostics (LSS-R): when set, kLssStageCount counters in device memory
  // to which every warp adds the clock cycles its comparisons spent in each
  // step (kLssStageNames); the scores are unchanged, the time is not.
  unsigned long long* stage_cycles = nullptr;
};
inline constexpr int kLssStageCount = 5;
inline constexpr const char* kLssStageNames[kLssStageCount] = {"local similarities", "selection", "rho",
                                                               "relaxation", "efficiency picks"};

// The probes of a search batch uploaded together (one copy) for
// EnqueueScoreGalleryMulti.
class DeviceLssProbeSet {
 public:
  // Copies the probes to GPU `stream.ordinal()`; returns once they are there.
  static absl::StatusOr<DeviceLssProbeSet> Upload(const Stream& stream, const std::vector<LssProbe>& probes);
  int size() const { return static_cast<int>(n_.size()); }
  int max_cylinders() const { return max_n_; }

 private:
  friend absl::Status EnqueueScoreGalleryMulti(const Stream&, const DeviceLssProbeSet&, const MccDeviceGalleryView&,
                                               MccScore, const LssConstants&, float*, size_t, const LssMultiOptions&);
  std::shared_ptr<Buffer> blocks_;  // every probe's block (DeviceLssProbe's layout), 256-byte aligned
  std::shared_ptr<Buffer> args_;    // the kernels' per-probe arguments, pointing into blocks_
  std::vector<int> n_;
  int max_n_ = 0;
};

// Enqueues one pass scoring every probe of `probes` against `gallery`:
// latent l's scores go to device_scores + l * score_stride (floats; >=
// gallery.num_templates when there are several latents). Returns without
// waiting, like EnqueueScoreGallery; each latent's scores equal
// EnqueueScoreGallery's (kWarpMma) bit for bit.
absl::Status EnqueueScoreGalleryMulti(const Stream& stream, const DeviceLssProbeSet& probes,
                                      const MccDeviceGalleryView& gallery, MccScore kind,
                                      const LssConstants& constants, float* device_scores, size_t score_stride,
                                      const LssMultiOptions& options = {});
}  // namespace cuda

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_KERNELS_FINGERPRINT_LSS_H_
