#include "services/fingerprint/search/alfi_dmc_matcher.h"

#include <utility>

#include "common/status.h"

namespace tessera {
namespace fingerprint {
namespace {

DmcBatchView ToDmcView(const GalleryBatch& b) {
  DmcBatchView v;
  v.start = b.start;
  v.bits = b.bits;
  v.mask = b.mask;
  v.x = b.x;
  v.y = b.y;
  v.theta = b.theta;
  v.bit_count = b.bit_count;
  v.num_templates = b.num_templates;
  v.num_cylinders = b.num_cylinders;
  return v;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DmcBatchMatcher>> DmcBatchMatcher::Create(const DmcMatcherOptions& options) {
  const DmcFinalStageParams& f = options.final_stage;
  if (f.min_cluster_size < 1 || f.min_overlap < 1 || f.max_consolidated < 1 || f.tps_min_pairs < 3 ||
      !(f.tps_lambda >= 0) || !(f.tps_pair_distance > 0) || !(f.tps_pair_angle > 0)) {
    return absl::InvalidArgumentError("DmcBatchMatcher: final-stage parameters out of range");
  }
  std::unique_ptr<DmcBatchMatcher> m(new DmcBatchMatcher());
  m->options_ = options;
  TESSERA_ASSIGN_OR_RETURN(m->constants_, MakeDmcConstants(options.kernels, options.mcc));
  // The lambda of the final stage's new pairs uses the kernels' matchability
  // rules, as DmcMatcher does.
  LssParams lp = options.lss;
  lp.delta_theta = options.kernels.delta_theta;
  lp.min_matchable = options.kernels.min_matchable;
  m->lss_ = MakeLssConstants(lp, options.mcc);
  return m;
}

absl::Status DmcBatchMatcher::BeginSearch(const std::vector<MccTemplate>& latents, const Stream& stream) {
  latents_.clear();
  device_latents_.clear();
  latents_.reserve(latents.size());  // views into these must stay valid
  for (const MccTemplate& t : latents) {
    TESSERA_ASSIGN_OR_RETURN(DmcLatent l, PrepareDmcLatent(t, constants_));
    latents_.push_back(std::move(l));
  }
  if (stream.backend() != Backend::kCuda) return absl::OkStatus();
  for (const DmcLatent& l : latents_) {
    TESSERA_ASSIGN_OR_RETURN(DmcDeviceLatent d, DmcDeviceLatent::Upload(l, stream));
    device_latents_.push_back(std::move(d));
  }
  return stream.Synchronize();  // the uploads read latents_
}

size_t DmcBatchMatcher::OutputBytes(int, int num_cylinders) const { return DmcResultsBytes(num_cylinders); }

absl::Status DmcBatchMatcher::Enqueue(const Stream& stream, const GalleryBatch& batch, void* device_output,
                                      size_t output_stride) {
  if (device_latents_.size() != latents_.size()) {
    return absl::FailedPreconditionError("DmcBatchMatcher::Enqueue before a CUDA BeginSearch");
  }
  const DmcBatchView view = ToDmcView(batch);
  for (size_t l = 0; l < latents_.size(); ++l) {
    const DmcKernelResults out =
        DmcResultsAt(static_cast<uint8_t*>(device_output) + l * output_stride, batch.num_cylinders);
    TESSERA_RETURN_IF_ERROR(EnqueueDmcKernels(stream.native(), device_latents_[l].view(), view,
                                              batch.max_template_size, constants_, out));
  }
  return absl::OkStatus();
}

absl::Status DmcBatchMatcher::ComputeOnCpu(const MccGallery&, const GalleryBatch& batch, void* host_output,
                                           size_t output_stride, int threads, StopPoller* stop) {
  const DmcBatchView view = ToDmcView(batch);
  for (size_t l = 0; l < latents_.size(); ++l) {
    if (stop != nullptr && stop->StopNow()) return stop->status();
    TESSERA_RETURN_IF_ERROR(ValidateDmcBatch(latents_[l].view(), view));
    const DmcKernelResults out =
        DmcResultsAt(static_cast<uint8_t*>(host_output) + l * output_stride, batch.num_cylinders);
    cpu::RunDmcKernels(latents_[l].view(), view, constants_, out, threads);
  }
  return absl::OkStatus();
}

absl::Status DmcBatchMatcher::FinalStage(const GalleryBatch& batch, int latent, const void* latent_output, int begin,
                                         int end, float* scores) const {
  if (latent < 0 || latent >= static_cast<int>(latents_.size())) {
    return absl::InvalidArgumentError("DmcBatchMatcher::FinalStage: no such latent");
  }
  const DmcBatchView view = ToDmcView(batch);
  // The results are only read; DmcResultsAt hands out mutable pointers.
  const DmcKernelResults results = DmcResultsAt(const_cast<void*>(latent_output), batch.num_cylinders);
  for (int t = begin; t < end; ++t) {
    scores[t - begin] =
        ScoreTemplateFinalStage(latents_[latent], view, results, t, lss_, options_.final_stage).score;
  }
  return absl::OkStatus();
}

void DmcBatchMatcher::EndSearch() { device_latents_.clear(); }

}  // namespace fingerprint
}  // namespace tessera
