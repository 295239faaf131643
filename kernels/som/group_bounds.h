// Score-space group bounds for the BMU search of a training epoch (issue 37):
// the exhaustive search's answer (same BMU, same score bits, so the same QE
// and codebooks), computed on the node groups that could hold it only.
//
// Scores (types.h): s_j = n_j - 2 sum_{f in x} w_jf for a binary document x,
// n_j the stored ||w_j||^2. The search kernels compute it in fp32 from 0 over
// the features in ascending order, then n_j - 2 sum; |computed - exact| <= E
// for every node (ScoreErrorBound: E depends on nnz(x) and max_j n_j).
//
// Groups: strips of `strip_nodes` consecutive node indices, group g = nodes
// [g S, min(M, (g + 1) S)) (S = 16: 64 contiguous bytes of a feature-major
// fp32 row). Per document and group a lower bound L_g on the *exact* scores
// of the group's nodes (GroupBoundsView::lower, fp32, rounded down).
//
// After a batch update (UpdateOptions::group_drift), per group
//   m_g  <= min_{j in g} (n_j' - n_j)                 (norm_change)
//   D_gf >= max_{j in g} max(0, w_jf' - w_jf)           (weight_rise, per feature)
// computed inside the update from the old and new values it holds. Since
// s_j' - s_j = (n_j' - n_j) - 2 sum_{f in x} (w_jf' - w_jf),
//   L_g' = L_g + m_g - 2 sum_{f in x} D_gf <= min_{j in g} s_j'   (rounded down).
// Let b be the document's previous BMU and s_b' its computed new score (the
// search's own operations, so the same bits). A group with L_g' - E > s_b'
// (strictly, with a rounding margin) holds no node whose computed score ties
// or beats b's, so the exhaustive search's BMU (smallest (score, index)) lies
// in the groups that are searched: every group not so excluded, always b's
// own. Ties are searched; NaN or infinite bounds and scores never exclude.
// Searched groups get their exact computed minimum (minus E) as the new L_g;
// the others keep L_g'.
//
// The second-best unit of a bounded search is the second best over the
// searched groups only: the topographic error of such an epoch is
// approximate (the trainer's final pass is an exhaustive search).
//
// Memory: 4 G bytes per document (G = ceil(M / S); 1 KB at 64x64 with S = 16:
// 30.6 GB at 29.9 M documents), 4 G V bytes for weight_rise (31 MB at 64x64
// over 30 K features), 4 G for norm_change.
#ifndef TESSERA_KERNELS_SOM_GROUP_BOUNDS_H_
#define TESSERA_KERNELS_SOM_GROUP_BOUNDS_H_

#include <cmath>
#include <cstdint>

#include "absl/status/status.h"
#include "common/device.h"
#include "kernels/som/bmu.h"
#include "kernels/som/documents.h"
#include "kernels/som/types.h"
#include "kernels/som/workspace.h"

namespace tessera {
namespace som {

// ceil(nodes / strip_nodes): the number of groups (0 when strip_nodes < 1).
TESSERA_SOM_HD inline int64_t GroupCount(int64_t nodes, int strip_nodes) {
  return strip_nodes < 1 ? 0 : (nodes + strip_nodes - 1) / strip_nodes;
}

// Per document bounds, in the stream's backend memory.
struct GroupBoundsView {
  int strip_nodes = 16;    // S: nodes per group
  int64_t groups = 0;      // G = GroupCount(nodes, S)
  float* lower = nullptr;  // documents x G: lower[d * G + g] = L_g of document d
};

// What an update changed, per group (the stream's backend memory).
struct GroupDriftView {
  int strip_nodes = 16;
  int64_t groups = 0;
  float* weight_rise = nullptr;  // features x G: weight_rise[v * G + g] = D_gv >= 0
  float* norm_change = nullptr;  // G: m_g (may be negative)
};

// Counts of one search (host).
struct GroupSearchStats {
  int64_t documents = 0;
  int64_t pairs = 0;               // documents x groups
  int64_t pairs_searched = 0;      // (document, group) pairs searched exactly
  int64_t documents_skipped = 0;   // documents whose only searched group was their previous BMU's
};

// One search. `drift` null: every group of every document is searched (a full
// search; `out.bmu` may hold anything) and every bound set. `drift` given:
// `out.bmu` must hold the previous search's BMUs and `bounds.lower` the bounds
// of that search; bounds are moved by the drift and only the groups that may
// hold the new BMU are searched (see the top). Either way bmu and score are
// those of FindBmus (kFeatureMajor), bit for bit; second (may be null) is
// exact after a full search, approximate after a bounded one. The codebook is
// feature-major. CUDA: strip_nodes must be 4, 8, 16, 32, 64 or 128 and the
// node count a multiple of 4 (InvalidArgument otherwise; the CPU takes any
// S >= 1); documents are visited in the order of BmuHints (previous BMU, key)
// as FindBmus does. `stats` (host, may be null) gets the counts.
absl::Status FindBmusGroupBounded(const Stream& stream, const DocumentSet& docs, const CodebookView& codebook,
                                  const BmuOutput& out, const GroupBoundsView& bounds, const GroupDriftView* drift,
                                  SomWorkspace* workspace = nullptr, const BmuHints& hints = BmuHints(),
                                  GroupSearchStats* stats = nullptr);

// Why a backend cannot run group bounds for this codebook and strip (empty
// when it can).
const char* GroupBoundsUnsupportedReason(Backend backend, const CodebookView& codebook, int strip_nodes);

namespace group_bounds {

// Values stored as float are rounded outwards; double arithmetic is widened
// by kSlack (far above its 2^-53 errors).
constexpr double kSlack = 1e-9;

TESSERA_SOM_HD inline float RoundUp(double x) {
  const float f = static_cast<float>(x);
  return static_cast<double>(f) < x ? nextafterf(f, INFINITY) : f;
}
TESSERA_SOM_HD inline float RoundDown(double x) {
  const float f = static_cast<float>(x);
  return static_cast<double>(f) > x ? nextafterf(f, -INFINITY) : f;
}

// E >= |computed score - exact score| for every node, for a document of
// `nnz` features where every n_j <= max_sq_norm: the fp32 sum from 0 of nnz
// weights errs by <= gamma_{nnz-1} sum |w_f| <= (nnz - 1) u sqrt(nnz n) (u =
// 2^-24, Cauchy-Schwarz), doubled, plus the subtraction's u |s| <= u (n + 2
// sqrt(nnz n)): <= 2^-23 (n + nnz S), S = sqrt(nnz n), to first order; E
// takes twice that plus a tiny floor. Not finite for non-finite norms.
TESSERA_SOM_HD inline double ScoreErrorBound(int64_t nnz, float max_sq_norm) {
  const double n = static_cast<double>(max_sq_norm) > 0 ? static_cast<double>(max_sq_norm) : 0.0;
  const double k = static_cast<double>(nnz);
  return 0x1p-22 * (n + (k + 1) * sqrt(k * n)) + 1e-30;
}

// L_g from the computed minimum score of the group's nodes: min - E rounded
// down; -inf when anything is not finite (never excludes).
TESSERA_SOM_HD inline float BoundFromMinimum(float minimum, double err) {
  const double m = minimum;
  if (!(m > -INFINITY && m < INFINITY) || !(err < INFINITY)) return -INFINITY;
  return RoundDown(m - err - kSlack * (fabs(m) + err));
}

// L_g' = L_g + m_g - 2 rise_sum (rise_sum = sum_{f in x} D_gf, summed in
// double), rounded down; NaN stays NaN (never excludes).
TESSERA_SOM_HD inline float BoundAfterDrift(float lower, float norm_change, double rise_sum) {
  const double l = lower, c = norm_change;
  const double t = l + c - 2.0 * rise_sum;
  return RoundDown(t - kSlack * (fabs(l) + fabs(c) + 2.0 * rise_sum));
}

// True when no node of a group bounded below by `lower` can tie or beat the
// computed score `bmu_score` (strict margin; NaN/inf never exclude).
TESSERA_SOM_HD inline bool GroupExcluded(float lower, double err, float bmu_score) {
  const double l = lower, s = bmu_score;
  if (!(l > -INFINITY && l < INFINITY) || !(s > -INFINITY && s < INFINITY) || !(err < INFINITY)) return false;
  return l - err - kSlack * (fabs(l) + fabs(s) + err) > s;
}

// The smaller of two group minima; NaN makes -inf (such a group is never excluded).
TESSERA_SOM_HD inline float MinimumOrNan(float a, float b) {
  if (a != a || b != b) return -INFINITY;
  return a < b ? a : b;
}

// The update's entries. D_gf from the largest new - old of the group's
// weights of feature f, each difference of two stored values taken in double
// (relative error <= 2^-53): rounded up, 0 when none rises, +inf for NaN. The
// change of one norm rounded down.
TESSERA_SOM_HD inline float WeightRise(double largest_difference) {
  const double d = largest_difference;
  if (d != d) return INFINITY;
  return d > 0 ? RoundUp(d * (1 + kSlack)) : 0.0f;
}
TESSERA_SOM_HD inline float NormChange(double now, double before) {
  const double d = now - before;
  if (!(d > -INFINITY && d < INFINITY)) return -INFINITY;
  return RoundDown(d - kSlack * fabs(d));  // a double difference of two floats errs by <= 2^-53 |d|
}

// m_g: the smallest NormChange over a group's nodes [j0, j1) (the CPU
// update and GroupNormChangeKernel); never NaN.
TESSERA_SOM_HD inline float GroupNormChange(const float* now, const float* before, int64_t j0, int64_t j1) {
  float change = INFINITY;
  for (int64_t j = j0; j < j1; ++j) change = fminf(change, NormChange(now[j], before[j]));
  return change;
}

}  // namespace group_bounds

namespace cpu {
// The max n_j of a host codebook, +inf when any norm is NaN.
float MaxSqNorm(const CodebookView& codebook);
void FindBmusGroupBounded(const CsrView& docs, const CodebookView& codebook, const BmuOutput& out,
                          const GroupBoundsView& bounds, const GroupDriftView* drift, GroupSearchStats* stats);
}  // namespace cpu

namespace cuda {
absl::Status FindBmusGroupBounded(const Stream& stream, const DocumentSet& docs, const CodebookView& codebook,
                                  const BmuOutput& out, const GroupBoundsView& bounds, const GroupDriftView* drift,
                                  SomWorkspace& workspace, const BmuHints& hints, GroupSearchStats* stats);
}  // namespace cuda

}  // namespace som
}  // namespace tessera

#endif  // TESSERA_KERNELS_SOM_GROUP_BOUNDS_H_
