#include "kernels/registration/pipeline/out_of_core_stage.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/array_stats.h"
#include "common/buffer.h"
#include "common/memory_kind_for.h"
#include "common/parallel.h"
#include "common/status.h"
#include "kernels/registration/sharded/ring_sampler.h"
#include "kernels/registration/sharded/sharded_greedy_step.h"
#include "kernels/registration/sharded/sharded_ops.h"
#include "kernels/parallel/slab.h"
#include "kernels/parallel/staged_communicator.h"
#include "kernels/registration/field_ops.h"
#include "kernels/registration/gaussian_smooth.h"
#include "kernels/registration/lean_compose.h"
#include "kernels/registration/pipeline/array_helpers.h"
#include "kernels/registration/pipeline/per_scale.h"
#include "kernels/registration/pipeline/plateau_stop.h"
#include "kernels/registration/pipeline/sharded_deformable_stage.h"
#include "kernels/registration/pipeline/step_control.h"

#if TESSERA_WITH_CUDA
#include <cuda_runtime_api.h>

#include "common/cuda_check.h"
#endif

namespace tessera::registration {
namespace {

using parallel::GreedyRule;
using parallel::GreedyStepOptions;
using parallel::MovingWindow;
using parallel::ShardedGreedyState;
using parallel::SlabLayout;
using parallel::StagedCommunicator;
using parallel::StagedGroup;

// The largest moving window over `layouts` for a field in [disp_min,
// disp_max] widened by a quarter of its reach and 2 slices: the field grows
// during a level, and a window that outgrows its plan is reallocated larger.
int64_t PlannedWindowSlices(const std::vector<SlabLayout>& layouts, Dims3 moving, const float affine[12],
                            double disp_min, double disp_max) {
  const double reach = std::max(std::abs(disp_min), std::abs(disp_max));
  const double slice = moving.nz > 1 ? 2.0 / static_cast<double>(moving.nz - 1) : 0.0;  // normalised
  const double margin = 0.25 * reach + 2 * slice;
  int64_t most = 1;
  for (const SlabLayout& l : layouts) {
    most = std::max(most, parallel::MovingWindowFor(l, moving, affine, std::min(0.0, disp_min) - margin,
                                                    std::max(0.0, disp_max) + margin).nz);
  }
  return most;
}

// Voxels per composition slab out of core (GreedyStepOptions::compose_slab_voxels):
// an eighth of the default, so thin shards of small planes do not hold their
// whole local field twice; large planes compose a halo's depth either way.
constexpr int64_t kOutOfCoreComposeSlabVoxels = int64_t{1} << 18;

// The sharded loop body's options for the out-of-core stage.
absl::StatusOr<parallel::GreedyStepOptions> OutOfCoreStepOptions(const RegistrationOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(parallel::GreedyStepOptions step, ShardedStepOptions(options));
  step.compose_slab_voxels = kOutOfCoreComposeSlabVoxels;
  return step;
}

// The layouts of `shards` z-slab shards of a `dims` grid (ShardsForLevel
// decides how many the halos allow).
absl::StatusOr<std::vector<SlabLayout>> ShardLayouts(Dims3 dims, int shards, int64_t halo) {
  const int ranks = ShardsForLevel(shards, dims.nz, halo);
  TESSERA_ASSIGN_OR_RETURN(const parallel::SlabPartition partition, parallel::SlabPartition::Make(dims.nz, ranks));
  std::vector<SlabLayout> layouts;
  for (int r = 0; r < ranks; ++r) {
    TESSERA_ASSIGN_OR_RETURN(SlabLayout l, partition.Layout(dims, r, halo));
    layouts.push_back(l);
  }
  return layouts;
}

// Per-voxel device bytes of one working set's slab arrays (the model in the
// header): fixed, warped, dL/dwarped 4 each, u and grad 12 each (+ Adam's m,
// v), and LNCC's coefficients a, b, c (12) kept in the sampler's workspace.
int64_t SlabBytesPerVoxel(const RegistrationOptions& options) {
  return 48 + (options.deformable_step == DeformableStep::kAdam ? 24 : 0);
}

// One working set's composition workspace (lean_compose.cc): two 3-component
// slabs of kOutOfCoreComposeSlabVoxels, at least the compose halo deep
// (`halo` bounds it): 1024^2 planes hold a few slices.
int64_t ComposeScratchBytes(Dims3 fixed, int64_t local_nz, int64_t halo) {
  const int64_t plane = std::max<int64_t>(1, fixed.nx * fixed.ny);
  const int64_t depth =
      std::min(local_nz, std::max(std::max<int64_t>(halo, 1), (kOutOfCoreComposeSlabVoxels + plane - 1) / plane));
  return ComposeSlabBuffersBytes(Dims3{fixed.nx, fixed.ny, local_nz}, depth);
}

enum class Phase { kSample, kMetricPrepass, kMetric, kSmoothGradient, kCompose, kSmoothField,
                   // The output passes of a bounded run (RunOutOfCoreOutputs): the warp
                   // alone (no sampling Jacobian), and det J's summary.
                   kWarp, kJacobian };
// Which slices of a whole host array a phase moves: the own ones, or own + halos.
enum class Part { kOwn, kLocal };

// Copies slices of a whole host array (rank 3, or planar rank 4) into a
// local array of `l` (kLocal: every local slice; kOwn: the own ones).
absl::Status UploadSlab(const NDArray& whole, const SlabLayout& l, Part part, NDArray& local, const Stream& s) {
  const int components = whole.rank() == 4 ? static_cast<int>(whole.dim(3)) : 1;
  const int64_t slice = l.slice(), n = l.global.size(), lv = l.local_voxels();
  const int64_t z0 = part == Part::kOwn ? l.z_begin : l.local_z0();
  const int64_t nz = part == Part::kOwn ? l.own_nz() : l.local_nz();
  for (int c = 0; c < components; ++c) {
    TESSERA_RETURN_IF_ERROR(CopyBytes(local.data<float>() + c * lv + (z0 - l.local_z0()) * slice, local.memory_kind(),
                                      whole.data<float>() + c * n + z0 * slice, whole.memory_kind(),
                                      static_cast<size_t>(nz * slice) * sizeof(float), s));
  }
  return absl::OkStatus();
}

// The own slices of a local array back into the whole host array.
absl::Status DownloadOwn(const NDArray& local, const SlabLayout& l, NDArray& whole, const Stream& s) {
  const int components = whole.rank() == 4 ? static_cast<int>(whole.dim(3)) : 1;
  const int64_t slice = l.slice(), n = l.global.size(), lv = l.local_voxels();
  for (int c = 0; c < components; ++c) {
    TESSERA_RETURN_IF_ERROR(CopyBytes(whole.data<float>() + c * n + l.z_begin * slice, whole.memory_kind(),
                                      local.data<float>() + c * lv + l.own_offset(), local.memory_kind(),
                                      static_cast<size_t>(l.own_voxels()) * sizeof(float), s));
  }
  return absl::OkStatus();
}

// Orders work between two streams of one GPU without blocking the host
// (cudaEvent); on the CPU backend every copy is already complete.
class StreamOrder {
 public:
  StreamOrder() = default;
  StreamOrder(const StreamOrder&) = delete;
  StreamOrder& operator=(const StreamOrder&) = delete;
  ~StreamOrder() {
#if TESSERA_WITH_CUDA
    if (event_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
#endif
  }
  // Marks the work queued on `from` so far.
  absl::Status Record(const Stream& from) {
    if (from.backend() != Backend::kCuda) return absl::OkStatus();
#if TESSERA_WITH_CUDA
    if (event_ == nullptr) {
      cudaEvent_t e;
      TESSERA_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      event_ = e;
    }
    TESSERA_CUDA_RETURN_IF_ERROR(cudaEventRecord(static_cast<cudaEvent_t>(event_), static_cast<cudaStream_t>(from.native())));
#endif
    return absl::OkStatus();
  }
  // Blocks the host until the marked work is done (nothing marked: returns).
  absl::Status HostWait() {
#if TESSERA_WITH_CUDA
    if (event_ != nullptr) TESSERA_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)));
#endif
    return absl::OkStatus();
  }
  // Later work on `to` starts after the marked work.
  absl::Status MakeWait(const Stream& to) {
    if (to.backend() != Backend::kCuda || event_ == nullptr) return absl::OkStatus();
#if TESSERA_WITH_CUDA
    TESSERA_CUDA_RETURN_IF_ERROR(
        cudaStreamWaitEvent(static_cast<cudaStream_t>(to.native()), static_cast<cudaEvent_t>(event_), 0));
#endif
    return absl::OkStatus();
  }

 private:
  void* event_ = nullptr;
};

// One device working set: buffers sized for the largest slab, and the
// sharded loop body's state whose arrays are views of them for the shard in hand.
struct WorkingSet {
  std::shared_ptr<Buffer> fixed, warped, grad_w, u, grad, m, v, moving;
  std::shared_ptr<Buffer> staging;  // CUDA: pinned floats of a converted image slab on their way up
  ShardedGreedyState state;
  StreamOrder uploaded, computed, downloaded;
};

// Host whole arrays of the level and what the phases share.
struct Level {
  Dims3 dims, moving_dims;
  SlabImage fixed, moving;         // converted slab by slab on upload
  NDArray u, m, v, warped, grad;   // whole arrays: host (pinned on CUDA) or resident in device memory
  std::vector<SlabLayout> layouts;
  float affine[12];
  double disp_min = 0, disp_max = 0;  // the field's current range (moving windows)
};

class OutOfCoreRunner {
 public:
  OutOfCoreRunner(const Stream& compute, Stream up, Stream down, const GreedyStepOptions& step, bool adam)
      : compute_(compute), up_(std::move(up)), down_(std::move(down)), step_(step), adam_(adam) {}

  absl::Status Allocate(const Level& level) {
    const MemoryKind kind = MemoryKindFor(compute_);
    int64_t largest = 0;
    for (const SlabLayout& l : level.layouts) largest = std::max(largest, l.local_voxels());
    for (WorkingSet& w : sets_) {
      std::vector<std::pair<std::shared_ptr<Buffer>*, int>> arrays = {
          {&w.fixed, 1}, {&w.warped, 1}, {&w.grad_w, 1}, {&w.u, 3}, {&w.grad, 3}};
      if (adam_) arrays.insert(arrays.end(), {{&w.m, 3}, {&w.v, 3}});
      for (auto [buffer, components] : arrays) {
        if (*buffer && (*buffer)->size() >= static_cast<size_t>(largest * components) * sizeof(float)) continue;
        buffer->reset();
        TESSERA_ASSIGN_OR_RETURN(*buffer, Buffer::Allocate(kind, largest * components * sizeof(float), compute_.ordinal()));
      }
    }
    return absl::OkStatus();
  }

  // Binds set `w` to shard r: views of r's shapes, the moving window.
  absl::Status Bind(WorkingSet& w, Level& level, int r, bool with_window) {
    const SlabLayout& l = level.layouts[r];
    ShardedGreedyState& s = w.state;
    s.layout = l;
    TESSERA_ASSIGN_OR_RETURN(s.fixed, NDArray::View(w.fixed, l.LocalShape(1), DType::kFloat32));
    TESSERA_ASSIGN_OR_RETURN(s.warped, NDArray::View(w.warped, l.LocalShape(1), DType::kFloat32));
    TESSERA_ASSIGN_OR_RETURN(s.grad_w, NDArray::View(w.grad_w, l.LocalShape(1), DType::kFloat32));
    TESSERA_ASSIGN_OR_RETURN(s.u, NDArray::View(w.u, l.LocalShape(3), DType::kFloat32));
    TESSERA_ASSIGN_OR_RETURN(s.grad_u, NDArray::View(w.grad, l.LocalShape(3), DType::kFloat32));
    if (adam_) {
      TESSERA_ASSIGN_OR_RETURN(s.m, NDArray::View(w.m, l.LocalShape(3), DType::kFloat32));
      TESSERA_ASSIGN_OR_RETURN(s.v, NDArray::View(w.v, l.LocalShape(3), DType::kFloat32));
    }
    std::copy(level.affine, level.affine + 12, s.affine);
    s.moving_window = true;
    s.moving_layout = SlabLayout();
    s.moving_layout.global = level.moving_dims;
    if (!with_window) return absl::OkStatus();
    const MovingWindow win =
        parallel::MovingWindowFor(l, level.moving_dims, level.affine, level.disp_min, level.disp_max);
    const Dims3 md = level.moving_dims;
    const size_t bytes = static_cast<size_t>(md.nx * md.ny * win.nz) * sizeof(float);
    if (!w.moving || w.moving->size() < bytes) {
      // The set is idle here (its last shard's compute and copies are done).
      w.moving.reset();
      TESSERA_ASSIGN_OR_RETURN(w.moving, Buffer::Allocate(MemoryKindFor(compute_), bytes, compute_.ordinal()));
    }
    TESSERA_ASSIGN_OR_RETURN(s.moving, NDArray::View(w.moving, {md.nx, md.ny, win.nz}, DType::kFloat32));
    s.moving_z0 = win.z0;
    window_voxels_ = std::max<int64_t>(window_voxels_, md.nx * md.ny * win.nz);
    return absl::OkStatus();
  }

  absl::Status Upload(Phase phase, WorkingSet& w, Level& level) {
    ShardedGreedyState& s = w.state;
    const SlabLayout& l = s.layout;
    std::vector<std::tuple<const NDArray*, Part, NDArray*>> in;
    switch (phase) {
      case Phase::kSample:
      case Phase::kWarp:
        in = {{&level.u, Part::kOwn, &s.u}};
        break;
      case Phase::kJacobian:
        in = {{&level.u, Part::kLocal, &s.u}};
        break;
      case Phase::kMetricPrepass:
        in = {{&level.warped, Part::kOwn, &s.warped}};
        TESSERA_RETURN_IF_ERROR(UploadImage(level.fixed, l.slice(), l.z_begin, l.own_nz(),
                                            s.fixed.data<float>() + (l.z_begin - l.local_z0()) * l.slice(), w));
        break;
      case Phase::kMetric:
        in = {{&level.warped, Part::kLocal, &s.warped}, {&level.grad, Part::kOwn, &s.grad_u}};
        TESSERA_RETURN_IF_ERROR(UploadImage(level.fixed, l.slice(), l.local_z0(), l.local_nz(), s.fixed.data<float>(), w));
        break;
      case Phase::kSmoothGradient:
        in = {{&level.grad, Part::kLocal, &s.grad_u}};
        break;
      case Phase::kCompose:
        in = {{&level.u, Part::kLocal, &s.u}, {&level.grad, Part::kOwn, &s.grad_u}};
        if (adam_) in.insert(in.end(), {{&level.m, Part::kLocal, &s.m}, {&level.v, Part::kLocal, &s.v}});
        break;
      case Phase::kSmoothField:
        in = {{&level.u, Part::kLocal, &s.u}};
        break;
    }
    for (auto [whole, part, local] : in) {
      // No field yet (the initial loss, an affine-only run): a zero field.
      if (whole->empty()) {
        TESSERA_RETURN_IF_ERROR(FillZero(*local, up_));
        continue;
      }
      TESSERA_RETURN_IF_ERROR(UploadSlab(*whole, l, part, *local, up_));
    }
    if (phase == Phase::kSample || phase == Phase::kWarp) {
      const Dims3 md = level.moving_dims;
      TESSERA_RETURN_IF_ERROR(
          UploadImage(level.moving, md.nx * md.ny, s.moving_z0, s.moving.dim(2), s.moving.data<float>(), w));
    }
    return absl::OkStatus();
  }

  // Slices [z0, z0 + nz) of a whole image (`slice` voxels each) as floats
  // into `dst` (compute memory): a plain copy of float32 data, else
  // converted on the host (ConvertSlab), on CUDA through the set's pinned
  // staging buffer.
  absl::Status UploadImage(const SlabImage& image, int64_t slice, int64_t z0, int64_t nz, float* dst, WorkingSet& w) {
    const int64_t offset = z0 * slice, n = nz * slice;
    const MemoryKind kind = MemoryKindFor(compute_);
    if (image.data.dtype() == DType::kFloat32 && !image.normalize) {
      return CopyBytes(dst, kind, image.data.data<float>() + offset, image.data.memory_kind(),
                       static_cast<size_t>(n) * sizeof(float), up_);
    }
    if (kind != MemoryKind::kDevice) return ConvertSlab(image, offset, n, dst);
    // The set's previous upload has left the staging buffer before it is refilled.
    TESSERA_RETURN_IF_ERROR(w.uploaded.HostWait());
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    if (!w.staging || w.staging->size() < bytes) {
      w.staging.reset();
      TESSERA_ASSIGN_OR_RETURN(w.staging, Buffer::Allocate(MemoryKind::kPinned, bytes, compute_.ordinal()));
    }
    float* staging = static_cast<float*>(w.staging->data());
    TESSERA_RETURN_IF_ERROR(ConvertSlab(image, offset, n, staging));
    return CopyBytes(dst, kind, staging, MemoryKind::kPinned, bytes, up_);
  }

  absl::Status Download(Phase phase, WorkingSet& w, Level& level) {
    ShardedGreedyState& s = w.state;
    std::vector<std::pair<const NDArray*, NDArray*>> out;
    switch (phase) {
      case Phase::kSample:
        out = {{&s.warped, &level.warped}, {&s.grad_u, &level.grad}};
        break;
      case Phase::kWarp:
        out = {{&s.warped, &level.warped}};
        break;
      case Phase::kMetricPrepass:
      case Phase::kJacobian:
        break;
      case Phase::kMetric:
      case Phase::kSmoothGradient:
        out = {{&s.grad_u, &level.grad}};
        break;
      case Phase::kCompose:
        out = {{&s.u, &level.u}};
        if (adam_) out.insert(out.end(), {{&s.m, &level.m}, {&s.v, &level.v}});
        break;
      case Phase::kSmoothField:
        out = {{&s.u, &level.u}};
        break;
    }
    for (auto [local, whole] : out) TESSERA_RETURN_IF_ERROR(DownloadOwn(*local, s.layout, *whole, down_));
    return absl::OkStatus();
  }

  // Runs `phase` over every shard in turn (shard r computes while r + 1
  // uploads and r - 1 downloads); all-reduces land in `group`. Returns the
  // last shard's phase value (the metric phase's loss with a published
  // histogram, MI), else 0.
  absl::StatusOr<double> Run(Phase phase, Level& level, StagedGroup& group, int64_t adam_step) {
    const int shards = static_cast<int>(level.layouts.size());
    const bool window = phase == Phase::kSample || phase == Phase::kWarp;
    double value = 0;
    TESSERA_RETURN_IF_ERROR(Bind(sets_[0], level, 0, window));
    TESSERA_RETURN_IF_ERROR(sets_[0].downloaded.MakeWait(up_));
    TESSERA_RETURN_IF_ERROR(Upload(phase, sets_[0], level));
    TESSERA_RETURN_IF_ERROR(sets_[0].uploaded.Record(up_));
    for (int r = 0; r < shards; ++r) {
      WorkingSet& w = sets_[r % 2];
      if (r + 1 < shards) {  // prefetch into the other set once its last download is done
        WorkingSet& next = sets_[(r + 1) % 2];
        TESSERA_RETURN_IF_ERROR(Bind(next, level, r + 1, window));
        // Shard r - 1 used these buffers: its download (after its compute) goes first.
        TESSERA_RETURN_IF_ERROR(next.downloaded.MakeWait(up_));
        TESSERA_RETURN_IF_ERROR(Upload(phase, next, level));
        TESSERA_RETURN_IF_ERROR(next.uploaded.Record(up_));
      }
      TESSERA_RETURN_IF_ERROR(w.uploaded.MakeWait(compute_));
      StagedCommunicator comm(&group, r);
      ShardedGreedyState& s = w.state;
      s.adam_step = adam_step;
      s.largest_grad = largest_grad_;
      switch (phase) {
        case Phase::kSample:
          TESSERA_RETURN_IF_ERROR(parallel::GreedySamplePhase(comm, s, step_, compute_));
          break;
        case Phase::kMetricPrepass:
          TESSERA_RETURN_IF_ERROR(parallel::GreedyMetricPrepass(comm, s, step_, compute_));
          break;
        case Phase::kMetric: {
          TESSERA_ASSIGN_OR_RETURN(value, parallel::GreedyMetricPhase(comm, s, step_, compute_));
          break;
        }
        case Phase::kSmoothGradient:
          TESSERA_RETURN_IF_ERROR(parallel::GreedySmoothGradientPhase(comm, s, step_, compute_));
          break;
        case Phase::kCompose:
          TESSERA_RETURN_IF_ERROR(parallel::GreedyComposePhase(comm, s, step_, compute_));
          break;
        case Phase::kWarp: {
          parallel::WindowSampleArgs wa;
          wa.out_layout = s.layout;
          wa.disp = s.u.data<float>();
          wa.affine = s.affine;
          wa.padding = Padding::kZeros;
          wa.moving_dims = level.moving_dims;
          wa.window = s.moving.data<float>();
          wa.window_z0 = s.moving_z0;
          wa.window_nz = s.moving.dim(2);
          TESSERA_RETURN_IF_ERROR(parallel::WindowGridSample(wa, s.warped.data<float>(), nullptr, compute_));
          break;
        }
        case Phase::kJacobian:
          // The summary's four values are folded by `group` (calls 0-3: voxels, folds, min, max).
          TESSERA_RETURN_IF_ERROR(
              parallel::ShardedJacobian(comm, s.layout, s.u, &s.warped, compute_, DisplacementUnits::kNormalized)
                  .status());
          break;
        case Phase::kSmoothField: {
          TESSERA_RETURN_IF_ERROR(parallel::GreedySmoothFieldPhase(comm, s, step_, compute_));
          // The field's range bounds the next iteration's moving windows.
          TESSERA_ASSIGN_OR_RETURN(ArrayStats stats, ComputeArrayStats(s.u, compute_));
          field_min_ = std::min(field_min_, stats.min);
          field_max_ = std::max(field_max_, stats.max);
          break;
        }
      }
      TESSERA_RETURN_IF_ERROR(w.computed.Record(compute_));
      TESSERA_RETURN_IF_ERROR(w.computed.MakeWait(down_));
      // Shard r + 1's upload read r's own slices as its halo: they are
      // overwritten only after it (phases that read and write one array).
      if (r + 1 < shards) TESSERA_RETURN_IF_ERROR(sets_[(r + 1) % 2].uploaded.MakeWait(down_));
      TESSERA_RETURN_IF_ERROR(Download(phase, w, level));
      TESSERA_RETURN_IF_ERROR(w.downloaded.Record(down_));
    }
    TESSERA_RETURN_IF_ERROR(compute_.Synchronize());
    TESSERA_RETURN_IF_ERROR(up_.Synchronize());
    TESSERA_RETURN_IF_ERROR(down_.Synchronize());
    return value;
  }

  // The step options of the update phases (the step control changes lr).
  void set_step(const GreedyStepOptions& step) { step_ = step; }
  void set_largest_grad(double g) { largest_grad_ = g; }
  void ResetFieldRange() { field_min_ = INFINITY, field_max_ = -INFINITY; }
  double field_min() const { return field_min_; }
  double field_max() const { return field_max_; }
  int64_t window_voxels() const { return window_voxels_; }

 private:
  const Stream& compute_;
  Stream up_, down_;
  GreedyStepOptions step_;
  bool adam_;
  WorkingSet sets_[2];
  double largest_grad_ = 0;
  double field_min_ = INFINITY, field_max_ = -INFINITY;
  int64_t window_voxels_ = 0;
};

// A level image as a SlabImage: the array itself when it is on the host,
// else one copy to host memory (pinned on CUDA, for asynchronous uploads).
absl::StatusOr<SlabImage> HostImage(const NDArray* image, const Stream& stream) {
  if (image == nullptr) {
    return absl::InvalidArgumentError("the out-of-core stage takes float levels (precision 'mixed' is not supported)");
  }
  SlabImage out;
  if (image->memory_kind() != MemoryKind::kDevice) {
    out.data = *image;
    return out;
  }
  TESSERA_ASSIGN_OR_RETURN(out.data, image->CopyTo(MemoryKind::kPinned, stream));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return out;
}

// The stage's copy streams and runner on `stream`'s device.
absl::StatusOr<std::unique_ptr<OutOfCoreRunner>> MakeRunner(const Stream& stream, const GreedyStepOptions& step) {
  Stream up = Stream::Cpu(), down = Stream::Cpu();
  if (stream.backend() == Backend::kCuda) {
    TESSERA_ASSIGN_OR_RETURN(up, Stream::Create(Backend::kCuda, stream.ordinal()));
    TESSERA_ASSIGN_OR_RETURN(down, Stream::Create(Backend::kCuda, stream.ordinal()));
  }
  return std::make_unique<OutOfCoreRunner>(stream, std::move(up), std::move(down), step,
                                           step.rule == GreedyRule::kAdam);
}

// The stream that works on `a`: `stream` for device memory, else `cpu`.
const Stream& StreamFor(const NDArray& a, const Stream& stream, const Stream& cpu) {
  return a.memory_kind() == MemoryKind::kDevice ? stream : cpu;
}

// What a level's moving windows depend on besides its layouts: the sampler
// affine and the range of the field (0 without one).
struct WindowGeometry {
  float affine[12];
  double disp_min = 0, disp_max = 0;
};

absl::StatusOr<WindowGeometry> WindowGeometryFor(const Mat4& t, const GridSpace& fixed_space,
                                                 const GridSpace& moving_space, const NDArray& u,
                                                 const Stream& stream) {
  WindowGeometry g;
  TESSERA_ASSIGN_OR_RETURN(Affine12 a, SamplerAffineFromPhysical(t, fixed_space, moving_space));
  for (int i = 0; i < 12; ++i) g.affine[i] = static_cast<float>(a[i]);
  if (!u.empty()) {
    const Stream cpu = Stream::Cpu();
    TESSERA_ASSIGN_OR_RETURN(ArrayStats stats, ComputeArrayStats(u, StreamFor(u, stream, cpu)));
    g.disp_min = stats.min;
    g.disp_max = stats.max;
  }
  return g;
}

// The shard layouts of `level` (its fixed image and u set), its sampler
// affine and the range of its current field (the moving windows).
absl::Status LayOut(Level& level, int shards, int64_t halo, const Mat4& t, const GridSpace& fixed_space,
                    const GridSpace& moving_space, const Stream& stream) {
  level.dims = DimsOf(level.fixed.data);
  level.moving_dims = DimsOf(level.moving.data);
  TESSERA_ASSIGN_OR_RETURN(level.layouts, ShardLayouts(level.dims, shards, halo));
  TESSERA_ASSIGN_OR_RETURN(const WindowGeometry g, WindowGeometryFor(t, fixed_space, moving_space, level.u, stream));
  std::copy(g.affine, g.affine + 12, level.affine);
  level.disp_min = g.disp_min;
  level.disp_max = g.disp_max;
  return absl::OkStatus();
}

// PlannedWindowSlices for a laid-out level (its affine and field range).
int64_t PlannedWindowSlices(const Level& level) {
  return PlannedWindowSlices(level.layouts, level.moving_dims, level.affine, level.disp_min, level.disp_max);
}

// The first half of an iteration over the shards (sample, [MI prepass],
// metric): the loss at the level's field; dL/du left in level.grad.
absl::StatusOr<double> EvaluateLoss(OutOfCoreRunner& runner, Level& level, const GreedyStepOptions& step,
                                    int64_t adam_step) {
  const int ranks = static_cast<int>(level.layouts.size());
  runner.set_step(step);
  StagedGroup sample(ranks);
  TESSERA_RETURN_IF_ERROR(runner.Run(Phase::kSample, level, sample, adam_step).status());
  StagedGroup metric(ranks);
  if (parallel::GreedyMetricNeedsPrepass(step)) {
    StagedGroup prepass(ranks);
    TESSERA_RETURN_IF_ERROR(runner.Run(Phase::kMetricPrepass, level, prepass, adam_step).status());
    metric.Publish(0, prepass.reduced(0));  // the joint histogram over the shards
  }
  TESSERA_ASSIGN_OR_RETURN(double loss, runner.Run(Phase::kMetric, level, metric, adam_step));
  if (!parallel::GreedyMetricNeedsPrepass(step)) {
    TESSERA_ASSIGN_OR_RETURN(loss, parallel::GreedyLossFromReducedSum(step, metric.reduced(0), level.dims));
  }
  return loss;
}

// A level of the output passes: the images, the host field, warped (host:
// the result) and the gradient scratch (resident when the limit allows),
// laid out for `shards`.
absl::StatusOr<Level> OutputLevel(const Stream& stream, const RegistrationOptions& options,
                                  const GreedyStepOptions& step, const Mat4& t, const OutOfCoreLevel& full,
                                  const NDArray& u, int shards, int64_t device_limit_bytes) {
  Level level;
  level.fixed = full.fixed;
  level.moving = full.moving;
  if (!u.empty() && (u.memory_kind() == MemoryKind::kDevice || DimsOf(u).size() != DimsOf(full.fixed.data).size())) {
    return absl::InvalidArgumentError(absl::StrCat("the out-of-core output passes take a host field on the fixed grid, got ",
                                                   ShapeToString(u.shape())));
  }
  level.u = u;
  TESSERA_RETURN_IF_ERROR(
      LayOut(level, shards, parallel::GreedyStepHalo(step), t, full.fixed_space, full.moving_space, stream));
  const MemoryKind host_kind = stream.backend() == Backend::kCuda ? MemoryKind::kPinned : MemoryKind::kHost;
  const OutOfCoreResidency resident =
      ChooseResidency(options, level.dims, level.moving_dims, static_cast<int>(level.layouts.size()),
                      device_limit_bytes, PlannedWindowSlices(level));
  TESSERA_ASSIGN_OR_RETURN(level.warped, NDArray::Allocate({level.dims.nx, level.dims.ny, level.dims.nz},
                                                           DType::kFloat32, host_kind, stream.ordinal()));
  TESSERA_ASSIGN_OR_RETURN(level.grad, NDArray::Allocate({level.dims.nx, level.dims.ny, level.dims.nz, 3},
                                                         DType::kFloat32,
                                                         resident.grad ? MemoryKindFor(stream) : host_kind,
                                                         stream.ordinal()));
  return level;
}

}  // namespace

double LeanStageStepBoundVoxels(const RegistrationOptions& options) {
  // The sharded step's bound (Adam: its supremum over t), at the stage's
  // largest rate: StepControl starts at deformable_lr_voxels and only moves
  // toward deformable_lr_voxels * deformable_min_step_fraction.
  parallel::GreedyStepOptions step;
  step.rule = options.deformable_step == DeformableStep::kAdam ? parallel::GreedyRule::kAdam
                                                                : parallel::GreedyRule::kNormalized;
  step.lr_voxels = options.deformable_lr_voxels * std::max(1.0, options.deformable_min_step_fraction);
  return parallel::GreedyStepBoundSup(step);
}

int64_t LeanStageDeviceBytes(const RegistrationOptions& options, Dims3 dims, Backend backend) {
  int64_t per_voxel = LeanStageUsesMixedPrecision(options) ? 26 : 36;
  if (options.deformable_step == DeformableStep::kAdam) per_voxel += 24;
  if (options.metric == Metric::kMi) per_voxel += 4;
  return per_voxel * dims.size() +
         ComposeSlabBuffersBytes(dims, ComposeSlabDepth(dims, LeanStageStepBoundVoxels(options))) +
         LeanMetricCpuScratchBytes(options, backend, dims);
}

int64_t LinearLevelDeviceBytes(int64_t fixed_voxels, int64_t moving_voxels) {
  return 32 * fixed_voxels + 4 * moving_voxels;
}

int64_t OutOfCoreHostBytesPerVoxel(const RegistrationOptions& options) {
  return 28 + (options.deformable_step == DeformableStep::kAdam ? 24 : 0);
}

std::string OutOfCoreResidency::ToString() const {
  std::vector<std::string> on, off;
  for (auto [name, here] : {std::make_pair("grad", grad), std::make_pair("u", u), std::make_pair("warped", warped)}) {
    (here ? on : off).push_back(name);
  }
  const auto join = [](const std::vector<std::string>& v) {
    std::string out;
    for (const std::string& x : v) out += (out.empty() ? "" : ", ") + x;
    return out.empty() ? std::string("none") : out;
  };
  return absl::StrFormat("resident %s (%.2f GB), host %s (%.2f GB)", join(on), device_bytes / 1e9, join(off),
                         host_bytes / 1e9);
}

OutOfCoreResidency ChooseResidency(const RegistrationOptions& options, Dims3 fixed, Dims3 moving, int shards,
                                   int64_t limit_bytes, int64_t window_slices) {
  const int64_t n = fixed.size();
  OutOfCoreResidency r;
  int64_t used = OutOfCoreWorkingSetBytes(options, fixed, moving, shards, window_slices);
  // u arrives from the coarser level (1/8 of its size) and is upsampled where it lives.
  for (auto [flag, bytes, transient] : {std::make_tuple(&r.grad, 12 * n, int64_t{0}),
                                        std::make_tuple(&r.u, 12 * n, 12 * n / 8),
                                        std::make_tuple(&r.warped, 4 * n, int64_t{0})}) {
    if (limit_bytes > 0 && used + bytes + transient <= limit_bytes) {
      *flag = true;
      used += bytes;
      r.device_bytes += bytes;
    } else {
      r.host_bytes += bytes;
    }
  }
  if (options.deformable_step == DeformableStep::kAdam) r.host_bytes += 24 * n;
  return r;
}

absl::Status ConvertSlab(const SlabImage& image, int64_t offset, int64_t n, float* out) {
  if (image.data.memory_kind() == MemoryKind::kDevice) {
    return absl::InvalidArgumentError("ConvertSlab reads host images; this one is in device memory");
  }
  if (offset < 0 || n < 0 || offset + n > image.data.num_elements()) {
    return absl::InvalidArgumentError(absl::StrCat("ConvertSlab: values [", offset, ", ", offset + n,
                                                   ") outside an image of ", image.data.num_elements()));
  }
  const float low = image.low, scale = image.scale;
  const bool normalize = image.normalize;
  bool known = false;
  known = VisitDType(image.data.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* src = image.data.data<T>() + offset;
    ParallelFor(n, [&](int64_t b, int64_t e, int) {
      if (normalize) {
        // host_setup.cc's arithmetic: the float value, then (p - lo) * scale clamped.
        for (int64_t i = b; i < e; ++i) out[i] = std::clamp((static_cast<float>(src[i]) - low) * scale, 0.f, 1.f);
      } else {
        for (int64_t i = b; i < e; ++i) out[i] = static_cast<float>(src[i]);
      }
    });
  });
  if (!known) return absl::InvalidArgumentError("ConvertSlab: the image has no element type");
  return absl::OkStatus();
}

int64_t PlannedWindowSlices(Dims3 fixed, Dims3 moving, int shards, int64_t halo, const float affine[12],
                            double disp_min, double disp_max) {
  auto layouts = ShardLayouts(fixed, shards, halo);
  if (!layouts.ok()) return moving.nz;  // no layout: the whole image
  return PlannedWindowSlices(*layouts, moving, affine, disp_min, disp_max);
}

int64_t OutOfCoreWorkingSetBytes(const RegistrationOptions& options, Dims3 fixed, Dims3 moving, int shards,
                                 int64_t window_slices) {
  auto step = OutOfCoreStepOptions(options);
  const int64_t halo = step.ok() ? parallel::GreedyStepHalo(*step) : 0;
  const int64_t own = (fixed.nz + shards - 1) / shards;
  const int64_t local_nz = std::min(fixed.nz, own + (shards > 1 ? 2 * halo : 0));
  const int64_t slab = fixed.nx * fixed.ny * local_nz;
  // The moving window: the moving slices of a shard, plus room for the field and the affine's tilt.
  const int64_t estimate = (moving.nz + shards - 1) / shards + 2 * halo + 8;
  const int64_t window = moving.nx * moving.ny * std::min<int64_t>(moving.nz, window_slices >= 0 ? window_slices : estimate);
  const int64_t per_set = SlabBytesPerVoxel(options) * slab + ComposeScratchBytes(fixed, local_nz, halo) + 4 * window;
  // + Gaussian smoothing's scratch (one component of a slab), allocated per
  // call on the compute stream, so one at a time.
  return 2 * per_set + 4 * slab;
}

absl::StatusOr<int> OutOfCoreShards(const RegistrationOptions& options, Dims3 fixed, Dims3 moving,
                                    int64_t budget_bytes, int min_shards) {
  TESSERA_ASSIGN_OR_RETURN(const GreedyStepOptions step, OutOfCoreStepOptions(options));
  const int64_t halo = parallel::GreedyStepHalo(step);
  const int most = ShardsForLevel(std::numeric_limits<int>::max() / 2, fixed.nz, halo);
  // A quarter of the budget leaves the rest to resident arrays (ChooseResidency).
  for (const int64_t room : {budget_bytes / 4, budget_bytes}) {
    for (int h = std::max(2, min_shards); h <= most; ++h) {
      if (OutOfCoreWorkingSetBytes(options, fixed, moving, h) <= room) return h;
    }
  }
  return absl::ResourceExhaustedError(absl::StrFormat(
      "device memory budget of %.2f GB: the out-of-core stage needs %.2f GB even at %d shards of %d slices "
      "(%d-slice halos); raise device_memory_budget_bytes",
      budget_bytes / 1e9, OutOfCoreWorkingSetBytes(options, fixed, moving, most) / 1e9, most,
      static_cast<int>(fixed.nz / std::max(most, 1)), static_cast<int>(halo)));
}

absl::StatusOr<OutOfCoreChoice> ChooseOutOfCore(const RegistrationOptions& options, const Stream& stream,
                                                Dims3 fixed, Dims3 moving) {
  OutOfCoreChoice choice;
  if (options.deformable_model != DeformableModel::kGreedy || options.memory_mode != MemoryMode::kLean) return choice;
  if (options.device_memory_budget_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("device_memory_budget_bytes must be >= 0 (0 = no limit), got ",
                                                   options.device_memory_budget_bytes));
  }
  const int64_t need = LeanStageDeviceBytes(options, fixed, stream.backend());
  int64_t limit = options.device_memory_budget_bytes > 0 ? options.device_memory_budget_bytes
                                                         : std::numeric_limits<int64_t>::max();
  std::string limit_name = absl::StrFormat("the budget of %.2f GB", limit / 1e9);
  if (stream.backend() == Backend::kCuda) {
    auto info = QueryGpuMemory(stream.ordinal());
    if (info.ok() && static_cast<int64_t>(info->free_bytes) < limit) {
      limit = static_cast<int64_t>(info->free_bytes);
      limit_name = absl::StrFormat("the %.2f GB free on GPU %d", limit / 1e9, stream.ordinal());
    }
  }
  const int min_shards = std::max(2, options.shards);
  choice.limit_bytes = limit;
  if (options.force_out_of_core && options.device_memory_budget_bytes == 0) {
    choice.shards = min_shards;
    choice.reason = absl::StrFormat("deformable: out of core on %d shards (forced)", choice.shards);
    return choice;
  }
  if (!options.force_out_of_core && need <= limit) return choice;
  TESSERA_ASSIGN_OR_RETURN(choice.shards, OutOfCoreShards(options, fixed, moving, limit, min_shards));
  choice.reason = absl::StrFormat(
      "deformable: the lean stage needs %.2f GB of device memory at the finest level, %s; out of core on %d shards "
      "(working set %.2f GB, host %.2f GB)",
      need / 1e9, options.force_out_of_core ? "out of core forced" : absl::StrCat("more than ", limit_name),
      choice.shards, OutOfCoreWorkingSetBytes(options, fixed, moving, choice.shards) / 1e9,
      OutOfCoreHostBytesPerVoxel(options) * static_cast<double>(fixed.size()) / 1e9);
  return choice;
}

absl::StatusOr<NDArray> RunOutOfCoreDeformableStage(const Stream& stream, const RegistrationOptions& options,
                                                    const DeformableStageHooks& hooks, const Mat4& t,
                                                    const std::vector<DeformableLevel>& levels, int shards,
                                                    std::vector<std::string>* log, bool result_on_host) {
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());  // device levels are final before they are copied
  std::vector<OutOfCoreLevel> host_levels;
  for (const DeformableLevel& dl : levels) {
    OutOfCoreLevel l;
    l.factor = dl.factor;
    l.fixed_space = dl.fixed_space;
    l.moving_space = dl.moving_space;
    TESSERA_ASSIGN_OR_RETURN(l.fixed, HostImage(dl.fixed, stream));
    TESSERA_ASSIGN_OR_RETURN(l.moving, HostImage(dl.moving, stream));
    host_levels.push_back(std::move(l));
  }
  return RunOutOfCoreDeformableStage(stream, options, hooks, t, host_levels, shards, log, result_on_host,
                                     /*device_limit_bytes=*/0);
}

absl::StatusOr<NDArray> RunOutOfCoreDeformableStage(const Stream& stream, const RegistrationOptions& options,
                                                    const DeformableStageHooks& hooks, const Mat4& t,
                                                    const std::vector<OutOfCoreLevel>& levels, int shards,
                                                    std::vector<std::string>* log, bool result_on_host,
                                                    int64_t device_limit_bytes) {
  if (shards < 1) return absl::InvalidArgumentError(absl::StrCat("out-of-core shards must be >= 1, got ", shards));
  if (options.memory_mode != MemoryMode::kLean || options.deformable_model != DeformableModel::kGreedy) {
    return absl::InvalidArgumentError(absl::StrCat("the out-of-core stage runs the lean greedy stage: memory_mode '",
                                                   OptionName(options.memory_mode), "', deformable_model '",
                                                   OptionName(options.deformable_model), "'"));
  }
  TESSERA_ASSIGN_OR_RETURN(const GreedyStepOptions step_options, OutOfCoreStepOptions(options));
  const bool cuda = stream.backend() == Backend::kCuda;
  const bool adam = step_options.rule == GreedyRule::kAdam;
  const MemoryKind host_kind = cuda ? MemoryKind::kPinned : MemoryKind::kHost;
  const MemoryKind device_kind = MemoryKindFor(stream);
  const Stream cpu = Stream::Cpu();
  const int64_t halo = parallel::GreedyStepHalo(step_options);
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());  // the levels are final before other streams read them
  // The stage's own device memory (also charged to the registration's tracker).
  const auto stage_memory = std::make_shared<DeviceMemoryTracker>(CurrentDeviceMemoryTracker());
  ScopedDeviceMemoryCharge charge(stage_memory);
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<OutOfCoreRunner> runner_owner, MakeRunner(stream, step_options));
  OutOfCoreRunner& runner = *runner_owner;
  NDArray u, m, v;  // whole fields between levels (u resident or host; m, v host)
  int64_t adam_step = 0;
  for (size_t si = 0; si < levels.size(); ++si) {
    const OutOfCoreLevel& dl = levels[si];
    Level level;
    level.fixed = dl.fixed;
    level.moving = dl.moving;
    const Dims3 dims = DimsOf(level.fixed.data);
    const Shape field_shape = {dims.nx, dims.ny, dims.nz, 3};
    // The moving windows this level needs, from its affine and the coarser
    // level's field (normalised units keep its range across levels).
    TESSERA_ASSIGN_OR_RETURN(const WindowGeometry plan,
                             WindowGeometryFor(t, dl.fixed_space, dl.moving_space, u, stream));
    const Dims3 moving_dims = DimsOf(level.moving.data);
    const auto window_for = [&](int h) {
      return PlannedWindowSlices(dims, moving_dims, h, halo, plan.affine, plan.disp_min, plan.disp_max);
    };
    // A window wider than the shard count was planned for (a tilted affine,
    // a large field) could outgrow the limit: thinner shards, while the
    // halos allow them.
    int level_shards = shards;
    while (device_limit_bytes > 0 &&
           OutOfCoreWorkingSetBytes(options, dims, moving_dims, ShardsForLevel(level_shards, dims.nz, halo),
                                    window_for(level_shards)) > device_limit_bytes &&
           ShardsForLevel(level_shards + 1, dims.nz, halo) > ShardsForLevel(level_shards, dims.nz, halo)) {
      ++level_shards;
    }
    const int ranks = ShardsForLevel(level_shards, dims.nz, halo);
    const int64_t window_slices = window_for(level_shards);
    const OutOfCoreResidency resident =
        ChooseResidency(options, dims, moving_dims, ranks, device_limit_bytes, window_slices);
    const auto alloc = [&](const Shape& shape, bool on_device) {
      return NDArray::Allocate(shape, DType::kFloat32, on_device ? device_kind : host_kind, stream.ordinal());
    };
    std::vector<std::pair<NDArray*, bool>> fields = {{&u, resident.u}};
    if (adam) fields = {{&u, resident.u}, {&m, false}, {&v, false}};
    for (auto [a, on_device] : fields) {
      const MemoryKind want = on_device ? device_kind : host_kind;
      if (a->empty()) {
        TESSERA_ASSIGN_OR_RETURN(*a, alloc(field_shape, on_device));
        TESSERA_RETURN_IF_ERROR(FillZero(*a, StreamFor(*a, stream, cpu)));
        continue;
      }
      if (a->shape() != field_shape) {
        // Normalised units do not change with resolution. Upsampled where the
        // coarse field lives when the fine one fits there too (no host
        // transient of the coarse field), then moved.
        const bool coarse_on_device = a->memory_kind() == MemoryKind::kDevice;
        const bool fits = !coarse_on_device || on_device ||
                          12 * (dims.size() + DimsOf(*a).size()) +
                                  OutOfCoreWorkingSetBytes(options, dims, moving_dims, ranks, window_slices) <=
                              device_limit_bytes;
        if (!fits) {
          TESSERA_ASSIGN_OR_RETURN(*a, a->CopyTo(want, stream, stream.ordinal()));
          TESSERA_RETURN_IF_ERROR(stream.Synchronize());
        }
        TESSERA_ASSIGN_OR_RETURN(NDArray upsampled, alloc(field_shape, a->memory_kind() == MemoryKind::kDevice));
        TESSERA_RETURN_IF_ERROR(UpsampleDisplacement(*a, &upsampled, DisplacementUnits::kNormalized, StreamFor(*a, stream, cpu)));
        *a = std::move(upsampled);
      }
      if ((a->memory_kind() == MemoryKind::kDevice) != (want == MemoryKind::kDevice)) {
        TESSERA_ASSIGN_OR_RETURN(*a, a->CopyTo(want, stream, stream.ordinal()));
      }
    }
    TESSERA_RETURN_IF_ERROR(stream.Synchronize());  // the fields are final before the copy streams read them
    const int max_it = PerScale(options.deformable_iterations, si);
    if (max_it <= 0) continue;
    const absl::Time start = absl::Now();
    level.u = u;
    level.m = m;
    level.v = v;
    TESSERA_RETURN_IF_ERROR(LayOut(level, level_shards, halo, t, dl.fixed_space, dl.moving_space, stream));
    if (static_cast<int>(level.layouts.size()) != ranks) return absl::InternalError("out-of-core shard count changed");
    TESSERA_ASSIGN_OR_RETURN(level.warped, alloc({level.dims.nx, level.dims.ny, level.dims.nz}, resident.warped));
    TESSERA_ASSIGN_OR_RETURN(level.grad, alloc(field_shape, resident.grad));
    TESSERA_RETURN_IF_ERROR(runner.Allocate(level));

    // DeformablePlateauStop(options, false, finest, max_it), as the sharded stage it reproduces.
    PlateauStop stop = DeformablePlateauStop(options, /*jitter=*/false, si + 1 == levels.size(), max_it);
    StepControl control(options.deformable_lr_voxels, options.deformable_halve_after,
                        options.deformable_min_step_fraction);
    GreedyStepOptions update_step = step_options;
    int it = 0;
    for (it = 1; it <= max_it; ++it) {
      if (hooks.check_cancelled) TESSERA_RETURN_IF_ERROR(hooks.check_cancelled());
      TESSERA_ASSIGN_OR_RETURN(const double loss, EvaluateLoss(runner, level, step_options, adam_step));
      stop.Update(loss);
      update_step.lr_voxels = control.Update(loss);
      if (hooks.report) hooks.report(dl.factor, it, max_it, loss);
      if (stop.done()) break;
      runner.set_step(update_step);
      StagedGroup smooth(ranks);
      TESSERA_RETURN_IF_ERROR(runner.Run(Phase::kSmoothGradient, level, smooth, adam_step).status());
      if (!adam) runner.set_largest_grad(smooth.reduced(0).at(0));
      StagedGroup compose(ranks);
      TESSERA_RETURN_IF_ERROR(runner.Run(Phase::kCompose, level, compose, adam_step).status());
      if (adam) ++adam_step;
      StagedGroup field(ranks);
      runner.ResetFieldRange();
      TESSERA_RETURN_IF_ERROR(runner.Run(Phase::kSmoothField, level, field, adam_step).status());
      level.disp_min = runner.field_min();
      level.disp_max = runner.field_max();
    }
    const int iterations = std::min(it, max_it);
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    log->push_back(absl::StrFormat(
        "deformable x%d (lean, out of core: %d shards in turn on one %s, %d-slice halos): %d iterations, loss %.6g -> "
        "%.6g (best %.6g), %.2f s (%.3f s per iteration); device peak %s (working set model %.2f GB, moving "
        "windows of up to %d slices, %d planned); %s",
        dl.factor, ranks, cuda ? "gpu" : "cpu (host buffers stand in for device memory)", static_cast<int>(halo),
        iterations, stop.first(), stop.last(), stop.best(), seconds, seconds / std::max(iterations, 1),
        cuda ? absl::StrFormat("%.2f GB", stage_memory->peak_bytes() / 1e9) : std::string("n/a on the cpu"),
        OutOfCoreWorkingSetBytes(options, level.dims, level.moving_dims, ranks, window_slices) / 1e9,
        static_cast<int>(runner.window_voxels() / std::max<int64_t>(1, level.moving_dims.nx * level.moving_dims.ny)),
        static_cast<int>(window_slices), resident.ToString()));
  }
  if (u.empty()) return u;
  if (result_on_host && u.memory_kind() == MemoryKind::kDevice) {
    TESSERA_ASSIGN_OR_RETURN(NDArray host, u.CopyTo(host_kind, stream, stream.ordinal()));
    TESSERA_RETURN_IF_ERROR(stream.Synchronize());
    return host;
  }
  if (result_on_host || u.memory_kind() == device_kind) return u;
  return u.CopyTo(device_kind, stream, stream.ordinal());
}

absl::StatusOr<double> OutOfCoreLoss(const Stream& stream, const RegistrationOptions& options, const Mat4& t,
                                     const OutOfCoreLevel& full, const NDArray& u, int shards,
                                     int64_t device_limit_bytes) {
  TESSERA_ASSIGN_OR_RETURN(const GreedyStepOptions step, OutOfCoreStepOptions(options));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  TESSERA_ASSIGN_OR_RETURN(Level level, OutputLevel(stream, options, step, t, full, u, shards, device_limit_bytes));
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<OutOfCoreRunner> runner, MakeRunner(stream, step));
  TESSERA_RETURN_IF_ERROR(runner->Allocate(level));
  return EvaluateLoss(*runner, level, step, 0);
}

absl::StatusOr<OutOfCoreOutputs> RunOutOfCoreOutputs(const Stream& stream, const RegistrationOptions& options,
                                                     const Mat4& t, const OutOfCoreLevel& full,
                                                     const SlabImage& intensities, const NDArray& u, int shards,
                                                     int64_t device_limit_bytes) {
  if (intensities.data.memory_kind() == MemoryKind::kDevice ||
      intensities.data.num_elements() != full.moving.data.num_elements()) {
    return absl::InvalidArgumentError(absl::StrCat("the warped intensities must be a host array on the moving "
                                                   "grid, got ", ShapeToString(intensities.data.shape())));
  }
  TESSERA_ASSIGN_OR_RETURN(const GreedyStepOptions step, OutOfCoreStepOptions(options));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  TESSERA_ASSIGN_OR_RETURN(Level level, OutputLevel(stream, options, step, t, full, u, shards, device_limit_bytes));
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<OutOfCoreRunner> runner, MakeRunner(stream, step));
  TESSERA_RETURN_IF_ERROR(runner->Allocate(level));
  const int ranks = static_cast<int>(level.layouts.size());
  OutOfCoreOutputs out;
  TESSERA_ASSIGN_OR_RETURN(out.loss, EvaluateLoss(*runner, level, step, 0));
  level.grad = NDArray();
  // The warp of the original intensities (the same windows: same grid, same field).
  level.moving = intensities;
  StagedGroup warp(ranks);
  TESSERA_RETURN_IF_ERROR(runner->Run(Phase::kWarp, level, warp, 0).status());
  out.warped = std::move(level.warped);
  if (!u.empty()) {
    StagedGroup jacobian(ranks);
    TESSERA_RETURN_IF_ERROR(runner->Run(Phase::kJacobian, level, jacobian, 0).status());
    out.jacobian.voxels = static_cast<int64_t>(jacobian.reduced(0).at(0));
    out.jacobian.nonpositive = static_cast<int64_t>(jacobian.reduced(1).at(0));
    out.jacobian.min_det = jacobian.reduced(2).at(0);
    out.jacobian.max_det = jacobian.reduced(3).at(0);
  }
  return out;
}

}  // namespace tessera::registration
