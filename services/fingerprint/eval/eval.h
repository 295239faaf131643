// Accuracy evaluation on the FVC2002 databases (set B: 10 fingers x 8
// impressions each) for the MCC scores, following the FVC conventions:
//
// Verification: every ordered pair of different impressions is compared
// (80 x 79 = 6320 comparisons per database): 560 genuine (same finger,
// 10 x 8 x 7) and 5760 impostor (different fingers). A score s is accepted
// at threshold t when s >= t.
//   FMR(t) = share of impostor scores >= t, FNMR(t) = share of genuine < t.
//   EER: FVC's definition - with t1 the largest threshold where FNMR <= FMR
//   and t2 the smallest where FNMR >= FMR, the EER interval is
//   [FNMR(t1), FMR(t1)] if FNMR(t1) + FMR(t1) <= FMR(t2) + FNMR(t2), else
//   [FMR(t2), FNMR(t2)]; the EER is its midpoint.
//   FMR100 / FMR1000: the lowest FNMR at a threshold where FMR <= 1% / 0.1%.
//   ZeroFMR: the lowest FNMR with no impostor accepted.
// (The classic FVC protocol uses fewer pairs, 2800 genuine and 4950 impostor
// for 100 fingers; with only 10 fingers in set B we use all pairs.)
//
// Identification: each impression in turn is the probe against the other 79
// (closed set; its 7 mates are in the gallery). Its rank is 1 + the number
// of non-mates scoring at least as high as its best mate (ties count
// against us). Rank-k rate: share of the 80 probes with rank <= k.
#ifndef TESSERA_SERVICES_FINGERPRINT_EVAL_EVAL_H_
#define TESSERA_SERVICES_FINGERPRINT_EVAL_EVAL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/fingerprint/lss.h"
#include "kernels/fingerprint/mcc.h"
#include "services/fingerprint/search/dmc_matcher.h"
#include "services/fingerprint/search/fusion_score.h"
#include "services/fingerprint/formats/fvc_data.h"
#include "services/fingerprint/formats/template.h"

namespace tessera {
namespace fingerprint {

struct VerificationMetrics {
  int genuine = 0;
  int impostor = 0;
  double eer = 0;        // fractions, not percent
  double eer_low = 0;
  double eer_high = 0;
  double fmr100 = 0;
  double fmr1000 = 0;
  double zero_fmr = 0;
};
VerificationMetrics ComputeVerificationMetrics(std::vector<double> genuine, std::vector<double> impostor);

struct IdentificationMetrics {
  int probes = 0;
  double rank1 = 0;  // fractions
  double rank10 = 0;
  std::vector<int> ranks;  // per probe
};
// `scores` is row-major n x n (row = probe, column = gallery entry; the
// diagonal is ignored), `labels` the finger of each entry.
IdentificationMetrics ComputeIdentification(const std::vector<float>& scores, const std::vector<int>& labels);

// The kernels' view of a template.
std::vector<MinutiaPoint> ToMinutiaPoints(const Template& t);

struct DbEvaluation {
  int db = 0;
  int templates = 0;
  double mean_minutiae = 0;
  double mean_valid_cylinders = 0;
  VerificationMetrics verification;
  IdentificationMetrics identification;
  std::vector<float> scores;  // the n x n score matrix
  double descriptor_seconds = 0;
  double match_seconds = 0;   // all n x (n - 1) comparisons
  long long matches = 0;
};

// kMcc: the MCC global score `score` (LSS / LSS-R). kDmc: deformable
// minutiae clustering (dmc_matcher.h, CPU kernels). kFusion: the score-level
// fusion fusion_weight * sqrt(S_dmc) + (1 - fusion_weight) * S_lssr (the
// square root undoes DMC's squared pair sum so both scores grow linearly with
// the matched share of the templates).
enum class EvalMatcher { kMcc, kDmc, kFusion };

struct EvalOptions {
  EvalMatcher matcher = EvalMatcher::kMcc;
  MccScore score = MccScore::kLssR;
  DmcMatcherOptions dmc;
  double fusion_weight = kDefaultFusionWeight;  // fusion_score.h
  MccParams mcc;
  LssParams lss;
  int threads = 1;
};

// Builds descriptors and scores all-against-all on the CPU.
absl::StatusOr<DbEvaluation> EvaluateFvc2002Db(const std::string& data_dir, int db, const EvalOptions& options);
// The same for any set of impressions (e.g. templates extracted from the
// FVC images): `finger` labels the mates; `db` of the result is 0.
absl::StatusOr<DbEvaluation> EvaluateImpressions(const std::vector<FvcImpression>& impressions,
                                                 const EvalOptions& options);

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_EVAL_EVAL_H_
