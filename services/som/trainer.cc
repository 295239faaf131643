#include "services/som/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <memory>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/log.h"
#include "common/memory_kind_for.h"
#include "common/status.h"
#include "kernels/som/batch_update.h"
#include "kernels/som/bmu.h"
#include "kernels/som/documents.h"
#include "kernels/som/group_bounds.h"
#include "kernels/som/half.h"
#include "kernels/som/parallel.h"
#include "kernels/som/pca.h"
#include "kernels/som/quality_device.h"
#include "kernels/som/staged_copy.h"
#include "kernels/som/workspace.h"

namespace tessera {
namespace som {

const char* InitMethodName(InitMethod init) { return init == InitMethod::kRandom ? "random" : "pca"; }

CodebookView SomModel::view() {
  CodebookView v;
  v.nodes = grid.nodes();
  v.features = features;
  v.type = type;
  v.layout = CodebookLayout::kFeatureMajor;
  v.weights = type == WeightType::kFloat32 ? static_cast<void*>(weights_f32.data())
                                           : static_cast<void*>(weights_f16.data());
  v.sq_norms = sq_norms.data();
  return v;
}

float SomModel::Weight(int64_t feature, int64_t node) const {
  const int64_t k = feature * grid.nodes() + node;
  return type == WeightType::kFloat32 ? weights_f32[k] : HalfToFloat(weights_f16[k]);
}

const char* RadiusScheduleName(RadiusSchedule schedule) {
  switch (schedule) {
    case RadiusSchedule::kNarrow:
      return "narrow";
    case RadiusSchedule::kEndAtLastDecayEpoch:
      return "end-at-last-decay-epoch";
    case RadiusSchedule::kLegacy:
      return "legacy";
  }
  return "unknown";
}

absl::StatusOr<RadiusSchedule> ParseRadiusSchedule(absl::string_view name) {
  for (RadiusSchedule s : {RadiusSchedule::kNarrow, RadiusSchedule::kEndAtLastDecayEpoch, RadiusSchedule::kLegacy}) {
    if (name == RadiusScheduleName(s)) return s;
  }
  return absl::InvalidArgumentError(absl::StrCat("radius schedule '", name,
                                                 "' is not one of narrow, end-at-last-decay-epoch, legacy"));
}

int DefaultRadiusDecayEpochs(int max_epochs) { return std::min(10, std::max(1, (3 * max_epochs + 3) / 4)); }

double StartRadius(const TrainOptions& o) {
  if (o.radius_start > 0) return o.radius_start;
  const double half_edge = std::max(o.grid.width, o.grid.height) / 2.0;
  // The PCA initialisation's global order makes the wide start unnecessary
  // (trainer.h); a random codebook has none to keep.
  const bool narrow = o.radius_schedule == RadiusSchedule::kNarrow && o.init == InitMethod::kPca;
  return narrow ? half_edge / 4 : half_edge;
}

double EndRadius(const TrainOptions& o) {
  const double schedule_end = o.radius_schedule == RadiusSchedule::kNarrow ? 0.45 : 1.0;
  return std::min(StartRadius(o), o.radius_end >= 0 ? o.radius_end : schedule_end);
}

double RadiusAt(const TrainOptions& o, int epoch) {
  const double r0 = StartRadius(o);
  const double r1 = EndRadius(o);
  double t = 1;  // the fraction of the way from r0 to r1
  if (o.radius_schedule == RadiusSchedule::kLegacy) {
    const int d = std::max(1, o.radius_decay_epochs);
    if (epoch < d) t = static_cast<double>(epoch) / d;
  } else {
    // The last epoch of the decay trains at r1, even when max_epochs cuts it short.
    const int d = std::max(1, std::min(o.radius_decay_epochs, std::max(1, o.max_epochs)));
    if (d > 1 && epoch < d - 1) t = static_cast<double>(epoch) / (d - 1);
  }
  if (t >= 1) return r1;
  if (o.cooling == RadiusCooling::kLinear || r1 <= 0) return r0 + (r1 - r0) * t;  // linear (also to 0)
  return r0 * std::pow(r1 / r0, t);
}

namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

absl::Status CheckOptions(const SparseBinaryMatrix& train, const TrainOptions& o) {
  TESSERA_RETURN_IF_ERROR(CheckGrid(o.grid, "TrainSom"));
  if (train.rows() == 0) return absl::InvalidArgumentError("TrainSom: no training documents");
  if (train.cols() == 0) return absl::InvalidArgumentError("TrainSom: the corpus has no features");
  if (o.max_epochs < 1) return absl::InvalidArgumentError("TrainSom: max_epochs must be at least 1");
  if (o.blur_passes < 1) return absl::InvalidArgumentError("TrainSom: blur_passes must be at least 1");
  if (o.grid.nodes() >= (int64_t{1} << 31) - 1) return absl::InvalidArgumentError("TrainSom: map too large");
  if (o.bmu_algorithm != BmuAlgorithm::kFeatureMajor &&
      (o.bmu_algorithm != BmuAlgorithm::kCusparseRowOrder || o.backend != Backend::kCuda ||
       o.weight_type != WeightType::kFloat32)) {
    return absl::InvalidArgumentError(
        absl::StrCat("TrainSom: BMU algorithm ", BmuAlgorithmName(o.bmu_algorithm),
                     " is not supported for training (feature-major, or cusparse-row on CUDA with fp32 weights)"));
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

// Whether TrainSom / InitializeModel compute the PCA codebook on the GPU.
bool PcaOnDevice(const TrainOptions& o) {
  return o.backend == Backend::kCuda && o.init == InitMethod::kPca && o.pca_on_device;
}

// Document frequency / rows. Counted per thread in integers (exact, so the
// same values as a single pass; one pass over 329 M indices took ~0.4 s).
std::vector<double> FeatureMeans(const SparseBinaryMatrix& x) {
  const int64_t cols = x.cols();
  const std::vector<int32_t>& indices = x.indices();
  std::vector<std::vector<int64_t>> parts(CpuThreads());
  const int chunks = ParallelFor(static_cast<int64_t>(indices.size()), [&](int64_t k0, int64_t k1, int chunk) {
    std::vector<int64_t>& counts = parts[chunk];
    counts.assign(cols, 0);
    for (int64_t k = k0; k < k1; ++k) ++counts[indices[k]];
  });
  std::vector<double> mean(cols, 0.0);
  for (int c = 0; c < chunks; ++c) {
    if (parts[c].empty()) continue;
    for (int64_t v = 0; v < cols; ++v) mean[v] += static_cast<double>(parts[c][v]);
  }
  for (double& e : mean) e /= x.rows();
  return mean;
}

// Copies of host vectors in the stream's backend memory (host: views, no copy).
class BackendVectors {
 public:
  explicit BackendVectors(const Stream& stream) : stream_(stream) {}
  absl::StatusOr<const double*> Put(const std::vector<double>& host) {
    if (stream_.backend() == Backend::kCpu) return host.data();
    TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> b,
                             Buffer::Allocate(MemoryKind::kDevice, 8 * std::max<size_t>(1, host.size()),
                                              stream_.ordinal()));
    TESSERA_RETURN_IF_ERROR(
        CopyBytes(b->data(), MemoryKind::kDevice, host.data(), MemoryKind::kHost, 8 * host.size(), stream_));
    buffers_.push_back(b);
    return static_cast<const double*>(b->data());
  }

 private:
  const Stream& stream_;
  std::vector<std::shared_ptr<Buffer>> buffers_;
};

}  // namespace

absl::Status InitializePcaCodebook(const Stream& stream, const SparseBinaryMatrix& train, const TrainOptions& o,
                                   const CodebookView& codebook) {
  if (codebook.nodes != o.grid.nodes() || codebook.features != train.cols()) {
    return absl::InvalidArgumentError(absl::StrCat("InitializePcaCodebook: codebook of ", codebook.nodes, " x ",
                                                   codebook.features, " for a ", GridToString(o.grid),
                                                   " map over ", train.cols(), " features"));
  }
  const std::vector<double> mean = FeatureMeans(train);
  // PCA on a seeded sample of rows (all rows when the corpus is small).
  const SparseBinaryMatrix* x = &train;
  SparseBinaryMatrix sample;
  if (o.pca_sample_rows > 0 && train.rows() > o.pca_sample_rows) {
    // Evenly spaced rows: cheap on 10^7-row corpora, and deterministic.
    std::vector<int64_t> rows(o.pca_sample_rows);
    for (int64_t k = 0; k < o.pca_sample_rows; ++k) rows[k] = k * train.rows() / o.pca_sample_rows;
    sample = SelectRows(train, rows);
    x = &sample;
  }
  PcaOptions pca;
  pca.iterations = o.pca_iterations;
  pca.seed = o.seed;
  TESSERA_ASSIGN_OR_RETURN(PrincipalPlane plane, LeadingComponents(stream, x->view(), pca));
  std::vector<double> c0, c1;
  PcaNodeCoefficients(o.grid, plane, &c0, &c1);
  BackendVectors put(stream);
  PcaFillInputs in;
  TESSERA_ASSIGN_OR_RETURN(in.mean, put.Put(mean));
  TESSERA_ASSIGN_OR_RETURN(in.u0, put.Put(plane.u[0]));
  TESSERA_ASSIGN_OR_RETURN(in.u1, put.Put(plane.u[1]));
  TESSERA_ASSIGN_OR_RETURN(in.c0, put.Put(c0));
  TESSERA_ASSIGN_OR_RETURN(in.c1, put.Put(c1));
  TESSERA_RETURN_IF_ERROR(FillPcaCodebook(stream, codebook, in));
  return stream.Synchronize();  // before the inputs' buffers go
}

namespace {

// A model with its grid and type but no weights yet.
SomModel EmptyModel(const SparseBinaryMatrix& train, const TrainOptions& o) {
  SomModel model;
  model.grid = o.grid;
  model.features = train.cols();
  model.type = o.weight_type;
  return model;
}

// Host storage for the model's weights and norms (the values are overwritten).
void AllocateHost(SomModel& model) {
  const size_t n = static_cast<size_t>(model.features) * static_cast<size_t>(model.grid.nodes());
  if (model.type == WeightType::kFloat32) {
    model.weights_f32.resize(n);
  } else {
    model.weights_f16.resize(n);
  }
  model.sq_norms.resize(static_cast<size_t>(model.grid.nodes()));
}

}  // namespace

absl::StatusOr<SomModel> InitializeModel(const SparseBinaryMatrix& train, const TrainOptions& o) {
  TESSERA_RETURN_IF_ERROR(CheckOptions(train, o));
  SomModel model = EmptyModel(train, o);
  const int64_t m = o.grid.nodes(), v_count = train.cols();
  // Written straight into the stored type: a 1024 x 1024 map over 30K
  // features is 129 GB as fp32 but 64 GB as fp16, and a temporary fp32 copy
  // would not fit the host.
  AllocateHost(model);
  if (PcaOnDevice(o)) {
    TESSERA_ASSIGN_OR_RETURN(Stream stream, Stream::Create(Backend::kCuda, o.gpu_ordinal));
    const size_t bytes = static_cast<size_t>(WeightBytes(o.weight_type)) * v_count * m;
    TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> weights,
                             Buffer::Allocate(MemoryKind::kDevice, std::max<size_t>(4, bytes), o.gpu_ordinal));
    TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> norms,
                             Buffer::Allocate(MemoryKind::kDevice, 4 * m, o.gpu_ordinal));
    CodebookView device = model.view();
    device.weights = weights->data();
    device.sq_norms = static_cast<float*>(norms->data());
    TESSERA_RETURN_IF_ERROR(InitializePcaCodebook(stream, train, o, device));
    CodebookView host = model.view();
    TESSERA_RETURN_IF_ERROR(CopyBytes(host.weights, MemoryKind::kHost, weights->data(), MemoryKind::kDevice, bytes,
                                      stream));
    TESSERA_RETURN_IF_ERROR(CopyBytes(host.sq_norms, MemoryKind::kHost, norms->data(), MemoryKind::kDevice, 4 * m,
                                      stream));
    TESSERA_RETURN_IF_ERROR(stream.Synchronize());
    return model;
  }
  if (o.init == InitMethod::kRandom) {
    const std::vector<double> mean = FeatureMeans(train);
    const bool fp32 = o.weight_type == WeightType::kFloat32;
    std::mt19937_64 rng(o.seed);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (int64_t v = 0; v < v_count; ++v) {
      for (int64_t i = 0; i < m; ++i) {
        const float value = static_cast<float>(2.0 * mean[v] * u(rng));
        if (fp32) {
          model.weights_f32[v * m + i] = value;
        } else {
          model.weights_f16[v * m + i] = FloatToHalf(value);
        }
      }
    }
    cpu::ComputeSqNorms(model.view());
    return model;
  }
  TESSERA_RETURN_IF_ERROR(InitializePcaCodebook(Stream::Cpu(), train, o, model.view()));
  return model;
}

namespace {

// Everything one backend needs for training or projection.
class Engine {
 public:
  static absl::StatusOr<std::unique_ptr<Engine>> Create(Backend backend, int ordinal,
                                                        const SparseBinaryMatrix& docs, SomModel& model,
                                                        bool for_training, BmuTuning tuning = BmuTuning(),
                                                        bool upload_weights = true,
                                                        BmuAlgorithm algorithm = BmuAlgorithm::kFeatureMajor) {
    auto e = std::unique_ptr<Engine>(new Engine());
    if (backend == Backend::kCpu) {
      e->stream_ = std::make_unique<Stream>(Stream::Cpu());
    } else {
      TESSERA_ASSIGN_OR_RETURN(Stream s, Stream::Create(backend, ordinal));
      e->stream_ = std::make_unique<Stream>(std::move(s));
    }
    e->kind_ = MemoryKindFor(*e->stream_);
    DocumentParts parts;
    // Only the tiled CUDA kernel (a benchmark alternative) reads document tiles.
    parts.tiles = backend == Backend::kCuda && tuning.tiled_kernel;
    parts.csc = for_training;
    // Only the cuSPARSE baselines plan with host offsets (240 MB at 29.9 M documents).
    parts.host_offsets =
        algorithm == BmuAlgorithm::kCusparseRowOrder || algorithm == BmuAlgorithm::kCusparseColOrder;
    TESSERA_ASSIGN_OR_RETURN(e->docs_, DocumentSet::Create(docs.view(), *e->stream_, parts));
    const bool visits_in_order = (algorithm == BmuAlgorithm::kFeatureMajor || algorithm == BmuAlgorithm::kNodeMajor) &&
                                 !tuning.tiled_kernel && tuning.order_by_previous_bmu;
    if (backend == Backend::kCuda && for_training && visits_in_order) {
      // Each document's rarest feature: the visiting order's second key (and
      // the whole order in the first epoch, before any BMU is known). Only the
      // non-tiled feature-/node-major search orders its visits (FindBmus).
      TESSERA_ASSIGN_OR_RETURN(e->doc_keys_,
                               Buffer::Allocate(MemoryKind::kDevice, std::max<int64_t>(4, 4 * docs.rows()), ordinal));
      TESSERA_RETURN_IF_ERROR(
          RarestFeatureKeys(*e->stream_, e->docs_, static_cast<int32_t*>(e->doc_keys_->data())));
    }
    const int64_t n = docs.rows(), m = model.grid.nodes();
    const size_t weight_bytes = static_cast<size_t>(WeightBytes(model.type)) * model.features * m;
    TESSERA_ASSIGN_OR_RETURN(e->weights_, Buffer::Allocate(e->kind_, std::max<size_t>(4, weight_bytes), ordinal));
    TESSERA_ASSIGN_OR_RETURN(e->norms_, Buffer::Allocate(e->kind_, 4 * m, ordinal));
    TESSERA_ASSIGN_OR_RETURN(e->bmu_, Buffer::Allocate(e->kind_, std::max<int64_t>(4, 4 * n), ordinal));
    TESSERA_ASSIGN_OR_RETURN(e->second_, Buffer::Allocate(e->kind_, std::max<int64_t>(4, 4 * n), ordinal));
    TESSERA_ASSIGN_OR_RETURN(e->score_, Buffer::Allocate(e->kind_, std::max<int64_t>(4, 4 * n), ordinal));
    CodebookView host = model.view();
    if (upload_weights) {
      TESSERA_RETURN_IF_ERROR(
          CopyBytes(e->weights_->data(), e->kind_, host.weights, MemoryKind::kHost, weight_bytes, *e->stream_));
      TESSERA_RETURN_IF_ERROR(
          CopyBytes(e->norms_->data(), e->kind_, host.sq_norms, MemoryKind::kHost, 4 * m, *e->stream_));
    }
    e->tuning_ = tuning;
    e->view_ = host;
    e->view_.weights = e->weights_->data();
    e->view_.sq_norms = static_cast<float*>(e->norms_->data());
    e->weight_bytes_ = weight_bytes;
    e->rows_ = n;
    return e;
  }

  void set_bmu_algorithm(BmuAlgorithm algorithm) { bmu_algorithm_ = algorithm; }

  // TrainOptions::group_bounds: the per-document bounds and the update's
  // drift tables. Empty (with the reason logged) when the backend cannot take
  // the strip or the memory cannot be had: training then goes on without.
  absl::Status EnableGroupBounds(const GroupBoundOptions& options, int ordinal) {
    const char* unsupported = GroupBoundsUnsupportedReason(stream_->backend(), view_, options.strip_nodes);
    if (bmu_algorithm_ != BmuAlgorithm::kFeatureMajor) unsupported = "group bounds need the feature-major BMU search";
    if (*unsupported != '\0') {
      TESSERA_LOG(WARNING) << "TrainSom: training without group bounds: " << unsupported;
      return absl::OkStatus();
    }
    const int64_t groups = GroupCount(view_.nodes, options.strip_nodes);
    const size_t bound_bytes = sizeof(float) * static_cast<size_t>(groups) * static_cast<size_t>(rows_);
    if (stream_->backend() == Backend::kCuda) {
      // The epochs still allocate their scratch (update slabs, visiting
      // order, partials: ~2 GB at 29.9 M documents): keep 4 GiB free.
      const size_t drift_bytes = sizeof(float) * static_cast<size_t>(groups) * (view_.features + 1);
      TESSERA_ASSIGN_OR_RETURN(const GpuMemoryInfo memory, QueryGpuMemory(ordinal));
      if (bound_bytes + drift_bytes + (size_t{4} << 30) > memory.free_bytes) {
        TESSERA_LOG(WARNING) << "TrainSom: training without group bounds: they need " << bound_bytes + drift_bytes
                             << " bytes of device memory, " << memory.free_bytes << " are free (4 GiB kept)";
        return absl::OkStatus();
      }
    }
    auto lower = Buffer::Allocate(kind_, std::max<size_t>(4, bound_bytes), ordinal);
    auto rise = Buffer::Allocate(kind_, sizeof(float) * static_cast<size_t>(groups * view_.features), ordinal);
    auto change = Buffer::Allocate(kind_, sizeof(float) * static_cast<size_t>(groups), ordinal);
    for (const auto* b : {&lower, &rise, &change}) {
      if (b->ok()) continue;
      if (b->status().code() != absl::StatusCode::kResourceExhausted) return b->status();
      TESSERA_LOG(WARNING) << "TrainSom: training without group bounds: " << bound_bytes
                           << " bytes of bounds could not be allocated: " << b->status().message();
      return absl::OkStatus();
    }
    bound_lower_ = *std::move(lower);
    drift_rise_ = *std::move(rise);
    drift_change_ = *std::move(change);
    bounds_.strip_nodes = drift_.strip_nodes = options.strip_nodes;
    bounds_.groups = drift_.groups = groups;
    bounds_.lower = static_cast<float*>(bound_lower_->data());
    drift_.weight_rise = static_cast<float*>(drift_rise_->data());
    drift_.norm_change = static_cast<float*>(drift_change_->data());
    return absl::OkStatus();
  }
  bool has_group_bounds() const { return bound_lower_ != nullptr; }

  // The PCA codebook computed in the engine's own memory (no host copy).
  absl::Status InitializePca(const SparseBinaryMatrix& train, const TrainOptions& o) {
    return InitializePcaCodebook(*stream_, train, o, view_);
  }

  // `with_bounds`: through the group bounds (when the engine keeps them): a
  // bounded search when the last search set them and the update since
  // reported its drift, else a full one that sets them.
  absl::Status Bmus(bool with_bounds = false) {
    BmuOutput out{static_cast<int32_t*>(bmu_->data()), static_cast<int32_t*>(second_->data()),
                  static_cast<float*>(score_->data())};
    // From the second search on, bmu_ holds the previous epoch's BMUs: a hint
    // for the document order (BmuTuning::order_by_previous_bmu), never a
    // change of the results. FindBmus reads them before it writes bmu_.
    out.exact_rescans = &exact_rescans_;
    BmuHints hints;
    if (doc_keys_ != nullptr) hints.document_key = static_cast<const int32_t*>(doc_keys_->data());
    if (have_bmus_) hints.previous_bmu = static_cast<const int32_t*>(bmu_->data());
    bound_stats_ = GroupSearchStats();
    bound_mode_ = 0;
    if (with_bounds && has_group_bounds()) {
      const bool bounded = bounds_set_ && drift_ready_ && have_bmus_;
      TESSERA_RETURN_IF_ERROR(FindBmusGroupBounded(*stream_, docs_, view_, out, bounds_, bounded ? &drift_ : nullptr,
                                                   &ws_, hints, &bound_stats_));
      bound_mode_ = bounded ? 2 : 1;
      bounds_set_ = true;
    } else {
      TESSERA_RETURN_IF_ERROR(FindBmus(*stream_, bmu_algorithm_, docs_, view_, out, &ws_, tuning_, hints));
      bounds_set_ = false;
    }
    drift_ready_ = false;
    have_bmus_ = true;
    return stream_->Synchronize();
  }

  int bound_mode() const { return bound_mode_; }
  const GroupSearchStats& bound_stats() const { return bound_stats_; }

  // BMU results and norms into the host mirrors (allocated on first use:
  // training with the quality pass on the device never needs them, and
  // zero-filling 3 x 120 MB at 29.9 M documents cost set-up time).
  absl::Status Fetch() {
    const size_t n = static_cast<size_t>(rows_);
    h_bmu_.resize(n);
    h_second_.resize(n);
    h_score_.resize(n);
    h_norms_.resize(static_cast<size_t>(view_.nodes));
    TESSERA_RETURN_IF_ERROR(CopyBytes(h_bmu_.data(), MemoryKind::kHost, bmu_->data(), kind_, 4 * n, *stream_));
    TESSERA_RETURN_IF_ERROR(
        CopyBytes(h_second_.data(), MemoryKind::kHost, second_->data(), kind_, 4 * n, *stream_));
    TESSERA_RETURN_IF_ERROR(CopyBytes(h_score_.data(), MemoryKind::kHost, score_->data(), kind_, 4 * n, *stream_));
    return CopyBytes(h_norms_.data(), MemoryKind::kHost, norms_->data(), kind_, 4 * h_norms_.size(), *stream_);
  }

  int64_t exact_rescans() const { return exact_rescans_; }

  // Quality of the last search: on the device where the results are
  // (CUDA, `on_device`), else downloaded and measured on the host.
  absl::StatusOr<QualityMetrics> MeasureQuality(const SparseBinaryMatrix& docs, const GridShape& grid,
                                                Adjacency adjacency, bool on_device) {
    if (on_device && kind_ == MemoryKind::kDevice) {
      return cuda::ComputeQuality(*stream_, docs_.csr().offsets, docs_.rows(),
                                  static_cast<const int32_t*>(bmu_->data()), static_cast<const int32_t*>(second_->data()),
                                  static_cast<const float*>(score_->data()), view_.sq_norms, grid, adjacency, ws_);
    }
    TESSERA_RETURN_IF_ERROR(Fetch());
    return Quality(docs, grid, adjacency);
  }

  QualityMetrics Quality(const SparseBinaryMatrix& docs, const GridShape& grid, Adjacency adjacency) const {
    return ComputeQuality(docs.offsets().data(), docs.rows(), h_bmu_.data(), h_second_.data(), h_score_.data(),
                          h_norms_.data(), grid, adjacency);
  }

  absl::Status Update(const GridShape& grid, const BoxBlur& blur, int64_t slab_bytes) {
    UpdateOptions options;
    options.slab_bytes = slab_bytes;
    // The drift for the next search's bounds, when this epoch's search set them.
    if (bounds_set_) options.group_drift = drift_;
    drift_ready_ = bounds_set_;
    TESSERA_RETURN_IF_ERROR(BatchUpdate(*stream_, docs_.csc(), static_cast<const int32_t*>(bmu_->data()), grid, blur,
                                        view_, &ws_, options));
    return stream_->Synchronize();
  }

  // The codebook into `model` (its host storage allocated if still empty).
  absl::Status Download(SomModel& model) {
    if (model.sq_norms.empty()) AllocateHost(model);  // initialised on the device
    CodebookView host = model.view();
    TESSERA_RETURN_IF_ERROR(StagedCopyToHost(host.weights, weights_->data(), weight_bytes_, *stream_));
    return CopyBytes(host.sq_norms, MemoryKind::kHost, norms_->data(), kind_, 4 * model.grid.nodes(), *stream_);
  }

  std::vector<int32_t>& bmu() { return h_bmu_; }
  std::vector<int32_t>& second() { return h_second_; }
  std::vector<float>& score() { return h_score_; }

 private:
  Engine() = default;
  std::unique_ptr<Stream> stream_;
  MemoryKind kind_ = MemoryKind::kHost;
  DocumentSet docs_;
  std::shared_ptr<Buffer> weights_, norms_, bmu_, second_, score_;
  std::shared_ptr<Buffer> doc_keys_;  // the visiting order's second key (BmuHints::document_key)
  CodebookView view_;
  size_t weight_bytes_ = 0;
  int64_t rows_ = 0;
  SomWorkspace ws_;
  BmuAlgorithm bmu_algorithm_ = BmuAlgorithm::kFeatureMajor;
  BmuTuning tuning_;
  bool have_bmus_ = false;  // bmu_ holds the results of an earlier search
  // TrainOptions::group_bounds: per document bounds and the update's drift.
  std::shared_ptr<Buffer> bound_lower_, drift_rise_, drift_change_;
  GroupBoundsView bounds_;
  GroupDriftView drift_;
  bool bounds_set_ = false;   // the last search set the bounds
  bool drift_ready_ = false;  // ... and the update since reported its drift
  int bound_mode_ = 0;
  GroupSearchStats bound_stats_;
  int64_t exact_rescans_ = 0;
  std::vector<int32_t> h_bmu_, h_second_;
  std::vector<float> h_score_, h_norms_;
};

}  // namespace

absl::StatusOr<TrainResult> TrainSom(const SparseBinaryMatrix& train, const TrainOptions& o) {
  const Clock::time_point start = Clock::now();
  TESSERA_RETURN_IF_ERROR(CheckOptions(train, o));
  TrainResult result;
  std::unique_ptr<Engine> engine;
  if (PcaOnDevice(o)) {
    // The codebook is born on the device; the host copy comes at the end.
    result.model = EmptyModel(train, o);
    TESSERA_ASSIGN_OR_RETURN(engine, Engine::Create(o.backend, o.gpu_ordinal, train, result.model,
                                                    /*for_training=*/true, o.bmu_tuning, /*upload_weights=*/false,
                                                    o.bmu_algorithm));
    result.setup_seconds = Since(start);
    TESSERA_RETURN_IF_ERROR(engine->InitializePca(train, o));
    result.init_seconds = Since(start) - result.setup_seconds;
  } else {
    TESSERA_ASSIGN_OR_RETURN(result.model, InitializeModel(train, o));
    result.init_seconds = Since(start);
    TESSERA_ASSIGN_OR_RETURN(engine, Engine::Create(o.backend, o.gpu_ordinal, train, result.model,
                                                    /*for_training=*/true, o.bmu_tuning, /*upload_weights=*/true,
                                                    o.bmu_algorithm));
    result.setup_seconds = Since(start) - result.init_seconds;
  }
  engine->set_bmu_algorithm(o.bmu_algorithm);
  if (o.group_bounds.enabled) TESSERA_RETURN_IF_ERROR(engine->EnableGroupBounds(o.group_bounds, o.gpu_ordinal));
  const double small = o.small_radius > 0 ? o.small_radius : 1.25 * EndRadius(o);
  const double bound_radius = o.group_bounds.max_radius > 0 ? o.group_bounds.max_radius : small;
  int calm = 0;
  double previous_qe = 0;
  for (int epoch = 0; epoch < o.max_epochs; ++epoch) {
    if (o.should_stop && o.should_stop()) {
      return absl::CancelledError(absl::StrCat("TrainSom: stopped before epoch ", epoch + 1));
    }
    const Clock::time_point t0 = Clock::now();
    EpochReport r;
    r.epoch = epoch;
    r.radius = RadiusAt(o, epoch);
    const BoxBlur blur = BoxBlurForRadius(r.radius, o.blur_passes);
    r.box_half_width = blur.half_width;
    r.tap_weight = blur.side_weight;
    TESSERA_RETURN_IF_ERROR(engine->Bmus(o.group_bounds.enabled && r.radius <= bound_radius));
    r.bmu_seconds = Since(t0);
    r.bmu_exact_rescans = engine->exact_rescans();
    r.bmu_bound_mode = engine->bound_mode();
    r.bmu_pairs_searched = engine->bound_stats().pairs_searched;
    r.bmu_pairs = engine->bound_stats().pairs;
    r.bmu_documents_skipped = engine->bound_stats().documents_skipped;
    const Clock::time_point tq = Clock::now();
    TESSERA_ASSIGN_OR_RETURN(const QualityMetrics q,
                             engine->MeasureQuality(train, o.grid, Adjacency::kFour, o.quality_on_device));
    r.quality_seconds = Since(tq);
    r.qe = q.qe_euclidean;
    r.topographic_error = q.topographic_error;
    r.qe_relative_change = epoch == 0 || previous_qe == 0 ? 0.0 : std::abs(r.qe - previous_qe) / previous_qe;
    const Clock::time_point t1 = Clock::now();
    TESSERA_RETURN_IF_ERROR(engine->Update(o.grid, blur, o.update_slab_bytes));
    r.update_seconds = Since(t1);
    r.seconds = Since(t0);
    result.history.push_back(r);
    result.epochs = epoch + 1;
    if (o.progress) o.progress(r);
    if (epoch > 0 && r.radius <= small && o.convergence_tolerance > 0 &&
        r.qe_relative_change < o.convergence_tolerance) {
      ++calm;
    } else {
      calm = 0;
    }
    previous_qe = r.qe;
    if (calm >= std::max(1, o.convergence_patience)) {
      result.converged = true;
      break;
    }
  }
  const Clock::time_point tf = Clock::now();
  // The host codebook (504 MB at 64x64 over 30K features) is allocated and
  // zero-filled on another thread while the GPU runs the final pass.
  std::future<void> host_storage;
  if (result.model.sq_norms.empty()) {
    host_storage = std::async(std::launch::async, [&model = result.model] { AllocateHost(model); });
  }
  absl::Status final_pass = engine->Bmus();
  absl::StatusOr<QualityMetrics> final_quality =
      final_pass.ok() ? engine->MeasureQuality(train, o.grid, Adjacency::kFour, o.quality_on_device)
                      : absl::StatusOr<QualityMetrics>(final_pass);
  if (host_storage.valid()) host_storage.get();  // joined on every path
  TESSERA_RETURN_IF_ERROR(final_quality.status());
  result.final_quality = *final_quality;
  TESSERA_RETURN_IF_ERROR(engine->Download(result.model));
  result.final_seconds = Since(tf);
  result.total_seconds = Since(start);
  return result;
}

absl::StatusOr<Projection> ProjectDocuments(SomModel& model, const SparseBinaryMatrix& docs, Backend backend,
                                            int gpu_ordinal, Adjacency adjacency) {
  if (docs.cols() != model.features) {
    return absl::InvalidArgumentError(
        absl::StrCat("ProjectDocuments: documents have ", docs.cols(), " features, the map ", model.features));
  }
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                           Engine::Create(backend, gpu_ordinal, docs, model, /*for_training=*/false));
  TESSERA_RETURN_IF_ERROR(engine->Bmus());
  TESSERA_RETURN_IF_ERROR(engine->Fetch());
  Projection p;
  p.quality = engine->Quality(docs, model.grid, adjacency);
  p.bmu = std::move(engine->bmu());
  p.second = std::move(engine->second());
  p.score = std::move(engine->score());
  return p;
}

}  // namespace som
}  // namespace tessera
