#include "services/fingerprint/search/alfi_pipeline.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/buffer.h"
#include "common/parallel.h"
#include "common/status.h"

#if TESSERA_WITH_CUDA
#include <cuda_runtime_api.h>

#include "common/cuda_check.h"
#endif

namespace tessera {
namespace fingerprint {
namespace {

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

size_t Align256(size_t n) { return (n + 255) / 256 * 256; }

// fn(begin, end) over [0, n) in `grain` pieces: inline for threads == 1,
// else on common/parallel.h's workers.
void RunRange(int64_t n, int64_t grain, int threads, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (threads == 1) {
    fn(0, n);
    return;
  }
  ParallelForDynamic(n, grain, [&](int64_t b, int64_t e, int) { fn(b, e); });
}

// The gallery arrays in the order a batch upload copies them.
enum Part { kStart, kBits, kMask, kX, kY, kTheta, kCount, kFull, kParts };

// Bytes of part p for `templates` templates and `cylinders` cylinders.
size_t PartBytes(int p, int templates, int cylinders) {
  const size_t c = static_cast<size_t>(cylinders);
  switch (p) {
    case kStart:
      return (static_cast<size_t>(templates) + 1) * 4;
    case kBits:
      return c * kMccBitWords * 8;
    case kMask:
      return c * kMccMaskWords * 8;
    case kX:
    case kY:
    case kTheta:
      return c * 4;
    case kCount:
      return c * 2;
    default:
      return c;
  }
}

struct BatchInfo {
  int first = 0;          // first template
  int count = 0;          // templates
  int cylinder_first = 0;
  int cylinders = 0;
  int max_size = 0;
  int scratch_size = 0;  // LssScratchTemplateSize of the batch (GalleryBatch::scratch_template_size)
  size_t start_offset = 0;  // of its rebased start table in the concatenated tables
};

}  // namespace

std::string PipelineStats::ToString() const {
  return absl::StrFormat(
      "%d batches x %d latents, %d templates: wall %.3f s (%.3g matches/s); stages: setup %.3f, upload %.3f, "
      "kernels %.3f, download %.3f, final %.3f (sum %.3f s, overlap ratio %.2f); slot waits %.3f s; "
      "%.1f MB up, %.1f MB down",
      batches, latents, static_cast<long long>(templates), wall_seconds, matches_per_second(), setup_seconds,
      upload_seconds, kernel_seconds, download_seconds, final_stage_seconds, stage_sum_seconds(), overlap_ratio(),
      slot_wait_seconds, upload_bytes / 1e6, download_bytes / 1e6);
}

// --- LssBatchMatcher ------------------------------------------------------------

struct LssBatchMatcher::DeviceProbes {
#if TESSERA_WITH_CUDA
  std::vector<cuda::DeviceLssProbe> probes;  // kBlock: one launch per latent
  std::optional<cuda::DeviceLssProbeSet> set;  // kWarpMma: every latent in one launch
#endif
};

LssBatchMatcher::LssBatchMatcher(MccScore kind, const LssParams& lss, const MccParams& mcc,
                                 cuda::LssCudaKernel kernel, bool prune, bool multi_latent_launch)
    : kind_(kind),
      kernel_(kernel),
      prune_(prune),
      multi_latent_launch_(multi_latent_launch),
      mcc_(mcc),
      constants_(MakeLssConstants(lss, mcc)) {}

void LssBatchMatcher::SetRunningThresholds(const float* thresholds) { thresholds_ = thresholds; }

// CPU only: the CUDA kernel variant of the bound test (c6f2757) returned
// wrong top-k lists on the H200 (2026-12-02) and was no faster (0.94-1.03x),
// so it was taken out; the GPU computes every score.
bool LssBatchMatcher::Pruning() const { return prune_ && thresholds_ != nullptr && kind_ == MccScore::kLssR; }

namespace {
float LoadThreshold(const float* p) {
  const uint32_t bits = __atomic_load_n(reinterpret_cast<const uint32_t*>(p), __ATOMIC_RELAXED);
  float v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}
}  // namespace

LssBatchMatcher::~LssBatchMatcher() = default;

std::string LssBatchMatcher::name() const {
  return std::string(kind_ == MccScore::kLssR ? "LSS-R" : "LSS") +
         // The kernel is named only when it is not the default (warp-mma).
         (kernel_ != cuda::LssCudaKernel::kWarpMma
              ? absl::StrCat(" (", cuda::LssCudaKernelName(kernel_), " kernel)")
              : std::string()) +
         (prune_ && kind_ == MccScore::kLssR ? " (pruned on the CPU)" : "");
}

absl::Status LssBatchMatcher::BeginSearch(const std::vector<MccTemplate>& latents, const Stream& stream) {
  probes_.clear();
  device_ = std::make_unique<DeviceProbes>();
  for (const MccTemplate& t : latents) probes_.push_back(PrepareProbe(t, mcc_));
  if (stream.backend() != Backend::kCuda) return absl::OkStatus();
#if TESSERA_WITH_CUDA
  if (kernel_ == cuda::LssCudaKernel::kWarpMma && multi_latent_launch_) {
    TESSERA_ASSIGN_OR_RETURN(cuda::DeviceLssProbeSet set, cuda::DeviceLssProbeSet::Upload(stream, probes_));
    device_->set = std::move(set);
    return absl::OkStatus();
  }
  for (const LssProbe& p : probes_) {
    TESSERA_ASSIGN_OR_RETURN(cuda::DeviceLssProbe d, cuda::DeviceLssProbe::Upload(stream, p));
    device_->probes.push_back(std::move(d));
  }
  return absl::OkStatus();
#else
  return absl::FailedPreconditionError("LssBatchMatcher: CUDA stream in a build without CUDA");
#endif
}

size_t LssBatchMatcher::OutputBytes(int num_templates, int) const {
  return static_cast<size_t>(std::max(0, num_templates)) * sizeof(float);
}

absl::Status LssBatchMatcher::Enqueue(const Stream& stream, const GalleryBatch& batch, void* device_output,
                                      size_t output_stride) {
#if TESSERA_WITH_CUDA
  if (device_ == nullptr || (device_->set.has_value() ? device_->set->size() : device_->probes.size()) !=
                                probes_.size()) {
    return absl::FailedPreconditionError("LssBatchMatcher::Enqueue before a CUDA BeginSearch");
  }
  MccDeviceGalleryView v;
  v.start = batch.start;
  v.bits = batch.bits;
  v.mask = batch.mask;
  v.x = batch.x;
  v.y = batch.y;
  v.theta = batch.theta;
  v.bit_count = batch.bit_count;
  v.full_mask = batch.full_mask;
  v.num_templates = batch.num_templates;
  v.num_cylinders = batch.num_cylinders;
  v.max_template_size = batch.max_template_size;
  v.scratch_template_size = batch.scratch_template_size;
  v.ordinal = stream.ordinal();
  if (device_->set.has_value()) {
    // Every latent of the search in one pass over the batch (lss.h,
    // EnqueueScoreGalleryMulti): the same scores as one launch per latent.
    return cuda::EnqueueScoreGalleryMulti(stream, *device_->set, v, kind_, constants_,
                                          static_cast<float*>(device_output), output_stride / sizeof(float));
  }
  for (size_t l = 0; l < probes_.size(); ++l) {
    float* out = reinterpret_cast<float*>(static_cast<uint8_t*>(device_output) + l * output_stride);
    TESSERA_RETURN_IF_ERROR(cuda::EnqueueScoreGallery(stream, device_->probes[l], v, kind_, constants_, out, kernel_));
  }
  return absl::OkStatus();
#else
  (void)stream;
  (void)batch;
  (void)device_output;
  (void)output_stride;
  return absl::FailedPreconditionError("LssBatchMatcher::Enqueue in a build without CUDA");
#endif
}

absl::Status LssBatchMatcher::ComputeOnCpu(const MccGallery& gallery, const GalleryBatch& batch, void* host_output,
                                           size_t output_stride, int threads, StopPoller* stop) {
  const int nt = batch.num_templates;
  const int64_t n = static_cast<int64_t>(probes_.size()) * nt;
  RunRange(n, 64, threads, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      if (stop != nullptr && (i - b) % 64 == 0 && stop->ShouldStop()) return;
      const int l = static_cast<int>(i / nt), t = static_cast<int>(i % nt);
      float* out = reinterpret_cast<float*>(static_cast<uint8_t*>(host_output) + l * output_stride);
      const float threshold = Pruning() ? LoadThreshold(thresholds_ + l) : 0.0f;
      out[t] = cpu::ScoreOrPrune(probes_[l], gallery, batch.first_template + t, kind_, constants_, threshold);
    }
  });
  if (stop != nullptr && stop->stopped()) return stop->status();
  return absl::OkStatus();
}

absl::Status LssBatchMatcher::FinalStage(const GalleryBatch&, int, const void* latent_output, int begin, int end,
                                         float* scores) const {
  std::memcpy(scores, static_cast<const float*>(latent_output) + begin, sizeof(float) * (end - begin));
  return absl::OkStatus();
}

void LssBatchMatcher::EndSearch() {
  device_.reset();
  thresholds_ = nullptr;
}

// --- AlfiPipeline -----------------------------------------------------------------

struct AlfiPipeline::Impl {
  PipelineOptions options;
  std::shared_ptr<const MccGallery> gallery;  // CPU backend only
  int num_templates = 0;
  std::vector<BatchInfo> batches;
  std::vector<int32_t> rebased;  // every batch's start table, concatenated (CPU)
  int max_batch_templates = 0;
  int max_batch_cylinders = 0;
  int threads = 1;

  // CUDA backend.
  std::shared_ptr<Buffer> pinned;  // the gallery parts (rebased start tables first)
  size_t pinned_offset[kParts] = {};
  std::shared_ptr<Buffer> resident;  // the pinned layout on the GPU (options.resident)
  std::vector<Stream> streams;  // 2
  struct DeviceSlot {
    std::shared_ptr<Buffer> gallery;
    size_t offset[kParts] = {};
    std::shared_ptr<Buffer> output;
  };
  DeviceSlot device_slots[2];
  struct HostSlot {
    std::shared_ptr<Buffer> output;
    void* events[4] = {nullptr, nullptr, nullptr, nullptr};  // cudaEvent_t: start, uploaded, computed, downloaded
  };
  std::vector<HostSlot> host_slots;

  ~Impl() {
#if TESSERA_WITH_CUDA
    for (HostSlot& h : host_slots) {
      for (void* e : h.events) {
        if (e != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(e));
      }
    }
#endif
  }

  std::mutex search_mu;  // one Search at a time: slots, events and outputs are shared
  // Each latent's current k-th best score (BatchMatcher::SetRunningThresholds),
  // read by CPU matchers while the finisher raises it.
  std::shared_ptr<Buffer> thresholds;

  bool cuda() const { return options.backend == Backend::kCuda; }


  // Batch k's sizes, without its pointers.
  GalleryBatch BatchHeader(int k) const {
    const BatchInfo& b = batches[k];
    GalleryBatch v;
    v.index = k;
    v.first_template = b.first;
    v.num_templates = b.count;
    v.num_cylinders = b.cylinders;
    v.max_template_size = b.max_size;
    v.scratch_template_size = b.scratch_size;
    return v;
  }

  // Batch k in a copy of the pinned layout at `base`, its part p at
  // base + offset[p] (pinned, resident and slot copies all have the parts in
  // this order).
  GalleryBatch BatchIn(int k, const uint8_t* base, const size_t offset[kParts]) const {
    GalleryBatch v = BatchHeader(k);
    v.start = reinterpret_cast<const int32_t*>(base + offset[kStart]);
    v.bits = reinterpret_cast<const uint64_t*>(base + offset[kBits]);
    v.mask = reinterpret_cast<const uint64_t*>(base + offset[kMask]);
    v.x = reinterpret_cast<const float*>(base + offset[kX]);
    v.y = reinterpret_cast<const float*>(base + offset[kY]);
    v.theta = reinterpret_cast<const float*>(base + offset[kTheta]);
    v.bit_count = reinterpret_cast<const uint16_t*>(base + offset[kCount]);
    v.full_mask = base + offset[kFull];
    return v;
  }

  // Host pointers to batch k (the gallery vectors on the CPU backend, the
  // pinned copy on CUDA).
  GalleryBatch HostBatch(int k) const {
    if (cuda()) {
      size_t offset[kParts];
      for (int p = 0; p < kParts; ++p) offset[p] = BatchPartOffset(k, p);
      return BatchIn(k, static_cast<const uint8_t*>(pinned->data()), offset);
    }
    const BatchInfo& b = batches[k];
    const size_t c0 = b.cylinder_first;
    GalleryBatch v = BatchHeader(k);
    v.start = rebased.data() + b.start_offset;
    v.bits = gallery->bits.data() + c0 * kMccBitWords;
    v.mask = gallery->mask.data() + c0 * kMccMaskWords;
    v.x = gallery->x.data() + c0;
    v.y = gallery->y.data() + c0;
    v.theta = gallery->theta.data() + c0;
    v.bit_count = gallery->bit_count.data() + c0;
    v.full_mask = gallery->full_mask.data() + c0;
    return v;
  }

  // Byte offset of batch k's part p within the pinned (and resident) layout.
  size_t BatchPartOffset(int k, int p) const {
    const BatchInfo& b = batches[k];
    const size_t c0 = b.cylinder_first;
    const size_t element[kParts] = {b.start_offset * 4, c0 * kMccBitWords * 8, c0 * kMccMaskWords * 8, c0 * 4,
                                    c0 * 4,             c0 * 4,                c0 * 2,                  c0};
    return pinned_offset[p] + element[p];
  }

  // Device pointers of batch k: in device slot `slot`, or in the resident
  // copy.
  GalleryBatch DeviceBatch(int k, int slot) const {
    const DeviceSlot& d = device_slots[slot];
    const uint8_t* base = static_cast<const uint8_t*>(resident ? resident->data() : d.gallery->data());
    size_t offset[kParts];
    for (int p = 0; p < kParts; ++p) offset[p] = resident ? BatchPartOffset(k, p) : d.offset[p];
    return BatchIn(k, base, offset);
  }

  absl::Status SetUpCuda(const MccGallery& g);
  absl::Status EnsureOutputs(size_t bytes);
  absl::Status EnqueueBatch(int k, BatchMatcher& matcher, size_t stride, int latents, PipelineStats* stats);
  absl::Status BatchTimes(int k, PipelineStats* stats);
};

absl::Status AlfiPipeline::Impl::SetUpCuda(const MccGallery& g) {
#if TESSERA_WITH_CUDA
  const int ord = options.ordinal;
  // Pinned copy: the parts in upload order, each 256-byte aligned; the start
  // part holds the rebased tables.
  size_t total = 0;
  for (int p = 0; p < kParts; ++p) {
    pinned_offset[p] = total;
    const size_t bytes = p == kStart ? rebased.size() * 4 : PartBytes(p, 0, g.num_cylinders());
    total = Align256(total + bytes);
  }
  TESSERA_ASSIGN_OR_RETURN(pinned, Buffer::Allocate(MemoryKind::kPinned, std::max<size_t>(total, 256), ord));
  uint8_t* base = static_cast<uint8_t*>(pinned->data());
  const void* src[kParts] = {rebased.data(), g.bits.data(), g.mask.data(),      g.x.data(),
                             g.y.data(),     g.theta.data(), g.bit_count.data(), g.full_mask.data()};
  for (int p = 0; p < kParts; ++p) {
    const size_t bytes = p == kStart ? rebased.size() * 4 : PartBytes(p, 0, g.num_cylinders());
    if (bytes > 0) std::memcpy(base + pinned_offset[p], src[p], bytes);
  }
  rebased.clear();
  rebased.shrink_to_fit();
  for (int s = 0; s < 2; ++s) {
    TESSERA_ASSIGN_OR_RETURN(Stream stream, Stream::Create(Backend::kCuda, ord));
    streams.push_back(std::move(stream));
  }
  if (options.resident) {
    TESSERA_ASSIGN_OR_RETURN(resident, Buffer::Allocate(MemoryKind::kDevice, pinned->size(), ord));
    TESSERA_RETURN_IF_ERROR(
        CopyBytes(resident->data(), MemoryKind::kDevice, pinned->data(), MemoryKind::kPinned, pinned->size(), streams[0]));
    TESSERA_RETURN_IF_ERROR(streams[0].Synchronize());
  }
  for (int s = 0; s < 2 && !options.resident; ++s) {
    DeviceSlot& d = device_slots[s];
    size_t bytes = 0;
    for (int p = 0; p < kParts; ++p) {
      d.offset[p] = bytes;
      bytes = Align256(bytes + PartBytes(p, max_batch_templates, max_batch_cylinders));
    }
    TESSERA_ASSIGN_OR_RETURN(d.gallery, Buffer::Allocate(MemoryKind::kDevice, bytes, ord));
  }
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(ord));
  for (HostSlot& h : host_slots) {
    for (void*& e : h.events) {
      cudaEvent_t ev;
      TESSERA_CUDA_RETURN_IF_ERROR(cudaEventCreate(&ev));
      e = ev;
    }
  }
  return absl::OkStatus();
#else
  (void)g;
  return absl::FailedPreconditionError("ALFI pipeline: CUDA requested in a build without CUDA");
#endif
}

absl::Status AlfiPipeline::Impl::EnsureOutputs(size_t bytes) {
  bytes = std::max<size_t>(bytes, 256);
  const MemoryKind host_kind = cuda() ? MemoryKind::kPinned : MemoryKind::kHost;
  for (HostSlot& h : host_slots) {
    if (h.output == nullptr || h.output->size() < bytes) {
      h.output.reset();
      TESSERA_ASSIGN_OR_RETURN(h.output, Buffer::Allocate(host_kind, bytes, options.ordinal));
    }
  }
  if (!cuda()) return absl::OkStatus();
  for (DeviceSlot& d : device_slots) {
    if (d.output == nullptr || d.output->size() < bytes) {
      d.output.reset();
      TESSERA_ASSIGN_OR_RETURN(d.output, Buffer::Allocate(MemoryKind::kDevice, bytes, options.ordinal));
    }
  }
  return absl::OkStatus();
}

// Upload, kernels and download of batch k on stream k % 2, bracketed by the
// events of host slot k % host_slots. Returns once everything is queued.
absl::Status AlfiPipeline::Impl::EnqueueBatch(int k, BatchMatcher& matcher, size_t stride, int latents,
                                              PipelineStats* stats) {
#if TESSERA_WITH_CUDA
  const int s = k % 2;
  const BatchInfo& b = batches[k];
  const Stream& stream = streams[s];
  cudaStream_t cs = static_cast<cudaStream_t>(stream.native());
  DeviceSlot& d = device_slots[s];
  HostSlot& h = host_slots[k % host_slots.size()];
  auto ev = [&](int i) { return static_cast<cudaEvent_t>(h.events[i]); };
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.ordinal));
  TESSERA_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev(0), cs));
  for (int p = 0; p < kParts && resident == nullptr; ++p) {
    const size_t bytes = PartBytes(p, b.count, b.cylinders);
    if (bytes == 0) continue;
    uint8_t* dst = static_cast<uint8_t*>(d.gallery->data()) + d.offset[p];
    const uint8_t* src = static_cast<const uint8_t*>(pinned->data()) + BatchPartOffset(k, p);
    TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cs));
    stats->upload_bytes += bytes;
  }
  TESSERA_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev(1), cs));
  TESSERA_RETURN_IF_ERROR(matcher.Enqueue(stream, DeviceBatch(k, s), d.output->data(), stride));
  TESSERA_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev(2), cs));
  const size_t down = stride * (latents - 1) + matcher.OutputBytes(b.count, b.cylinders);
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(h.output->data(), d.output->data(), down, cudaMemcpyDeviceToHost, cs));
  stats->download_bytes += down;
  TESSERA_CUDA_RETURN_IF_ERROR(cudaEventRecord(ev(3), cs));
  return absl::OkStatus();
#else
  (void)k;
  (void)matcher;
  (void)stride;
  (void)latents;
  (void)stats;
  return absl::FailedPreconditionError("ALFI pipeline: CUDA in a build without CUDA");
#endif
}

// Waits for batch k's download and adds its phase times.
absl::Status AlfiPipeline::Impl::BatchTimes(int k, PipelineStats* stats) {
#if TESSERA_WITH_CUDA
  HostSlot& h = host_slots[k % host_slots.size()];
  auto ev = [&](int i) { return static_cast<cudaEvent_t>(h.events[i]); };
  TESSERA_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(ev(3)));
  float ms[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) TESSERA_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms[i], ev(i), ev(i + 1)));
  stats->upload_seconds += ms[0] / 1e3;
  stats->kernel_seconds += ms[1] / 1e3;
  stats->download_seconds += ms[2] / 1e3;
  return absl::OkStatus();
#else
  (void)k;
  (void)stats;
  return absl::FailedPreconditionError("ALFI pipeline: CUDA in a build without CUDA");
#endif
}

AlfiPipeline::AlfiPipeline(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
AlfiPipeline::~AlfiPipeline() = default;

absl::StatusOr<std::unique_ptr<AlfiPipeline>> AlfiPipeline::Create(std::shared_ptr<const MccGallery> gallery,
                                                                   const PipelineOptions& options) {
  if (gallery == nullptr) return absl::InvalidArgumentError("ALFI pipeline: no gallery");
  if (options.batch_templates < 1) {
    return absl::InvalidArgumentError(absl::StrCat("ALFI pipeline: batch_templates must be >= 1, got ",
                                                   options.batch_templates));
  }
  if (options.top_k < 1) {
    return absl::InvalidArgumentError(absl::StrCat("ALFI pipeline: top_k must be >= 1, got ", options.top_k));
  }
  if (options.host_slots < 2) {
    return absl::InvalidArgumentError(absl::StrCat("ALFI pipeline: host_slots must be >= 2, got ",
                                                   options.host_slots));
  }
  if (options.threads < 0) return absl::InvalidArgumentError("ALFI pipeline: threads must be >= 0");
  const MccGallery& g = *gallery;
  if (g.start.empty() || g.start[0] != 0 || g.bits.size() != static_cast<size_t>(g.num_cylinders()) * kMccBitWords ||
      g.mask.size() != static_cast<size_t>(g.num_cylinders()) * kMccMaskWords ||
      g.x.size() != static_cast<size_t>(g.num_cylinders()) || g.y.size() != g.x.size() ||
      g.theta.size() != g.x.size() || g.bit_count.size() != g.x.size() || g.full_mask.size() != g.x.size()) {
    return absl::InvalidArgumentError("ALFI pipeline: inconsistent MccGallery arrays");
  }
  if (options.backend == Backend::kCuda) {
    if (!DeviceRegistry::Get().cuda_available()) {
      return absl::FailedPreconditionError(
          absl::StrCat("ALFI pipeline: CUDA requested but ", DeviceRegistry::Get().cuda_unavailable_reason()));
    }
    if (options.ordinal < 0 || options.ordinal >= static_cast<int>(DeviceRegistry::Get().gpus().size())) {
      return absl::InvalidArgumentError(absl::StrCat("ALFI pipeline: no GPU ", options.ordinal));
    }
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->num_templates = g.num_templates();
  impl->threads = options.threads == 0 ? CpuThreads() : options.threads;
  for (int first = 0; first < g.num_templates(); first += options.batch_templates) {
    BatchInfo b;
    b.first = first;
    b.count = std::min(options.batch_templates, g.num_templates() - first);
    b.cylinder_first = g.start[first];
    b.cylinders = g.start[first + b.count] - b.cylinder_first;
    b.start_offset = impl->rebased.size();
    for (int t = first; t <= first + b.count; ++t) {
      const int size = g.start[t] - b.cylinder_first;
      if (t > first) {
        const int n = g.start[t] - g.start[t - 1];
        if (n < 0) return absl::InvalidArgumentError("ALFI pipeline: decreasing gallery start table");
        b.max_size = std::max(b.max_size, n);
      }
      impl->rebased.push_back(size);
    }
    b.scratch_size = LssScratchTemplateSize(impl->rebased.data() + b.start_offset, b.count);
    impl->max_batch_templates = std::max(impl->max_batch_templates, b.count);
    impl->max_batch_cylinders = std::max(impl->max_batch_cylinders, b.cylinders);
    impl->batches.push_back(b);
  }
  impl->host_slots.resize(options.host_slots);
  if (options.backend == Backend::kCuda) {
    TESSERA_RETURN_IF_ERROR(impl->SetUpCuda(g));
  } else {
    impl->gallery = std::move(gallery);
  }
  return std::unique_ptr<AlfiPipeline>(new AlfiPipeline(std::move(impl)));
}

int AlfiPipeline::num_templates() const { return impl_->num_templates; }
int AlfiPipeline::num_batches() const { return static_cast<int>(impl_->batches.size()); }
const PipelineOptions& AlfiPipeline::options() const { return impl_->options; }

size_t AlfiPipeline::host_bytes() const {
  if (impl_->pinned != nullptr) return impl_->pinned->size();
  return impl_->gallery != nullptr ? impl_->gallery->bytes() : 0;
}

size_t AlfiPipeline::device_bytes() const {
  size_t n = impl_->resident != nullptr ? impl_->resident->size() : 0;
  for (const auto& d : impl_->device_slots) {
    if (d.gallery != nullptr) n += d.gallery->size();
  }
  return n;
}

absl::StatusOr<std::vector<std::vector<Candidate>>> AlfiPipeline::Search(BatchMatcher& matcher,
                                                                         const std::vector<MccTemplate>& latents,
                                                                         const PipelineSearchOptions& search,
                                                                         PipelineStats* stats_out) {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> search_lock(im.search_mu);
  const double t_begin = Now();
  PipelineStats stats;
  const int L = static_cast<int>(latents.size());
  for (int l = 0; l < L; ++l) {
    if (latents[l].cylinders.size() > static_cast<size_t>(kMccMaxMinutiae)) {
      return absl::InvalidArgumentError(absl::StrCat("ALFI pipeline: latent ", l, " has ",
                                                     latents[l].cylinders.size(), " cylinders (at most ",
                                                     kMccMaxMinutiae, ")"));
    }
  }
  if (search.top_k < 0) return absl::InvalidArgumentError("ALFI pipeline: top_k must be >= 0");
  StopPoller* const stop = search.stop;
  if (stop != nullptr && stop->StopNow()) return stop->status();
  std::vector<std::vector<Candidate>> top(L);
  const int B = static_cast<int>(im.batches.size());
  stats.latents = L;
  if (L == 0 || B == 0) {
    stats.wall_seconds = Now() - t_begin;
    if (stats_out != nullptr) *stats_out = stats;
    return top;
  }
  const Stream cpu_stream = Stream::Cpu();
  const Stream& setup_stream = im.cuda() ? im.streams[0] : cpu_stream;
  const double t_setup = Now();
  TESSERA_RETURN_IF_ERROR(matcher.BeginSearch(latents, setup_stream));
  stats.setup_seconds = Now() - t_setup;
  const size_t threshold_bytes = sizeof(float) * static_cast<size_t>(L);
  if (im.thresholds == nullptr || im.thresholds->size() < threshold_bytes) {
    im.thresholds.reset();
    auto t = Buffer::Allocate(MemoryKind::kHost, threshold_bytes, im.options.ordinal);
    if (!t.ok()) {
      matcher.EndSearch();
      return t.status();
    }
    im.thresholds = std::move(*t);
  }
  float* const thresholds = static_cast<float*>(im.thresholds->data());
  std::fill(thresholds, thresholds + L, 0.0f);  // before any kernel of this search is queued
  matcher.SetRunningThresholds(thresholds);
  size_t stride = 0;
  for (const BatchInfo& b : im.batches) stride = std::max(stride, Align256(matcher.OutputBytes(b.count, b.cylinders)));
  stride = std::max<size_t>(stride, 256);
  if (auto s = im.EnsureOutputs(stride * L); !s.ok()) {
    matcher.EndSearch();
    return s;
  }

  // Shared between the enqueueing (this) thread and the finisher.
  std::mutex mu;
  std::condition_variable cv;
  int enqueued = 0, finished = 0;
  bool enqueue_done = false;
  absl::Status error;
  std::vector<float> scores(static_cast<size_t>(im.max_batch_templates) * L);
  const int k_top = search.top_k > 0 ? search.top_k : im.options.top_k;

  // Final stage and top-k merge of batch k (after its download).
  auto finish = [&](int k) -> absl::Status {
    if (im.cuda()) TESSERA_RETURN_IF_ERROR(im.BatchTimes(k, &stats));
    const double t0 = Now();
    const GalleryBatch hb = im.HostBatch(k);
    const uint8_t* out = static_cast<const uint8_t*>(im.host_slots[k % im.host_slots.size()].output->data());
    const int nt = hb.num_templates;
    const int grain = 256;
    const int chunks = (nt + grain - 1) / grain;
    std::mutex err_mu;
    absl::Status err;
    RunRange(static_cast<int64_t>(chunks) * L, 1, im.threads, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        if (stop != nullptr && stop->ShouldStop()) return;
        const int l = static_cast<int>(p / chunks), c = static_cast<int>(p % chunks);
        const int begin = c * grain, end = std::min(nt, begin + grain);
        absl::Status s = matcher.FinalStage(hb, l, out + l * stride, begin, end,
                                            scores.data() + static_cast<size_t>(l) * nt + begin);
        if (!s.ok()) {
          std::lock_guard<std::mutex> lock(err_mu);
          if (err.ok()) err = s;
        }
      }
    });
    TESSERA_RETURN_IF_ERROR(err);
    if (stop != nullptr && stop->stopped()) return stop->status();
    RunRange(L, 1, im.threads, [&](int64_t b, int64_t e) {
      for (int64_t l = b; l < e; ++l) {
        const uint8_t* exclude = search.latent_exclude.empty() ? search.exclude : search.latent_exclude[l];
        MergeTopK(scores.data() + static_cast<size_t>(l) * nt, nt, hb.first_template, k_top, &top[l], exclude);
        // The k-th best so far only rises: whatever value a matcher reads is
        // at most the final k-th best, so pruning below it never changes the
        // list (kLssPrunedScore entries never raise it).
        if (static_cast<int>(top[l].size()) == k_top && top[l].back().score > thresholds[l]) {
          uint32_t bits;
          std::memcpy(&bits, &top[l].back().score, sizeof bits);
          __atomic_store_n(reinterpret_cast<uint32_t*>(thresholds + l), bits, __ATOMIC_RELAXED);
        }
      }
    });
    stats.final_stage_seconds += Now() - t0;
    stats.templates += nt;
    ++stats.batches;
    return absl::OkStatus();
  };

  std::thread finisher;
  const bool overlap = im.options.overlap;
  if (overlap) {
    finisher = std::thread([&] {
#if TESSERA_WITH_CUDA
      if (im.cuda()) cudaSetDevice(im.options.ordinal);
#endif
      for (int k = 0; k < B; ++k) {
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return enqueued > k || enqueue_done || !error.ok(); });
          if (enqueued <= k || !error.ok()) return;
        }
        absl::Status s = finish(k);
        std::lock_guard<std::mutex> lock(mu);
        if (!s.ok() && error.ok()) error = s;
        finished = k + 1;
        cv.notify_all();
        if (!error.ok()) return;
      }
    });
  }

  for (int k = 0; k < B; ++k) {
    const int H = static_cast<int>(im.host_slots.size());
    {
      // Host slot k % H is free once batch k - H is finished.
      const double w0 = Now();
      std::unique_lock<std::mutex> lock(mu);
      auto ready = [&] { return finished >= k - H + 1 || !error.ok(); };
      if (stop == nullptr) {
        cv.wait(lock, ready);
      } else {
        // Poll the stop while the finisher works through earlier batches.
        while (!ready() && !stop->ShouldStop()) cv.wait_for(lock, std::chrono::milliseconds(2));
        if (stop->StopNow() && error.ok()) error = stop->status();
      }
      stats.slot_wait_seconds += Now() - w0;
      if (!error.ok()) {
        cv.notify_all();
        break;
      }
    }
    absl::Status s;
    if (im.cuda()) {
      s = im.EnqueueBatch(k, matcher, stride, L, &stats);
    } else {
      const double c0 = Now();
      void* out = im.host_slots[k % H].output->data();
      s = matcher.ComputeOnCpu(*im.gallery, im.HostBatch(k), out, stride, im.threads, stop);
      stats.kernel_seconds += Now() - c0;
    }
    if (s.ok() && !overlap) s = finish(k);
    std::lock_guard<std::mutex> lock(mu);
    if (!s.ok()) {
      if (error.ok()) error = s;
      cv.notify_all();
      break;
    }
    enqueued = k + 1;
    if (!overlap) finished = k + 1;
    cv.notify_all();
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    enqueue_done = true;
    cv.notify_all();
  }
  if (finisher.joinable()) finisher.join();
  if (im.cuda()) {
    // After an error, queued work may still reference the slots.
    for (const Stream& s : im.streams) {
      absl::Status sync = s.Synchronize();
      if (!sync.ok() && error.ok()) error = sync;
    }
  }
  matcher.EndSearch();
  TESSERA_RETURN_IF_ERROR(error);
  stats.wall_seconds = Now() - t_begin;
  if (stats_out != nullptr) *stats_out = stats;
  return top;
}

}  // namespace fingerprint
}  // namespace tessera
