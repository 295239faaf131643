#include "services/fingerprint/search/dmc_matcher.h"

#include <algorithm>

#include "common/status.h"

namespace tessera {
namespace fingerprint {

absl::StatusOr<DmcMatcher> DmcMatcher::Create(const DmcMatcherOptions& options) {
  if (options.batch_templates < 1) return absl::InvalidArgumentError("DmcMatcher: batch_templates must be >= 1");
  if (options.threads < 0) return absl::InvalidArgumentError("DmcMatcher: threads must be >= 0");
  DmcMatcher m;
  m.options_ = options;
  TESSERA_ASSIGN_OR_RETURN(m.constants_, MakeDmcConstants(options.kernels, options.mcc));
  LssParams lp = options.lss;
  lp.delta_theta = options.kernels.delta_theta;
  lp.min_matchable = options.kernels.min_matchable;
  m.lss_ = MakeLssConstants(lp, options.mcc);
  return m;
}

absl::Status DmcMatcher::ScoreRange(const Stream& stream, const DmcLatent& latent, const MccGallery& gallery,
                                    int range_begin, int range_end, float* scores, StopPoller* stop) const {
  if (range_begin < 0 || range_end > gallery.num_templates() || range_begin > range_end) {
    return absl::InvalidArgumentError("DmcMatcher::ScoreRange: range outside the gallery");
  }
  std::vector<int32_t> start;
  std::vector<int16_t> best;
  std::vector<float> sim, quality;
  std::vector<uint8_t> count, members;
  for (int begin = range_begin; begin < range_end; begin += options_.batch_templates) {
    if (stop != nullptr && stop->StopNow()) return stop->status();
    const int end = std::min(range_end, begin + options_.batch_templates);
    const int n = gallery.start[end] - gallery.start[begin];
    best.resize(n);
    sim.resize(n);
    quality.resize(n);
    count.resize(n);
    members.resize(static_cast<size_t>(n) * kDmcMaxClusterSize);
    const DmcKernelResults results{best.data(), sim.data(), quality.data(), count.data(), members.data()};
    TESSERA_RETURN_IF_ERROR(
        RunDmcKernelsOnGallery(stream, latent, gallery, begin, end, constants_, results, options_.threads));
    const DmcBatchView batch = HostBatchView(gallery, begin, end, &start);
    TESSERA_RETURN_IF_ERROR(ScoreBatchFinalStage(latent, batch, results, lss_, options_.final_stage,
                                                 options_.threads, scores + (begin - range_begin), stop));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> DmcMatcher::ScoreGallery(const Stream& stream, const MccTemplate& latent,
                                                            const MccGallery& gallery) const {
  TESSERA_ASSIGN_OR_RETURN(DmcLatent prepared, Prepare(latent));
  std::vector<float> scores(gallery.num_templates(), 0.0f);
  TESSERA_RETURN_IF_ERROR(ScoreGallery(stream, prepared, gallery, scores.data()));
  return scores;
}

}  // namespace fingerprint
}  // namespace tessera
