// Latent-style identification on FVC2002: partial probes cut from real
// templates, searched through the ALFI pipeline against a gallery of the
// real impressions padded with synthetic non-mates; CMC (ranks 1..max_rank),
// rank-1 and rank-20.
//
// Protocol:
//   * gallery: every impression of the chosen databases (80 per DB, identity
//     db * 1000 + finger), then `padding` synthetic templates
//     (synthetic_gallery.h, mated_templates = 0: mirrored chimera identities,
//     non-mates of every probe) built from those impressions;
//   * probes: for each impression, `crops_per_impression` crops: the n nearest
//     minutiae (n uniform in [min_minutiae, max_minutiae], at most the
//     template's size) to a centre drawn uniformly among the template's
//     minutiae and moved by up to `centre_jitter` pixels - a compact partial
//     print like a latent's usable area. Deterministic from `seed`;
//   * rank: the probe's own source impression is left out; rank = position of
//     the first candidate of the probe's finger (its 7 other impressions)
//     among the remaining candidates, 0 when not within max_rank.
#ifndef TESSERA_SERVICES_FINGERPRINT_EVAL_LATENT_EVAL_H_
#define TESSERA_SERVICES_FINGERPRINT_EVAL_LATENT_EVAL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/fingerprint/mcc.h"
#include "services/fingerprint/search/alfi_pipeline.h"
#include "services/fingerprint/eval/synthetic_gallery.h"

namespace tessera {
namespace fingerprint {

struct LatentCropParams {
  int min_minutiae = 12;
  int max_minutiae = 30;
  double centre_jitter = 20;  // pixels
};

// A crop of `points` (see the protocol); empty input gives an empty crop.
std::vector<MinutiaPoint> CropLatent(const std::vector<MinutiaPoint>& points, const LatentCropParams& params,
                                     SplitMix64& rng);

struct LatentEvalOptions {
  std::vector<int> dbs = {1, 2, 3, 4};
  int crops_per_impression = 1;
  LatentCropParams crop;
  int64_t padding = 10000;
  uint64_t seed = 20261130;
  int max_rank = 100;
  int latents_per_search = 32;  // latents per pipeline call (bounds the output buffers)
  PipelineOptions pipeline;     // backend, batch size, threads (top_k is set from max_rank)
};

struct LatentEvalResult {
  std::string matcher;
  int probes = 0;
  int gallery_templates = 0;
  int real_templates = 0;
  double mean_probe_minutiae = 0;
  double mean_probe_cylinders = 0;
  int probes_without_cylinders = 0;  // too small a crop for any valid cylinder
  std::vector<int> ranks;            // per probe, 0 = beyond max_rank
  std::vector<double> cmc;           // ranks 1..max_rank
  double rank1 = 0;
  double rank20 = 0;
  // Non-mates ranked ahead of the mate (or ahead of rank max_rank + 1 when it
  // was not found), by kind, summed over probes; divided by the number of
  // such templates in the gallery they compare how often a real and a
  // synthetic non-mate outscores a mate.
  int64_t ahead_real = 0;
  int64_t ahead_synthetic = 0;
  int64_t real_nonmate_templates = 0;  // real templates per probe that are non-mates (averaged)
  int64_t synthetic_templates = 0;
  double gallery_seconds = 0;  // synthetic padding and descriptors
  double search_seconds = 0;
  PipelineStats stats;  // summed over the pipeline calls
};

// Loads the databases from `data_dir`, builds probes and gallery (descriptors
// on the CPU with all cores) and searches with `matcher`.
absl::StatusOr<LatentEvalResult> RunLatentEvaluation(const std::string& data_dir, const LatentEvalOptions& options,
                                                     BatchMatcher& matcher);

// The same on given inputs: probes with their identity and the gallery index
// of their source (-1: none), the gallery with one identity per template.
absl::StatusOr<LatentEvalResult> EvaluateLatents(const std::vector<MccTemplate>& probes,
                                                 const std::vector<int64_t>& probe_identity,
                                                 const std::vector<int>& probe_source,
                                                 std::shared_ptr<const MccGallery> gallery,
                                                 const std::vector<int64_t>& gallery_identity,
                                                 const LatentEvalOptions& options, BatchMatcher& matcher);

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_EVAL_LATENT_EVAL_H_
