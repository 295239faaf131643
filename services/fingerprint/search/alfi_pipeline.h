// The ALFI asynchronous dual-stream search pipeline (design: shared seed 003,
// sections 2.2, 3 and 5): a 1:N search of one or many latents against a
// large MCC gallery, processed in batches of templates so that the phases
// of different batches overlap.
//
// CUDA backend: the gallery (MccGallery's structure of arrays) is copied once
// into pinned host memory and cut into batches of `batch_templates`
// templates, each with its own rebased start table (precomputed, so a batch
// upload is eight contiguous asynchronous copies). Two CUDA streams and two
// device slots (double buffering): batch k goes to stream/slot k % 2, so the
// upload of batch k+1 (copy engine), the kernels of batch k (SMs) and the
// download of batch k-1 overlap. Events bracket each phase of each batch;
// a finisher thread waits on batch k's last event and runs the host final
// stage (worker threads over the batch's templates) and the top-k merge
// while the GPU works on later batches. Host output buffers form a ring of
// `host_slots` so the downloads never overwrite what the final stage still
// reads. Each uploaded batch is scored for every latent of the call.
//
// CPU backend: the same pipeline without copies: the matcher computes batch
// k on all cores while the finisher thread runs the final stage of batch
// k-1.
//
// The work per batch comes from a BatchMatcher: LSS / LSS-R here (kernel =
// scores per template, final stage = identity), DMC in alfi_dmc_matcher.h
// (kernels 2-4, final stage = DMC's CPU evaluation). Whatever the batching,
// the result is the top-k of scoring the whole gallery at once (ties: lower
// template index first).
#ifndef TESSERA_SERVICES_FINGERPRINT_SEARCH_ALFI_PIPELINE_H_
#define TESSERA_SERVICES_FINGERPRINT_SEARCH_ALFI_PIPELINE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "kernels/fingerprint/lss.h"
#include "kernels/fingerprint/mcc.h"
#include "services/fingerprint/search/search_control.h"
#include "services/fingerprint/search/top_k.h"

namespace tessera {
namespace fingerprint {

// One gallery batch: templates [first_template, first_template +
// num_templates) in MccGallery's layout with a rebased start table
// (start[0] = 0). Pointers are host or device memory depending on the call.
struct GalleryBatch {
  int index = 0;           // batch number
  int first_template = 0;  // gallery index of the batch's template 0
  int num_templates = 0;
  int num_cylinders = 0;
  int max_template_size = 0;
  int scratch_template_size = 0;  // LssScratchTemplateSize of the batch (LssCudaKernel::kWarpMma)
  const int32_t* start = nullptr;  // num_templates + 1
  const uint64_t* bits = nullptr;
  const uint64_t* mask = nullptr;
  const float* x = nullptr;
  const float* y = nullptr;
  const float* theta = nullptr;
  const uint16_t* bit_count = nullptr;
  const uint8_t* full_mask = nullptr;
};

// The per-batch work of a search. One matcher serves one Search at a time;
// FinalStage may be called from several threads at once.
class BatchMatcher {
 public:
  virtual ~BatchMatcher() = default;
  virtual std::string name() const = 0;

  // Once per search, before any batch: prepares the latents (and on a CUDA
  // stream uploads them, returning once they are on the device).
  virtual absl::Status BeginSearch(const std::vector<MccTemplate>& latents, const Stream& stream) = 0;
  // Bytes of kernel output per latent for a batch of this many templates and
  // cylinders (the download size; the pipeline keeps each latent's output
  // 256-byte aligned).
  virtual size_t OutputBytes(int num_templates, int num_cylinders) const = 0;
  // CUDA: enqueues the kernels of every latent on `stream` for `batch`
  // (device pointers) without waiting; latent l writes device_output +
  // l * output_stride.
  virtual absl::Status Enqueue(const Stream& stream, const GalleryBatch& batch, void* device_output,
                               size_t output_stride) = 0;
  // CPU: the same outputs computed on the host with `threads` threads.
  // `gallery` is the whole gallery (batch.first_template indexes it).
  // `stop` (may be null) is polled inside; once it says stop, return its
  // status (the outputs are then incomplete).
  virtual absl::Status ComputeOnCpu(const MccGallery& gallery, const GalleryBatch& batch, void* host_output,
                                    size_t output_stride, int threads, StopPoller* stop) = 0;
  // The final stage on the host: scores of templates [begin, end) of the
  // batch (host pointers) for latent `latent` from its downloaded output;
  // scores[i] belongs to template begin + i.
  virtual absl::Status FinalStage(const GalleryBatch& batch, int latent, const void* latent_output, int begin,
                                  int end, float* scores) const = 0;
  virtual void EndSearch() {}
  // Called after BeginSearch: thresholds[l] is latent l's current k-th best
  // score in the search's top list (0 until the list is full), raised by the
  // pipeline as batches are merged (32-bit relaxed atomic stores; host
  // memory, read by CPU matchers while they run). A matcher may report
  // kLssPrunedScore for a template whose score it proves to be below
  // thresholds[l] (it cannot enter the list). Default: ignored.
  virtual void SetRunningThresholds(const float* thresholds) { (void)thresholds; }
};

// LSS or LSS-R through kernels/fingerprint/lss.h: the kernel writes one score
// per template, the final stage passes it on. `kernel` picks the CUDA
// variant (same scores); the default is the tensor-core one (1.80x kBlock at
// 10^6 templates on the H200, lss.h), which scores every latent of the
// search in one launch per batch (cuda::EnqueueScoreGalleryMulti: each
// template read once for all of them, so a SearchBatcher batch is one pass);
// kBlock launches once per latent. `prune` (LSS-R, CPU backend):
// comparisons that provably cannot beat the running k-th best
// (SetRunningThresholds) skip the relaxation; the top-k lists are the same.
// The GPU scores every pair.
class LssBatchMatcher : public BatchMatcher {
 public:
  explicit LssBatchMatcher(MccScore kind = MccScore::kLssR, const LssParams& lss = {}, const MccParams& mcc = {},
                           cuda::LssCudaKernel kernel = cuda::LssCudaKernel::kWarpMma, bool prune = true,
                           bool multi_latent_launch = false);
  ~LssBatchMatcher() override;
  std::string name() const override;
  absl::Status BeginSearch(const std::vector<MccTemplate>& latents, const Stream& stream) override;
  size_t OutputBytes(int num_templates, int num_cylinders) const override;
  absl::Status Enqueue(const Stream& stream, const GalleryBatch& batch, void* device_output,
                       size_t output_stride) override;
  absl::Status ComputeOnCpu(const MccGallery& gallery, const GalleryBatch& batch, void* host_output,
                            size_t output_stride, int threads, StopPoller* stop) override;
  absl::Status FinalStage(const GalleryBatch& batch, int latent, const void* latent_output, int begin, int end,
                          float* scores) const override;
  void EndSearch() override;
  void SetRunningThresholds(const float* thresholds) override;

 private:
  struct DeviceProbes;
  bool Pruning() const;
  MccScore kind_;
  cuda::LssCudaKernel kernel_;
  bool prune_;
  // kWarpMma: every latent of a search in one launch (EnqueueScoreGalleryMulti:
  // the same scores). Off: on an H100 at 10^6 templates x 16 crops it ran at
  // 0.74-0.81x of one launch per latent (2026-12-07; its scratch is sized for
  // the batch's largest latent).
  bool multi_latent_launch_;
  const float* thresholds_ = nullptr;
  MccParams mcc_;
  LssConstants constants_;
  std::vector<LssProbe> probes_;
  std::unique_ptr<DeviceProbes> device_;
};

struct PipelineOptions {
  Backend backend = Backend::kCpu;
  int ordinal = 0;
  int batch_templates = 65536;
  int top_k = 100;
  int threads = 0;      // CPU matcher and final-stage workers; 0 = CpuThreads()
  int host_slots = 3;   // host output buffers in flight (>= 2)
  // false: every phase waits for the previous one (one batch in flight, the
  // final stage inline): the "sum of the stages" baseline the overlap is
  // measured against, with uncontended per-phase times.
  bool overlap = true;
  // CUDA: upload the whole gallery once at Create and keep it on the GPU;
  // batches then skip the upload phase (kernels, downloads and the final
  // stage still overlap). For galleries that fit in device memory.
  bool resident = false;
};

// Per-call settings of AlfiPipeline::Search.
struct PipelineSearchOptions {
  int top_k = 0;  // candidates per latent; 0: PipelineOptions::top_k
  // exclude[t] != 0: gallery template t is never a candidate (e.g. deleted);
  // num_templates() entries; null: none excluded. Read while the search runs.
  const uint8_t* exclude = nullptr;
  // Per latent (one entry per latent, in order; empty: `exclude` for all):
  // each latent's own exclusion list, e.g. the fingers of a ten-print card,
  // each limited to its finger position, scored in one pass.
  std::vector<const uint8_t*> latent_exclude;
  // Polled before each batch, while waiting for a slot and between pieces of
  // the final stage; a stop ends the search with its status (CANCELLED /
  // DEADLINE_EXCEEDED) once the batches already queued on the GPU are done.
  StopPoller* stop = nullptr;
};

// Per-search timings. Phase times are summed over batches: GPU phases from
// CUDA events (in the overlapped run an interval also counts waiting for a
// copy engine or SMs the other stream holds), CPU phases from host clocks.
struct PipelineStats {
  int batches = 0;
  int latents = 0;
  int64_t templates = 0;
  double wall_seconds = 0;         // the whole Search call
  double setup_seconds = 0;        // BeginSearch (latent preparation / upload)
  double upload_seconds = 0;       // host -> device (CUDA)
  double kernel_seconds = 0;       // device kernels (CUDA) or the CPU matcher
  double download_seconds = 0;     // device -> host (CUDA)
  double final_stage_seconds = 0;  // host final stage + top-k merge
  double slot_wait_seconds = 0;    // enqueueing thread waiting for a free host slot
  size_t upload_bytes = 0;
  size_t download_bytes = 0;

  int64_t matches() const { return templates * latents; }
  double matches_per_second() const { return wall_seconds > 0 ? matches() / wall_seconds : 0; }
  double stage_sum_seconds() const {
    return setup_seconds + upload_seconds + kernel_seconds + download_seconds + final_stage_seconds;
  }
  // Sum of the stage times over the wall time: 1 for strictly sequential
  // phases, up to the number of concurrently busy stages when they overlap.
  double overlap_ratio() const { return wall_seconds > 0 ? stage_sum_seconds() / wall_seconds : 0; }
  std::string ToString() const;
};

class AlfiPipeline {
 public:
  // Splits `gallery` into batches; CUDA: copies it to pinned host memory
  // (the pipeline then no longer reads `gallery`) and allocates the two
  // device slots; CPU: keeps the shared pointer. INVALID_ARGUMENT for bad
  // options, FAILED_PRECONDITION for CUDA without a GPU.
  static absl::StatusOr<std::unique_ptr<AlfiPipeline>> Create(std::shared_ptr<const MccGallery> gallery,
                                                              const PipelineOptions& options);
  ~AlfiPipeline();

  // Top-k candidates per latent (in the order given), best first. Concurrent
  // calls run one after the other.
  absl::StatusOr<std::vector<std::vector<Candidate>>> Search(BatchMatcher& matcher,
                                                             const std::vector<MccTemplate>& latents,
                                                             PipelineStats* stats = nullptr) {
    return Search(matcher, latents, PipelineSearchOptions{}, stats);
  }
  absl::StatusOr<std::vector<std::vector<Candidate>>> Search(BatchMatcher& matcher,
                                                             const std::vector<MccTemplate>& latents,
                                                             const PipelineSearchOptions& search,
                                                             PipelineStats* stats = nullptr);

  int num_templates() const;
  int num_batches() const;
  const PipelineOptions& options() const;
  // Host memory the gallery occupies in the pipeline (pinned with CUDA).
  size_t host_bytes() const;
  // Device memory of the gallery: the two slots, or the whole gallery when
  // resident (outputs, which grow per search, not included).
  size_t device_bytes() const;

 private:
  struct Impl;
  explicit AlfiPipeline(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_SEARCH_ALFI_PIPELINE_H_
