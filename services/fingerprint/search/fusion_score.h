// Score-level fusion of DMC and LSS-R, shared by the searcher's "fusion" and
// "cascade" matchers and by the evaluation tools, so that what is tuned is
// what is served.
//
//   fused = w * sqrt(S_dmc) + (1 - w) * S_lssr
//
// The square root undoes DMC's squared pair sum so that both terms grow
// linearly with the matched share of the templates (both lie in [0, 1]).
// w was chosen on FVC2002 DB1-DB2 only (bench/fingerprint_matchers,
// bench/results/2026-12-02-cpu-fingerprint-matchers.md); DB3-DB4 validate it.
#ifndef TESSERA_SERVICES_FINGERPRINT_SEARCH_FUSION_SCORE_H_
#define TESSERA_SERVICES_FINGERPRINT_SEARCH_FUSION_SCORE_H_

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tessera {
namespace fingerprint {

inline constexpr double kDefaultFusionWeight = 0.4;
// Cascade: LSS-R candidates re-scored with DMC + fusion per probe. 200 keeps
// the DMC share of the work near 200 / gallery size while a mate that LSS-R
// ranks as low as 200 can still come first.
inline constexpr int kDefaultCascadeCandidates = 200;
inline constexpr int kMaxCascadeCandidates = 100000;

inline float FuseScores(float lssr, float dmc, double weight) {
  return static_cast<float>(weight * std::sqrt(std::max(0.0f, dmc)) + (1.0 - weight) * lssr);
}

// INVALID_ARGUMENT naming the field for a weight outside [0, 1] (NaN too).
inline absl::Status ValidateFusionWeight(double weight) {
  if (!(weight >= 0.0 && weight <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("fusion_weight must be in [0, 1], got ", weight));
  }
  return absl::OkStatus();
}

// INVALID_ARGUMENT naming the field outside 1..kMaxCascadeCandidates.
inline absl::Status ValidateCascadeCandidates(int candidates) {
  if (candidates < 1 || candidates > kMaxCascadeCandidates) {
    return absl::InvalidArgumentError(
        absl::StrCat("cascade_candidates must be 1-", kMaxCascadeCandidates, ", got ", candidates));
  }
  return absl::OkStatus();
}

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_SEARCH_FUSION_SCORE_H_
