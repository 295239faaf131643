// DMC (deformable minutiae clustering) as an ALFI pipeline batch matcher:
// kernels 2-4 of kernels/fingerprint/dmc.h on the GPU (EnqueueDmcKernels on
// the pipeline's stream) or the CPU, their outputs downloaded per batch, and
// DMC's CPU final evaluation stage (dmc_final_stage.h) run by the pipeline's
// final-stage workers. Scores equal DmcMatcher::ScoreGallery's for the same
// options (the kernels are bit-identical between backends).
//
// Sizing: a batch's outputs are DmcResultsBytes(cylinders) (~43 bytes per
// gallery cylinder) per latent, held in two device slots and host_slots
// pinned buffers, so keep latents x batch cylinders x 43 B modest (e.g.
// batch_templates = 16384 for 16 latents: ~340 MB per slot).
#ifndef TESSERA_SERVICES_FINGERPRINT_SEARCH_ALFI_DMC_MATCHER_H_
#define TESSERA_SERVICES_FINGERPRINT_SEARCH_ALFI_DMC_MATCHER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/fingerprint/dmc.h"
#include "services/fingerprint/search/alfi_pipeline.h"
#include "services/fingerprint/search/dmc_final_stage.h"
#include "services/fingerprint/search/dmc_matcher.h"

namespace tessera {
namespace fingerprint {

class DmcBatchMatcher : public BatchMatcher {
 public:
  // Uses options.kernels, final_stage, mcc and lss (batch_templates and
  // threads are the pipeline's). INVALID_ARGUMENT for bad parameters.
  static absl::StatusOr<std::unique_ptr<DmcBatchMatcher>> Create(const DmcMatcherOptions& options = {});

  std::string name() const override { return "DMC"; }
  absl::Status BeginSearch(const std::vector<MccTemplate>& latents, const Stream& stream) override;
  size_t OutputBytes(int num_templates, int num_cylinders) const override;
  absl::Status Enqueue(const Stream& stream, const GalleryBatch& batch, void* device_output,
                       size_t output_stride) override;
  absl::Status ComputeOnCpu(const MccGallery& gallery, const GalleryBatch& batch, void* host_output,
                            size_t output_stride, int threads, StopPoller* stop) override;
  absl::Status FinalStage(const GalleryBatch& batch, int latent, const void* latent_output, int begin, int end,
                          float* scores) const override;
  void EndSearch() override;

 private:
  DmcBatchMatcher() = default;
  DmcMatcherOptions options_;
  DmcConstants constants_{};
  LssConstants lss_{};
  std::vector<DmcLatent> latents_;
  std::vector<DmcDeviceLatent> device_latents_;
};

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_SEARCH_ALFI_DMC_MATCHER_H_
