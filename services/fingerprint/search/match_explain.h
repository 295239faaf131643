// Why a candidate scored: the LSS-R score of one probe / gallery pair with
// the minutiae pairs that score sums and the rigid alignment they imply, for
// examiners charting a latent against a candidate (issue 33).
//
// Units: coordinates are pixels of the template's image at 500 ppi (x right,
// y down), angles radians counterclockwise as displayed (ISO 19794-2,
// services/fingerprint/formats/template.h), like MinutiaPoint.
//
// The score is the searcher's LSS-R score for the pair (searcher.h Compare
// with matcher "lssr": the same MCC descriptors and LSS constants, and
// cpu::ReferenceLssRSelection equals cpu::Score bit for bit). The pairs are
// the min(n_P, p) cylinder pairs of highest efficiency after relaxation
// that the score adds up (kernels/fingerprint/lss.h). Minutiae whose
// cylinders are invalid (too close to the print's edge, too few neighbours:
// mcc.h) have no cylinder and never appear in a pair.
//
// The alignment is the least-squares rigid transform (closed-form 2-D
// Procrustes, no scale: tps.h FitRigid) taking the paired probe positions to
// the paired gallery positions:
//   T(p) = R(a) p + (tx, ty),  R(a) (dx, dy) = (dx cos a + dy sin a, -dx sin a + dy cos a)
// so a probe direction theta becomes theta + a. The residual of a pair is
// |T(probe) - gallery| in pixels; the RMS residual is sqrt(mean residual^2).
// Pairs of a genuine match agree on one transform up to skin distortion; an
// impostor's pairs do not (bench/results/2026-12-06-cpu-match-charting.md
// measures both on FVC2002 and gives kGenuineRmsResidualBound).
#ifndef TESSERA_SERVICES_FINGERPRINT_SEARCH_MATCH_EXPLAIN_H_
#define TESSERA_SERVICES_FINGERPRINT_SEARCH_MATCH_EXPLAIN_H_

#include <vector>

#include "absl/status/statusor.h"
#include "kernels/fingerprint/lss.h"
#include "kernels/fingerprint/mcc.h"

namespace tessera {
namespace fingerprint {

// The RMS residual (pixels at 500 ppi) that genuine pairs stay below: the
// 95th percentile of the genuine pairs of FVC2002 DB1 set B, rounded up
// (bench/results/2026-12-06-cpu-match-charting.md: most impostor pairs lie
// above it). A guide for examiners, not a decision threshold.
inline constexpr double kGenuineRmsResidualBound = 14.0;

// The matcher's parameters; the defaults are the searcher's.
struct ExplainOptions {
  MccParams mcc;
  LssParams lss;
};

// One pair of minutiae that the LSS-R score sums.
struct MatchedPair {
  int probe_index = 0;    // into the probe's minutiae
  int gallery_index = 0;  // into the gallery's minutiae
  MinutiaPoint probe;     // the two minutiae (pixels, radians)
  MinutiaPoint gallery;
  float local_similarity = 0;    // lambda^0 of the two cylinders, 0-1
  float relaxed_similarity = 0;  // after relaxation: what the score adds
  double residual = 0;           // |T(probe) - gallery|, pixels (0 without an alignment)
};

// T above. Defined by two pairs or more.
struct RigidAlignment {
  bool valid = false;  // false with fewer than 2 pairs (then the identity)
  double rotation = 0;  // a, radians, counterclockwise as displayed
  double tx = 0;        // pixels
  double ty = 0;
};

struct MatchExplanation {
  float score = 0;  // LSS-R, 0-1: the searcher's score for this pair
  int np = 0;       // n_P, the score's divisor: score = sum of relaxed similarities / n_P
  int probe_cylinders = 0;    // minutiae with valid cylinders (the others cannot pair)
  int gallery_cylinders = 0;
  std::vector<MatchedPair> pairs;  // in the order LSS-R took them (best efficiency first)
  RigidAlignment alignment;
  double rms_residual = 0;  // pixels; 0 without an alignment
};

// INVALID_ARGUMENT naming the side for an empty probe or gallery and for
// minutiae the matcher refuses (ValidateMccInput: more than 255, non-finite
// or huge values) or invalid options. Templates whose minutiae all lack a
// valid cylinder are not an error: score 0, no pairs.
absl::StatusOr<MatchExplanation> ExplainMatch(const std::vector<MinutiaPoint>& probe,
                                              const std::vector<MinutiaPoint>& gallery,
                                              const ExplainOptions& options = {});

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_SEARCH_MATCH_EXPLAIN_H_
