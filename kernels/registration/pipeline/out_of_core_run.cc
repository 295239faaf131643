// Issue 13: the whole run within OutOfCoreChoice::limit_bytes of device memory.
//   set-up    each image normalised into a temporary host array for its
//             centre of mass and pyramid (host memory, pinned on CUDA; built
//             on the device one image at a time when that fits:
//             DownsampleToHost), then dropped: the full-resolution passes read
//             the caller's volumes through normalising SlabImages (any dtype);
//             the initial loss while the device is still empty;
//   linear    the levels whose engine fits (LinearLevelDeviceBytes, coarse to
//             fine, together) on the device, the others on the host with the
//             CPU backend;
//   deformable out of core (out_of_core_stage.h): the whole arrays that fit
//             the device beside the working set stay resident, the rest
//             (at 1800^3 in 120 GiB: the field) on the host;
//   output    the full-resolution loss, warp and Jacobian slab by slab
//             (RunOutOfCoreOutputs); the field's RAS conversion on the host.
// On the CPU backend every phase runs the same code on host memory, and the
// result equals the in-core run with the same shards (the tests).
#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/buffer.h"
#include "common/status.h"
#include "kernels/registration/pipeline/deformable_stage.h"
#include "kernels/registration/pipeline/host_setup.h"
#include "kernels/registration/pipeline/level_engine.h"
#include "kernels/registration/pipeline/noise_estimate.h"
#include "kernels/registration/pipeline/out_of_core_stage.h"
#include "kernels/registration/pipeline/per_scale.h"
#include "kernels/registration/pipeline/run_phases.h"
#include "kernels/registration/pipeline/space.h"

namespace tessera::registration::internal {
namespace {

// One image's pyramid levels (factors > 1) into host arrays `outs`: on the
// device when the image, its blurred copy and the outputs fit `limit_bytes`
// (the in-core path's kernels, one image at a time), else on the host.
// Returns where it ran.
absl::StatusOr<const char*> DownsampleToHost(const NDArray& full, const std::vector<std::pair<int, NDArray*>>& outs,
                                             const Stream& stream, int64_t limit_bytes) {
  int64_t need = 8 * full.num_elements();
  for (const auto& [factor, out] : outs) need += 4 * out->num_elements();
  if (stream.backend() != Backend::kCuda || need > limit_bytes) {
    for (const auto& [factor, out] : outs) TESSERA_RETURN_IF_ERROR(DownsampleVolume(full, out, Stream::Cpu()));
    return "host";
  }
  TESSERA_ASSIGN_OR_RETURN(NDArray full_dev, full.CopyTo(MemoryKind::kDevice, stream, stream.ordinal()));
  for (const auto& [factor, out] : outs) {
    TESSERA_ASSIGN_OR_RETURN(NDArray out_dev, NDArray::Allocate(out->shape(), DType::kFloat32, MemoryKind::kDevice,
                                                                stream.ordinal()));
    TESSERA_RETURN_IF_ERROR(DownsampleVolume(full_dev, &out_dev, stream));
    TESSERA_RETURN_IF_ERROR(CopyBytes(out->raw_data(), out->memory_kind(), out_dev.raw_data(), MemoryKind::kDevice,
                                      out->num_elements() * sizeof(float), stream));
    TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  }
  return "gpu";
}

class OutOfCoreRun final : public RunPhases {
 public:
  OutOfCoreRun(const RunInputs& in, const OutOfCoreChoice& choice)
      : in_(in),
        cuda_(in.stream.backend() == Backend::kCuda),
        host_kind_(cuda_ ? MemoryKind::kPinned : MemoryKind::kHost),
        limit_(choice.limit_bytes),
        shards_(choice.shards),
        reason_(choice.reason),
        tracker_(CurrentDeviceMemoryTracker()) {}

  absl::StatusOr<LinearTransform> SetUp(RegistrationResult* result) override {
    const Volume& fixed = in_.fixed;
    const Volume& moving = in_.moving;
    const Stream& stream = in_.stream;
    const RegistrationOptions& requested = in_.plan.options;
    // Its smooth_warp_sigma is resolved once the images are normalised (below).
    options_ = requested;
    result->log.push_back(reason_);
    if (FixedBlurVoxels(options_.metric, options_.metric_options) > 0 && in_.plan.deformable) {
      result->log.push_back(absl::StrFormat("deformable: the fixed image is not blurred for %s in a bounded run (metric.h)",
                                            options_.metric == Metric::kMi ? "MI" : "LNCC"));
    }
    if (DeformableStageJitters(options_) && in_.plan.deformable) {
      result->log.push_back("deformable: the sampling grid is not jittered in a bounded run (metric.h)");
    }

    fixed_space_ = SpaceOf(fixed);
    moving_space_ = SpaceOf(moving);
    // The linear stages read the full-resolution level only when they iterate
    // there (or it is the only level): then its normalised float images are
    // kept; otherwise each exists only while its centre of mass and pyramid are
    // made, and the stages read the caller's volumes through SlabImages.
    bool linear_full = options_.scales.front() == 1;
    for (size_t si = 0; si < options_.scales.size(); ++si) {
      if (options_.scales[si] != 1) continue;
      linear_full = linear_full || (in_.plan.rigid && PerScale(options_.rigid_iterations, si) > 0) ||
                    (in_.plan.affine && PerScale(options_.affine_iterations, si) > 0);
    }
    levels_.reserve(options_.scales.size());
    for (int factor : options_.scales) {
      Level level;
      level.factor = factor;
      level.fixed_space = fixed_space_;
      level.moving_space = moving_space_;
      if (factor != 1) {
        const Shape fs = DownsampledShape(fixed.data.shape(), factor), ms = DownsampledShape(moving.data.shape(), factor);
        TESSERA_ASSIGN_OR_RETURN(level.fixed, NDArray::Allocate(fs, DType::kFloat32, host_kind_, stream.ordinal()));
        TESSERA_ASSIGN_OR_RETURN(level.moving, NDArray::Allocate(ms, DType::kFloat32, host_kind_, stream.ordinal()));
        level.fixed_space = DownsampledSpace(fixed_space_, fs);
        level.moving_space = DownsampledSpace(moving_space_, ms);
      }
      levels_.push_back(std::move(level));
    }
    LinearTransform initial;
    IntensityMap fixed_map, moving_map;
    std::array<double, 3> moving_com{};
    const char* where[2] = {"host", "host"};
    double noise[2] = {0, 0};
    for (int image = 0; image < 2; ++image) {
      const Volume& v = image == 0 ? fixed : moving;
      TESSERA_ASSIGN_OR_RETURN(NDArray norm, NormalizedIntensitiesParallel(v, image == 0 ? "fixed" : "moving",
                                                                           MemoryKind::kHost,
                                                                           image == 0 ? &fixed_map : &moving_map));
      const std::array<double, 3> com = CentreOfMassParallel(norm, v.geometry);
      if (WarpSigmaNeedsNoise(requested)) noise[image] = EstimateNoiseSigma(norm);
      if (image == 0) {
        initial.center = com;
      } else {
        moving_com = com;
      }
      std::vector<std::pair<int, NDArray*>> outs;
      for (Level& l : levels_) {
        if (l.factor == 1 && linear_full) (image == 0 ? l.fixed : l.moving) = norm;
        if (l.factor != 1) outs.push_back({l.factor, image == 0 ? &l.fixed : &l.moving});
      }
      TESSERA_ASSIGN_OR_RETURN(where[image], DownsampleToHost(norm, outs, stream, limit_));
    }
    options_.smooth_warp_sigma = ResolveWarpSigma(requested, noise[0], noise[1], &result->log);
    if (options_.initial_transform) {
      initial = GivenInitialTransform(*options_.initial_transform, initial.center);
    } else if (options_.init == Init::kCentreOfMass) {
      for (int d = 0; d < 3; ++d) initial.translation[d] = moving_com[d] - initial.center[d];
    }
    // The full-resolution level of the out-of-core passes: the caller's
    // volumes, normalised slab by slab.
    full_level_.factor = 1;
    full_level_.fixed_space = fixed_space_;
    full_level_.moving_space = moving_space_;
    full_level_.fixed = SlabImage{fixed.data, fixed_map.low, fixed_map.scale, /*normalize=*/true};
    full_level_.moving = SlabImage{moving.data, moving_map.low, moving_map.scale, /*normalize=*/true};

    // The initial loss first, while the device is empty: its gradient scratch
    // stays resident (on the host it would be the run's host peak).
    TESSERA_ASSIGN_OR_RETURN(result->initial_loss, OutOfCoreLoss(stream, options_, initial.ToMat4(), full_level_,
                                                                 NDArray(), shards_, Room()));

    // The linear stages' levels: on the device coarse to fine while they fit.
    linear_ = levels_;
    on_device_ = levels_.size();
    if (cuda_) {
      int64_t used = 0;
      on_device_ = 0;
      for (Level& l : linear_) {
        if (l.fixed.empty()) break;  // the full level, not read by the linear stages
        used += LinearLevelDeviceBytes(l.fixed.num_elements(), l.moving.num_elements());
        if (used > limit_) break;
        TESSERA_ASSIGN_OR_RETURN(l.fixed, l.fixed.CopyTo(MemoryKind::kDevice, stream, stream.ordinal()));
        TESSERA_ASSIGN_OR_RETURN(l.moving, l.moving.CopyTo(MemoryKind::kDevice, stream, stream.ordinal()));
        ++on_device_;
      }
      TESSERA_RETURN_IF_ERROR(stream.Synchronize());
    }
    const std::string limit_text = limit_ == std::numeric_limits<int64_t>::max()
                                       ? std::string("none (forced)")
                                       : absl::StrFormat("%.2f GB", limit_ / 1e9);
    result->log.push_back(absl::StrFormat(
        "bounded run (device limit %s): pyramid built on the %s (fixed) / %s (moving), host %s; linear stages on "
        "the %s at %d of %d levels%s; output slab by slab on %d shards; full-resolution images read from the "
        "caller's volumes (normalised slab by slab)",
        limit_text, where[0], where[1], cuda_ ? "pinned" : "memory", cuda_ ? "gpu" : "cpu",
        static_cast<int>(on_device_), static_cast<int>(levels_.size()),
        on_device_ < levels_.size() ? ", the finer ones on the host (cpu backend)" : "", shards_));

    TESSERA_ASSIGN_OR_RETURN(metric_, SimilarityMetric::Create(options_.metric, options_.metric_options, stream));
    engine_ = std::make_unique<LevelEngine>(stream, options_, metric_.get(), in_.progress, in_.cancel, in_.deadline);
    TESSERA_RETURN_IF_ERROR(engine_->Init());
    if (on_device_ < levels_.size() && cuda_) {
      TESSERA_ASSIGN_OR_RETURN(host_metric_, SimilarityMetric::Create(options_.metric, options_.metric_options, cpu_));
      host_engine_ =
          std::make_unique<LevelEngine>(cpu_, options_, host_metric_.get(), in_.progress, in_.cancel, in_.deadline);
      host_engine_->KeepFinestLinear();  // a GPU run's schedule (RegistrationOptions::dense_finest_linear)
      TESSERA_RETURN_IF_ERROR(host_engine_->Init());
    }
    LevelEngine& first_engine = on_device_ > 0 ? *engine_ : *host_engine_;
    TESSERA_ASSIGN_OR_RETURN(double overlap, first_engine.OverlapMax(linear_.front(), initial.ToMat4()));
    TESSERA_RETURN_IF_ERROR(CheckOverlap(overlap, options_));
    engine_->Report("init", 1, 0, 0, result->initial_loss);
    result->log.push_back(InitLogLine(options_, initial, result->initial_loss));
    return initial;
  }

  // The device levels on the stream's engine, the rest on the host engine.
  absl::StatusOr<LinearTransform> RunLinearStage(TransformModel model, const char* stage,
                                                 const LinearTransform& current, const std::vector<int>& iterations,
                                                 std::vector<std::string>* log) override {
    TESSERA_ASSIGN_OR_RETURN(LinearTransform t,
                             engine_->RunLinearStage(model, stage, current, linear_, iterations, log, 0, on_device_));
    if (host_engine_ == nullptr) return t;
    return host_engine_->RunLinearStage(model, stage, t, linear_, iterations, log, on_device_);
  }

  absl::StatusOr<NDArray> RunDeformableStage(const Mat4& affine_ras, std::vector<std::string>* log) override {
    EndLinearStages();
    const Stream& stream = in_.stream;
    std::vector<OutOfCoreLevel> lean;
    for (const Level& l : levels_) {
      if (l.factor == 1) {
        lean.push_back(full_level_);
      } else {
        lean.push_back({l.factor, l.fixed_space, l.moving_space, SlabImage{l.fixed}, SlabImage{l.moving}});
      }
    }
    levels_.clear();  // the stage holds the pyramid now
    LevelEngine& engine = *engine_;
    DeformableStageHooks hooks{[&engine] { return engine.CheckCancelled(); },
                               [&engine](int f, int it, int max_it, double loss) {
                                 engine.Report("deformable", f, it, max_it, loss);
                               }};
    TESSERA_ASSIGN_OR_RETURN(NDArray u, RunOutOfCoreDeformableStage(stream, options_, hooks, affine_ras, lean, shards_,
                                                                    log, /*result_on_host=*/true, Room()));
    lean.clear();
    const NDArray& fixed = in_.fixed.data;
    if (u.empty() || DimsOf(u).size() == DimsOf(fixed).size()) return u;
    TESSERA_ASSIGN_OR_RETURN(NDArray up, NDArray::Allocate({fixed.dim(0), fixed.dim(1), fixed.dim(2), 3},
                                                           DType::kFloat32, host_kind_, stream.ordinal()));
    TESSERA_RETURN_IF_ERROR(UpsampleDisplacement(u, &up, DisplacementUnits::kNormalized, cpu_));
    return up;
  }

  absl::Status Output(NDArray u, RegistrationResult* result) override {
    EndLinearStages();
    levels_.clear();
    // As the in-core run (in_core_run.cc): the outputs are computed from
    // u = L (L^-1 u), the field the exported v gives back, in place on the
    // host (no second field-sized buffer), so both residencies warp alike.
    Mat3 l{}, l_inv{};
    if (!u.empty()) {
      TESSERA_ASSIGN_OR_RETURN(l, PhysicalToNormalizedDisplacement(result->affine_ras, moving_space_));
      TESSERA_ASSIGN_OR_RETURN(l_inv, Invert3(l));
      TESSERA_RETURN_IF_ERROR(MixComponents(u, l_inv, cpu_));
      TESSERA_RETURN_IF_ERROR(MixComponents(u, l, cpu_));
    }
    // The warp of the original intensities (any dtype, converted slab by slab).
    TESSERA_ASSIGN_OR_RETURN(OutOfCoreOutputs out,
                             RunOutOfCoreOutputs(in_.stream, options_, result->affine_ras, full_level_,
                                                 SlabImage{in_.moving.data}, u, shards_, Room()));
    result->final_loss = out.loss;
    result->warped.data = std::move(out.warped);
    result->warped.geometry = in_.fixed.geometry;
    result->warped.description = "tessera warped moving image";
    if (!u.empty()) {
      result->jacobian = out.jacobian;
      // v = L^-1 u (RAS mm before T), in place on the host.
      TESSERA_RETURN_IF_ERROR(MixComponents(u, l_inv, cpu_));
      result->displacement_ras = std::move(u);
    }
    return absl::OkStatus();
  }

  void Report(const std::string& stage, int scale, int iteration, int max_iterations, double loss) override {
    engine_->Report(stage, scale, iteration, max_iterations, loss);
  }

 private:
  // Device bytes the run may still take (the limit less what it holds now).
  int64_t Room() const {
    const int64_t held = tracker_ != nullptr ? static_cast<int64_t>(tracker_->current_bytes()) : 0;
    return limit_ == std::numeric_limits<int64_t>::max() ? limit_ : std::max<int64_t>(0, limit_ - held);
  }
  // The linear stages' device buffers and level copies go before the
  // deformable stage (or the output) takes the device.
  void EndLinearStages() {
    engine_->ReleaseBuffers();
    linear_.clear();
    host_engine_.reset();
  }

  const RunInputs in_;
  const Stream cpu_ = Stream::Cpu();  // the host engine's (it keeps a reference)
  const bool cuda_;
  const MemoryKind host_kind_;
  const int64_t limit_;
  const int shards_;
  const std::string reason_;
  const std::shared_ptr<DeviceMemoryTracker> tracker_;
  RegistrationOptions options_;  // the plan's, smooth_warp_sigma resolved
  GridSpace fixed_space_, moving_space_;
  std::vector<Level> levels_;    // the pyramid on the host (the factor-1 level empty unless the linear stages read it)
  std::vector<Level> linear_;    // the linear stages' levels: [0, on_device_) on the device
  size_t on_device_ = 0;
  OutOfCoreLevel full_level_;
  std::unique_ptr<SimilarityMetric> metric_, host_metric_;
  std::unique_ptr<LevelEngine> engine_, host_engine_;  // host_engine_: the levels that do not fit the device
};

}  // namespace

std::unique_ptr<RunPhases> OutOfCorePhases(const RunInputs& in, const OutOfCoreChoice& choice) {
  return std::make_unique<OutOfCoreRun>(in, choice);
}

}  // namespace tessera::registration::internal
