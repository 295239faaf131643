// List-mode OSEM: event preparation per method, sensitivities, the EM loop.
#include "kernels/reconstruction/pet/listmode_osem.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/memory_kind_for.h"
#include "common/status.h"
#include "kernels/reconstruction/pet/em_ops.h"
#include "kernels/reconstruction/pet/projector_kernels.h"
#include "kernels/reconstruction/vector_ops.h"

namespace tessera {
namespace recon {
namespace pet {
namespace {

#if !TESSERA_WITH_CUDA
absl::Status NoCuda() {
  return absl::FailedPreconditionError(
      absl::StrCat("list-mode: CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
}
#endif

// Stable grouping of events by subset (view % subsets); offsets has subsets + 1 entries.
std::vector<ListModeEvent> GroupBySubset(const std::vector<ListModeEvent>& events, int subsets,
                                         std::vector<int64_t>* offsets) {
  offsets->assign(subsets + 1, 0);
  for (const ListModeEvent& e : events) ++(*offsets)[e.view % subsets + 1];
  for (int s = 0; s < subsets; ++s) (*offsets)[s + 1] += (*offsets)[s];
  std::vector<int64_t> next(offsets->begin(), offsets->end() - 1);
  std::vector<ListModeEvent> grouped(events.size());
  for (const ListModeEvent& e : events) grouped[next[e.view % subsets]++] = e;
  return grouped;
}

}  // namespace

const char* ListModeMethodName(ListModeMethod method) {
  return method == ListModeMethod::kNaive ? "naive" : "bucketed";
}

absl::StatusOr<std::unique_ptr<ListModeReconstructor>> ListModeReconstructor::Create(const PetGeometry& geometry,
                                                                                     const Stream& stream,
                                                                                     const ListModeOptions& options) {
  TESSERA_RETURN_IF_ERROR(Validate(geometry));
  if (geometry.cols() > 65536 || geometry.rows() > 65536) {
    return absl::InvalidArgumentError(absl::StrCat("list-mode: detector ", geometry.cols(), " cols x ",
                                                   geometry.rows(), " rows exceeds the 65536 of 16-bit indices"));
  }
  if (options.num_subsets < 1 || options.num_subsets > geometry.num_views()) {
    return absl::InvalidArgumentError(absl::StrCat("num_subsets must be in [1, ", geometry.num_views(),
                                                   "] (the number of views), got ", options.num_subsets));
  }
  const BucketKeyShape shape{options.num_subsets, geometry.tof.num_bins, geometry.num_views(), geometry.rows(),
                             geometry.cols()};
  const double key_space = static_cast<double>(shape.subsets) * shape.bins * shape.views * shape.rows * shape.cols;
  if (key_space >= 9.2e18) {
    return absl::InvalidArgumentError("list-mode: subsets x TOF bins x views x rows x cols exceeds 64-bit keys");
  }
#if !TESSERA_WITH_CUDA
  if (stream.backend() == Backend::kCuda) return NoCuda();
#endif
  const bool cpu = stream.backend() == Backend::kCpu;
  std::unique_ptr<ListModeReconstructor> r(new ListModeReconstructor(
      stream, cpu ? ListModeMethod::kBucketed : options.method, options.sensitivity_eps));
  r->num_subsets_ = options.num_subsets;
  r->shape_ = shape;
  PetProjectorOptions popts;
  popts.num_subsets = options.num_subsets;
  popts.mode = (!cpu && r->method_ == ListModeMethod::kNaive) ? ExecutionMode::kDefault : options.mode;
  popts.mu_map = options.mu_map;
  popts.efficiency = options.efficiency;
  popts.deterministic_back = options.deterministic_back;
  TESSERA_ASSIGN_OR_RETURN(r->projector_, PetProjector::Create(geometry, stream, popts));
  PetProjector& A = *r->projector_;

  // Sensitivities A_s^T 1, then the back-projection scratch volume.
  const int64_t n_image = A.domain_size();
  int64_t max_range = 0;
  for (int s = 0; s < options.num_subsets; ++s) max_range = std::max(max_range, A.range_size(s));
  TESSERA_ASSIGN_OR_RETURN(r->sens_, Buffer::Allocate(MemoryKindFor(stream),
                                                      n_image * options.num_subsets * sizeof(float), stream.ordinal()));
  {
    TESSERA_ASSIGN_OR_RETURN(auto ones,
                             Buffer::Allocate(MemoryKindFor(stream), max_range * sizeof(float), stream.ordinal()));
    TESSERA_RETURN_IF_ERROR(Fill(stream, static_cast<float*>(ones->data()), max_range, 1.0f));
    for (int s = 0; s < options.num_subsets; ++s) {
      TESSERA_RETURN_IF_ERROR(
          A.Back(static_cast<float*>(ones->data()), static_cast<float*>(r->sens_->data()) + n_image * s, s));
    }
    TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  }
  TESSERA_ASSIGN_OR_RETURN(r->scratch_,
                           Buffer::Allocate(MemoryKindFor(stream), n_image * sizeof(float), stream.ordinal()));
  return r;
}

const float* ListModeReconstructor::sensitivity(int subset) const {
  return static_cast<const float*>(sens_->data()) + projector_->domain_size() * subset;
}

absl::Status ListModeReconstructor::SetEvents(const ListModeEvent* events, int64_t n) {
  if (n < 0 || (n > 0 && events == nullptr)) return absl::InvalidArgumentError("list-mode: no events array");
  TESSERA_RETURN_IF_ERROR(CheckListModeEvents(events, n, projector_->geometry()));
  std::vector<ListModeEvent> kept;
  kept.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    if (events[i].weight > 0) kept.push_back(events[i]);
  }
  num_events_ = static_cast<int64_t>(kept.size());
  num_unique_ = num_events_;
  host_events_.clear();
  device_events_.reset();
  buckets_ = EventBuckets{};
  ratio_.reset();
  const Stream& stream = *stream_;
  if (stream.backend() == Backend::kCpu) {
    host_events_ = GroupBySubset(kept, num_subsets_, &subset_offsets_);
    have_events_ = true;
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  if (method_ == ListModeMethod::kNaive) {
    const std::vector<ListModeEvent> grouped = GroupBySubset(kept, num_subsets_, &subset_offsets_);
    TESSERA_ASSIGN_OR_RETURN(device_events_,
                             Buffer::Allocate(MemoryKind::kDevice, std::max<size_t>(1, grouped.size()) *
                                                                       sizeof(ListModeEvent),
                                              stream.ordinal()));
    TESSERA_RETURN_IF_ERROR(CopyBytes(device_events_->data(), MemoryKind::kDevice, grouped.data(), MemoryKind::kHost,
                                      grouped.size() * sizeof(ListModeEvent), stream));
    TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  } else {
    TESSERA_ASSIGN_OR_RETURN(buckets_, cuda::BuildBuckets(stream, kept.data(), num_events_, shape_));
    num_unique_ = buckets_.unique;
    int64_t max_range = 0;
    for (int s = 0; s < num_subsets_; ++s) max_range = std::max(max_range, projector_->range_size(s));
    TESSERA_ASSIGN_OR_RETURN(ratio_, Buffer::Allocate(MemoryKind::kDevice, max_range * sizeof(float),
                                                      stream.ordinal()));
  }
  have_events_ = true;
  return absl::OkStatus();
#else
  return NoCuda();
#endif
}

absl::StatusOr<double> ListModeReconstructor::DataTerm(const float* image, float* out, int subset) {
  if (!have_events_) return absl::FailedPreconditionError("list-mode: SetEvents first");
  if (image == nullptr || out == nullptr) return absl::InvalidArgumentError("list-mode: image or out is null");
  TESSERA_ASSIGN_OR_RETURN(const ViewRange range, projector_->Range(subset));
  (void)range;
  const ProjectorParams& p = projector_->params();
  if (stream_->backend() == Backend::kCpu) {
    const int64_t begin = subset_offsets_[subset];
    return cpu::ListModeDataTerm(p, host_events_.data() + begin, subset_offsets_[subset + 1] - begin, image, out);
  }
#if TESSERA_WITH_CUDA
  if (method_ == ListModeMethod::kNaive) {
    const int64_t begin = subset_offsets_[subset];
    return cuda::NaiveDataTerm(*stream_, p, static_cast<const ListModeEvent*>(device_events_->data()) + begin,
                               subset_offsets_[subset + 1] - begin, image, out);
  }
  float* ratio = static_cast<float*>(ratio_->data());
  TESSERA_ASSIGN_OR_RETURN(const double ll, cuda::BucketedRatio(*stream_, p, buckets_, shape_, subset, range, image,
                                                               ratio));
  TESSERA_RETURN_IF_ERROR(projector_->Back(ratio, out, subset));
  return ll;
#else
  return NoCuda();
#endif
}

absl::Status ListModeReconstructor::Run(float* image, int iterations, const EmProgress& progress) {
  if (iterations < 0) return absl::InvalidArgumentError(absl::StrCat("iterations must be >= 0, got ", iterations));
  if (image == nullptr) return absl::InvalidArgumentError("list-mode: image is null");
  const Stream& stream = *stream_;
  const int64_t n_image = projector_->domain_size();
  TESSERA_ASSIGN_OR_RETURN(const int64_t bad, FirstInvalid(stream, image, n_image));
  if (bad >= 0) return absl::InvalidArgumentError(absl::StrCat("image[", bad, "]: must be finite and >= 0"));
  float* back = static_cast<float*>(scratch_->data());
  const int total = iterations * num_subsets_;
  for (int it = 0; it < iterations; ++it) {
    for (int s = 0; s < num_subsets_; ++s) {
      TESSERA_ASSIGN_OR_RETURN(const double data, DataTerm(image, back, s));
      TESSERA_ASSIGN_OR_RETURN(const double expected, Dot(stream, sensitivity(s), image, n_image));
      TESSERA_RETURN_IF_ERROR(EmUpdate(stream, back, sensitivity(s), eps_, image, n_image));
      if (progress) {
        TESSERA_RETURN_IF_ERROR(stream.Synchronize());
        TESSERA_RETURN_IF_ERROR(progress(it * num_subsets_ + s + 1, total, data - expected));
      }
    }
  }
  return stream.Synchronize();
}

}  // namespace pet
}  // namespace recon
}  // namespace tessera
