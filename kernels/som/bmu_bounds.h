// Distance bounds that let a training epoch's BMU search skip documents whose
// BMU provably cannot change (Hamerly's exact accelerated k-means, issue 37):
// the same BMUs, scores and hence codebooks, bit for bit, with less search.
//
// Per document: `upper` >= ||x - w_b|| (b = its current BMU) and `lower` <=
// min over j != b of ||x - w_j||, true Euclidean distances to the *stored*
// weights. After an update that moved node j by at most shift_j
// (UpdateOptions::node_shift), upper + shift_b and lower - max_{j != b}
// shift_j bound the new distances (triangle inequality). When
//   lower > 0 and lower^2 - upper^2 > 2 E
// every other node's computed score exceeds b's (E: ScoreErrorBound, the
// rounding of one computed score), so the exhaustive search would return b
// again: the document is not searched; its score is computed alone, with the
// kernels' own operations (fp32 sum over its features in ascending order from
// 0, then ||w_b||^2 - 2 sum), so QE keeps its bits. Only a strictly positive
// gap skips, so ties go through the full search (lowest index, as ever).
//
// The second-best unit is not recomputed for a skipped document: it keeps the
// one of its last full search, so the topographic error of an epoch with
// skips is approximate (the trainer's final pass searches every document).
#ifndef TESSERA_KERNELS_SOM_BMU_BOUNDS_H_
#define TESSERA_KERNELS_SOM_BMU_BOUNDS_H_

#include <cmath>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/device.h"
#include "kernels/som/bmu.h"
#include "kernels/som/documents.h"
#include "kernels/som/types.h"
#include "kernels/som/workspace.h"

namespace tessera {
namespace som {

// Per document, in the stream's backend memory (docs.rows() floats each).
struct BmuBounds {
  float* upper = nullptr;
  float* lower = nullptr;
};

// What bounds need of the codebook between two searches (host scalars).
struct BoundStep {
  // false: the bounds hold nothing yet (the first search): every document is
  // searched and its bounds set.
  bool have_bounds = false;
  // Per node, >= its move since the bounds were set (backend memory; only
  // read when have_bounds).
  const float* node_shift = nullptr;
  float max_shift = 0;       // max_j node_shift[j]
  int32_t max_node = -1;     // a node with that shift
  float other_max_shift = 0; // max over j != max_node
  float max_sq_norm = 0;     // max_j ||w_j||^2 of the codebook searched now
};

// The step of a codebook: max shifts (when node_shift is given) and max
// ||w||^2, from the stream's backend memory.
absl::StatusOr<BoundStep> MakeBoundStep(const Stream& stream, const float* node_shift, const float* sq_norms,
                                        int64_t nodes);

// The BMU search with bounds: `out.bmu` (and `out.second`) must hold the
// previous search's results when step.have_bounds; skipped documents keep
// their bmu and second and get their score; the others are searched as
// FindBmus does (CUDA: the register-span kernel, on the compacted list in
// (previous BMU, key) order). Bounds are updated for every document.
// `searched` (host, may be null) gets the number of documents searched.
absl::Status FindBmusBounded(const Stream& stream, const DocumentSet& docs, const CodebookView& codebook,
                             const BmuOutput& out, const BmuBounds& bounds, const BoundStep& step,
                             SomWorkspace* workspace = nullptr, BmuTuning tuning = BmuTuning(),
                             const BmuHints& hints = BmuHints(), int64_t* searched = nullptr);

namespace bounds {

// Rounding: values stored as float are rounded outwards (upper up, lower
// down); double arithmetic is widened by kSlack (far above its 2^-53 errors).
constexpr double kSlack = 1e-9;

TESSERA_SOM_HD inline float RoundUp(double x) {
  const float f = static_cast<float>(x);
  return static_cast<double>(f) < x ? nextafterf(f, INFINITY) : f;
}
TESSERA_SOM_HD inline float RoundDown(double x) {
  const float f = static_cast<float>(x);
  return static_cast<double>(f) > x ? nextafterf(f, -INFINITY) : f;
}

// A bound E on |computed score - exact score| for every node, for a document
// of `nnz` features, where every ||w||^2 <= max_sq_norm. The kernels compute
// s = fl(n - 2 fl(sum_k w_{f_k})) with n = ||w||^2 summed in double and
// rounded to float (error <= u n, u = 2^-24), the sum in fp32 from 0 (<=
// gamma_{nnz-1} sum|w_f| <= (nnz - 1) u / (1 - (nnz - 1) u) sqrt(nnz n) by
// Cauchy-Schwarz; doubled: 2 nnz u S, S = sqrt(nnz n)), the doubling exact,
// and the subtraction (<= u |s| <= u (n + 2 S)). Total <= 2^-23 (n + nnz S)
// (+ second order); E takes twice that: 2^-22 (n + (nnz + 1) S), plus a tiny
// absolute floor so that E > 0. Not finite (inf/NaN weights): no skip.
TESSERA_SOM_HD inline double ScoreErrorBound(int64_t nnz, float max_sq_norm) {
  const double n = static_cast<double>(max_sq_norm) > 0 ? static_cast<double>(max_sq_norm) : 0.0;
  const double k = static_cast<double>(nnz);
  const double s = sqrt(k * n);
  return 0x1p-22 * (n + (k + 1) * s) + 1e-30;
}

// >= the true distance when the computed score is `score` (||x - w||^2 = nnz + s).
TESSERA_SOM_HD inline float UpperFromScore(int64_t nnz, float score, double err) {
  const double d2 = static_cast<double>(nnz) + static_cast<double>(score) + err;
  return RoundUp(sqrt(d2 > 0 ? d2 : 0.0) * (1 + kSlack));
}
// <= the true distance when the computed score is `score`.
TESSERA_SOM_HD inline float LowerFromScore(int64_t nnz, float score, double err) {
  const double d2 = static_cast<double>(nnz) + static_cast<double>(score) - err;
  return RoundDown(sqrt(d2 > 0 ? d2 : 0.0) * (1 - kSlack));
}
// The bounds after the nodes moved: own shift for the BMU, the largest other for the rest.
TESSERA_SOM_HD inline float ShiftedUpper(float upper, float shift) {
  return RoundUp((static_cast<double>(upper) + shift) * (1 + kSlack));
}
TESSERA_SOM_HD inline float ShiftedLower(float lower, float shift) {
  const double l = static_cast<double>(lower) - shift;
  return RoundDown(l > 0 ? l * (1 - kSlack) : l);
}
TESSERA_SOM_HD inline float OtherShift(const BoundStep& step, int32_t bmu) {
  return bmu == step.max_node ? step.other_max_shift : step.max_shift;
}
// True when the BMU provably stays (see the top): a strictly positive margin
// of 2 E over the squared bounds. NaN/inf bounds never skip.
TESSERA_SOM_HD inline bool CanSkip(float upper, float lower, double err) {
  if (!(lower > 0) || !(upper >= 0)) return false;
  const double l = lower, u = upper;
  const double gap = l * l - u * u;
  return gap > 2 * err + kSlack * (l * l + u * u);
}

}  // namespace bounds

namespace cpu {
absl::Status FindBmusBounded(const CsrView& docs, const CodebookView& codebook, const BmuOutput& out,
                             const BmuBounds& bounds, const BoundStep& step, int64_t* searched);
// The score of `node` alone, with the search kernels' operations (same bits).
float NodeScore(const CsrView& docs, const CodebookView& codebook, int64_t d, int32_t node);
}  // namespace cpu

namespace cuda {
absl::Status FindBmusBounded(const Stream& stream, const DocumentSet& docs, const CodebookView& codebook,
                             const BmuOutput& out, const BmuBounds& bounds, const BoundStep& step,
                             SomWorkspace& workspace, BmuTuning tuning, const BmuHints& hints, int64_t* searched);
}  // namespace cuda

}  // namespace som
}  // namespace tessera

#endif  // TESSERA_KERNELS_SOM_BMU_BOUNDS_H_
