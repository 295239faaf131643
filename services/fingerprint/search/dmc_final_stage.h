// DMC final evaluation stage (CPU, multi-threaded over the gallery templates
// of a batch): from the outputs of kernels 2-4 (kernels/fingerprint/dmc.h) to
// one similarity per gallery template.
//
// Per gallery template G (n_G minutiae) against the latent L (n_L):
//  1. Clusters: every minutia i of G with cluster_count[i] >= min_cluster_size
//     gives a cluster of pairs (best[k], k) for its members k, one-to-one (a
//     latent minutia claimed twice keeps the member with the higher lambda,
//     then the lower k). Cluster weight = sum over its pairs of w_p (below).
//  2. Consolidation: clusters by weight (descending, ties: lower centre).
//     The heaviest one not yet used seeds a consolidated cluster; each later
//     unused cluster is merged into it when it shares >= min_overlap pairs
//     and has no conflicting pair (a latent or gallery minutia paired
//     differently); its non-conflicting pairs are added and it is marked
//     used. Overlapping locally-rigid clusters chained this way follow a
//     non-linear distortion. Repeated for up to max_consolidated seeds; the
//     heaviest consolidated cluster is kept.
//  3. Thin-plate spline: with >= tps_min_pairs pairs, the TPS f: latent ->
//     gallery (regularization tps_lambda, tps.h) fitted to the kept pairs
//     (then up to tps_refits robust refits, each dropping the control pair
//     of largest residual while it exceeds tps_keep_distance); with 2 to
//     tps_min_pairs - 1 pairs the rigid least-squares fit. Consolidated pairs
//     whose residual |f(p_l) - p_k| exceeds tps_keep_distance are dropped.
//     Then new pairs among the minutiae left unpaired: (l, k) with
//     |f(p_l) - p_k| <= tps_pair_distance and |dphi(theta_l warped by f's
//     Jacobian, theta_k)| <= tps_pair_angle, greedily by distance (ties:
//     lower l, then k); their lambda is computed on the CPU (lss.h) and must
//     exceed new_pair_min_similarity. With fewer than 2 pairs: no warp.
//  4. Final similarity over the resulting pairs P:
//       w_p = (1 - beta + beta lambda_p^pi) (1 - gamma + gamma (q_l + q_k) / 2)
//     (beta = similarity_weight, pi = similarity_power, gamma =
//     quality_weight), normalised by the
//     minutiae in the common area: with m_L the latent minutiae whose warped
//     positions lie within overlap_margin of the convex hull of the gallery
//     minutiae and m_G the gallery minutiae within overlap_margin of the hull
//     of the warped latent,
//       e_L = max(n_L (max(m_L, 1) / n_L)^overlap_power, overlap_floor n_L,
//                 min(n_L, overlap_min_minutiae))            (e_G likewise)
//       S   = min(1, (sum_{p in P} w_p)^2 / (e_L e_G))       in [0, 1]
//     (e = n without a warp). 0 when n_L or n_G is 0 or P is empty.
//     Defaults: tuned on FVC2002 DB1-DB4 set B (bench/results/
//     2026-11-30-cpu-fingerprint-dmc.md).
#ifndef TESSERA_SERVICES_FINGERPRINT_SEARCH_DMC_FINAL_STAGE_H_
#define TESSERA_SERVICES_FINGERPRINT_SEARCH_DMC_FINAL_STAGE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "kernels/fingerprint/dmc.h"
#include "kernels/fingerprint/lss.h"
#include "kernels/fingerprint/mcc.h"
#include "services/fingerprint/search/search_control.h"

namespace tessera {
namespace fingerprint {

struct DmcFinalStageParams {
  int min_cluster_size = 3;
  int min_overlap = 2;
  int max_consolidated = 4;
  int tps_min_pairs = 6;
  double tps_lambda = 10.0;         // TPS regularization (relative to mean |K|, tps.h)
  float tps_pair_distance = 12.0f;  // pixels: new pairs under the warp
  float tps_keep_distance = 10.0f;  // pixels: residual of a consolidated pair under the warp
  int tps_refits = 0;               // robust refits dropping the worst pair (step 3)
  float residual_sigma = 0.0f;      // pixels; > 0: w_p *= exp(-residual^2 / 2 sigma^2) (step 4)
  float tps_pair_angle = 0.5235988f;  // pi/6
  float new_pair_min_similarity = 0.0f;
  float overlap_margin = 15.0f;  // pixels around the convex hulls (step 4)
  float overlap_floor = 0.5f;    // the common-area counts never go below this share of n
  float overlap_min_minutiae = 0.0f;  // ... nor below this many (or n when smaller)
  float overlap_power = 1.0f;         // 0: plain n_L n_G normalisation
  float similarity_weight = 1.0f;  // beta (step 4)
  float similarity_power = 2.0f;   // pi: lambda_p^pi in w_p (step 4)
  float quality_weight = 0.5f;     // gamma (step 4)
};

// One matched pair of the final stage (indices: latent cylinder, gallery
// cylinder within its template).
struct DmcPair {
  int latent = 0;
  int gallery = 0;
  float similarity = 0;
  bool from_tps = false;  // found under the warp (step 3)
};

// The details of one template's score (for tests and diagnostics).
struct DmcTemplateScore {
  float score = 0;
  int clusters = 0;              // step 1
  int consolidated_pairs = 0;    // step 2, kept cluster
  std::vector<DmcPair> pairs;    // final P
};

// Scores template t of the batch. `batch` and `results` are host views;
// `mcc_lss` are the LSS constants for the lambda of new pairs.
DmcTemplateScore ScoreTemplateFinalStage(const DmcLatent& latent, const DmcBatchView& batch,
                                         const DmcKernelResults& results, int t, const LssConstants& mcc_lss,
                                         const DmcFinalStageParams& params);

// Scores every template of the batch into scores[0 .. num_templates):
// threads = 1 inline on the calling thread, otherwise common/parallel.h's
// ParallelForDynamic over templates (CpuThreads() workers).
// INVALID_ARGUMENT for inconsistent inputs. `stop` (may be null) is polled
// between templates; once it says stop, its status is returned (the scores
// are then incomplete).
absl::Status ScoreBatchFinalStage(const DmcLatent& latent, const DmcBatchView& batch,
                                  const DmcKernelResults& results, const LssConstants& mcc_lss,
                                  const DmcFinalStageParams& params, int threads, float* scores,
                                  StopPoller* stop = nullptr);

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_SEARCH_DMC_FINAL_STAGE_H_
