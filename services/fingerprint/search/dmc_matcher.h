// End-to-end DMC score of a latent against a gallery: kernels 2-4
// (kernels/fingerprint/dmc.h, on the CPU or a CUDA stream) then the CPU final
// stage (dmc_final_stage.h), batch by batch. The synchronous path for
// evaluation, tests and single searches; the asynchronous dual-stream
// pipeline (alfi_pipeline.h) drives the same two pieces itself.
#ifndef TESSERA_SERVICES_FINGERPRINT_SEARCH_DMC_MATCHER_H_
#define TESSERA_SERVICES_FINGERPRINT_SEARCH_DMC_MATCHER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "kernels/fingerprint/dmc.h"
#include "kernels/fingerprint/lss.h"
#include "kernels/fingerprint/mcc.h"
#include "services/fingerprint/search/dmc_final_stage.h"
#include "services/fingerprint/search/search_control.h"

namespace tessera {
namespace fingerprint {

struct DmcMatcherOptions {
  DmcParams kernels;
  DmcFinalStageParams final_stage;
  MccParams mcc;
  LssParams lss;            // delta_theta / minME of the lambda of new pairs (set from `kernels`)
  int threads = 1;          // CPU kernels and final stage (0 = all cores)
  int batch_templates = 4096;  // templates per kernel batch
};

class DmcMatcher {
 public:
  // INVALID_ARGUMENT for bad parameters.
  static absl::StatusOr<DmcMatcher> Create(const DmcMatcherOptions& options);

  const DmcConstants& constants() const { return constants_; }
  const DmcMatcherOptions& options() const { return options_; }
  // The LSS constants of the final stage's new pairs (kernels' matchability rules).
  const LssConstants& lss_constants() const { return lss_; }

  absl::StatusOr<DmcLatent> Prepare(const MccTemplate& latent) const { return PrepareDmcLatent(latent, constants_); }

  // Scores the latent against every template of `gallery` into
  // scores[0 .. num_templates) with the kernels on `stream`'s backend.
  absl::Status ScoreGallery(const Stream& stream, const DmcLatent& latent, const MccGallery& gallery,
                            float* scores) const {
    return ScoreRange(stream, latent, gallery, 0, gallery.num_templates(), scores);
  }
  // Templates [begin, end) of `gallery` into scores[0 .. end - begin), batch
  // by batch. `stop` (may be null) is polled before each batch and inside
  // the final stage; once it says stop, its status is returned.
  absl::Status ScoreRange(const Stream& stream, const DmcLatent& latent, const MccGallery& gallery, int begin,
                          int end, float* scores, StopPoller* stop = nullptr) const;
  absl::StatusOr<std::vector<float>> ScoreGallery(const Stream& stream, const MccTemplate& latent,
                                                  const MccGallery& gallery) const;

 private:
  DmcMatcherOptions options_;
  DmcConstants constants_{};
  LssConstants lss_{};
};

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_SEARCH_DMC_MATCHER_H_
