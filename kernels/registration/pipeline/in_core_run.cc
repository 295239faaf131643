// The in-core run: the normalised images and the whole pyramid in the
// stream's memory, one LevelEngine over every level, the deformable stage
// (lean, standard, sharded or B-spline: LevelEngine::RunDeformableStage)
// and the outputs at full resolution on the stream.
#include <algorithm>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/memory_kind_for.h"
#include "common/status.h"
#include "kernels/registration/gaussian_smooth.h"
#include "kernels/registration/grid_sampler.h"
#include "kernels/registration/jacobian.h"
#include "kernels/registration/pipeline/deformable_stage.h"
#include "kernels/registration/pipeline/host_setup.h"
#include "kernels/registration/pipeline/level_engine.h"
#include "kernels/registration/pipeline/metric_mask.h"
#include "kernels/registration/pipeline/noise_estimate.h"
#include "kernels/registration/pipeline/per_scale.h"
#include "kernels/registration/pipeline/run_phases.h"
#include "kernels/registration/pipeline/sharded_deformable_stage.h"
#include "kernels/registration/pipeline/space.h"

namespace tessera::registration::internal {
namespace {

// RegistrationOptions::full_finest_deformable: on the CPU, a greedy stage's
// finest level of a large pyramid (the next coarser level holds at least
// kCapFinestDeformableCoarserVoxels voxels) runs at most
// kCappedFinestDeformableIterations iterations.
void CapFinestDeformable(const Stream& stream, const std::vector<Level>& levels, RegistrationOptions* options,
                         std::vector<std::string>* log) {
  const size_t n = levels.size();
  const bool deformable =
      std::find(options->stages.begin(), options->stages.end(), Stage::kDeformable) != options->stages.end();
  if (!deformable || stream.backend() != Backend::kCpu || options->full_finest_deformable ||
      options->deformable_model != DeformableModel::kGreedy || n < 2) {
    return;
  }
  const auto& coarser = levels[n - 2].fixed_space.dims;
  const int finest = PerScale(options->deformable_iterations, n - 1);
  if (coarser[0] * coarser[1] * coarser[2] < kCapFinestDeformableCoarserVoxels ||
      finest <= kCappedFinestDeformableIterations) {
    return;
  }
  std::vector<int> budget(n);
  for (size_t si = 0; si < n; ++si) budget[si] = PerScale(options->deformable_iterations, si);
  budget.back() = kCappedFinestDeformableIterations;
  options->deformable_iterations = std::move(budget);
  log->push_back(absl::StrFormat(
      "deformable x%d: at most %d iterations (the CPU's finest level of a large pyramid; full_finest_deformable "
      "runs %d)",
      levels.back().factor, kCappedFinestDeformableIterations, finest));
}

class InCoreRun final : public RunPhases {
 public:
  explicit InCoreRun(const RunInputs& in) : in_(in), kind_(MemoryKindFor(in.stream)) {}

  absl::StatusOr<LinearTransform> SetUp(RegistrationResult* result) override {
    const Volume& fixed = in_.fixed;
    const Volume& moving = in_.moving;
    const Stream& stream = in_.stream;
    const RegistrationOptions& requested = in_.plan.options;
    HostPrepared local;
    if (in_.prepared == nullptr) {
      TESSERA_ASSIGN_OR_RETURN(local, PrepareHostInputs(fixed, moving, requested));
    }
    HostPrepared& prepared = in_.prepared != nullptr ? *in_.prepared : local;
    NDArray fixed_norm = std::move(prepared.fixed_norm);
    NDArray moving_norm = std::move(prepared.moving_norm);
    fixed_space_ = SpaceOf(fixed);
    moving_space_ = SpaceOf(moving);
    std::vector<std::string> setup_log;
    options_ = requested;
    options_.smooth_warp_sigma =
        ResolveWarpSigma(requested, prepared.fixed_noise, prepared.moving_noise, &setup_log);

    // Pyramid in stream memory; the full-resolution level is kept for output.
    full_.factor = 1;
    full_.fixed_space = fixed_space_;
    full_.moving_space = moving_space_;
    // Centre-of-mass initialisation: rotate about the fixed image's centre of
    // mass, translate it onto the moving image's.
    // A given initial transform replaces it (issue 34), still centred on
    // the fixed image's centre of mass (the rigid stage rotates about it).
    LinearTransform initial;
    initial.center = prepared.fixed_com;
    if (options_.initial_transform) {
      initial = GivenInitialTransform(*options_.initial_transform, initial.center);
    } else if (options_.init == Init::kCentreOfMass) {
      for (int d = 0; d < 3; ++d) initial.translation[d] = prepared.moving_com[d] - initial.center[d];
    }
    // The host copies end here (on the CPU backend they become the level).
    if (kind_ == MemoryKind::kHost) {
      full_.fixed = std::move(fixed_norm);
      full_.moving = std::move(moving_norm);
    } else {
      TESSERA_ASSIGN_OR_RETURN(full_.fixed, fixed_norm.CopyTo(kind_, stream, stream.ordinal()));
      TESSERA_ASSIGN_OR_RETURN(full_.moving, moving_norm.CopyTo(kind_, stream, stream.ordinal()));
      TESSERA_RETURN_IF_ERROR(stream.Synchronize());
      fixed_norm = NDArray();
      moving_norm = NDArray();
    }
    for (int factor : options_.scales) {
      if (factor == 1) {
        levels_.push_back(full_);
        continue;
      }
      Level level;
      level.factor = factor;
      for (auto [image, out, space, out_space] :
           {std::tuple<const NDArray*, NDArray*, const GridSpace*, GridSpace*>{&full_.fixed, &level.fixed,
                                                                               &fixed_space_, &level.fixed_space},
            {&full_.moving, &level.moving, &moving_space_, &level.moving_space}}) {
        const Shape shape = DownsampledShape(image->shape(), factor);
        TESSERA_ASSIGN_OR_RETURN(*out, NDArray::Allocate(shape, DType::kFloat32, kind_, stream.ordinal()));
        TESSERA_RETURN_IF_ERROR(DownsampleVolume(*image, out, stream));
        *out_space = DownsampledSpace(*space, shape);
      }
      levels_.push_back(std::move(level));
    }

    CapFinestDeformable(stream, levels_, &options_, &setup_log);
    TESSERA_ASSIGN_OR_RETURN(metric_, SimilarityMetric::Create(options_.metric, options_.metric_options, stream));
    engine_ = std::make_unique<LevelEngine>(stream, options_, metric_.get(), in_.progress, in_.cancel, in_.deadline);
    TESSERA_RETURN_IF_ERROR(engine_->Init());

    TESSERA_ASSIGN_OR_RETURN(double overlap, engine_->OverlapMax(levels_.front(), initial.ToMat4()));
    TESSERA_RETURN_IF_ERROR(CheckOverlap(overlap, options_));
    TESSERA_ASSIGN_OR_RETURN(result->initial_loss, engine_->LinearLoss(full_, initial.ToMat4(), nullptr));
    engine_->Report("init", 1, 0, 0, result->initial_loss);
    result->log.push_back(InitLogLine(options_, initial, result->initial_loss));
    for (std::string& line : setup_log) result->log.push_back(std::move(line));
    if (HasMasks(options_)) result->log.push_back(MasksLogLine(options_));
    return initial;
  }

  absl::StatusOr<LinearTransform> RunLinearStage(TransformModel model, const char* stage,
                                                 const LinearTransform& current, const std::vector<int>& iterations,
                                                 std::vector<std::string>* log) override {
    return engine_->RunLinearStage(model, stage, current, levels_, iterations, log);
  }

  absl::StatusOr<NDArray> RunDeformableStage(const Mat4& affine_ras, std::vector<std::string>* log) override {
    const Stream& stream = in_.stream;
    // Mixed precision: the stage sees fp16 levels and no float copy stays
    // alive (full_ shares its buffers with the factor-1 level).
    const bool mixed = LeanStageUsesMixedPrecision(options_);
    // MI and LNCC: the fixed levels blurred as the interpolation blurs the
    // warped image (MetricOptions::fixed_blur_voxels; in place: the linear
    // stages are done, and the final loss compares the same images), in float
    // before a mixed-precision stage's fp16 copy.
    const double blur = FixedBlurVoxels(options_.metric, options_.metric_options);
    if (blur > 0) {
      for (Level& l : levels_) TESSERA_RETURN_IF_ERROR(GaussianSmooth(l.fixed, &l.fixed, {blur, blur, blur}, stream));
      log->push_back(absl::StrFormat("deformable: fixed image blurred by sigma %.3g voxels per level (%s)", blur,
                                     options_.metric == Metric::kMi ? "MI" : "LNCC"));
    }
    if (mixed) {
      for (Level& l : levels_) TESSERA_RETURN_IF_ERROR(ConvertLevelToHalf(l, stream));
      for (const Level& l : levels_) {
        if (l.factor == 1) {
          full_.fixed = NDArray();
          full_.moving = NDArray();
        }
      }
    }
    if (DeformableStageJitters(options_) && options_.deformable_model != DeformableModel::kBspline &&
        (options_.shards > 1 || options_.process_group != nullptr) && !ShardedStageJitters(options_, stream)) {
      log->push_back("deformable: the sampling grid is not jittered (sharded stage; metric.h)");
    }
    TESSERA_ASSIGN_OR_RETURN(NDArray u, engine_->RunDeformableStage(affine_ras, levels_, log));
    if (mixed) {
      // The output phase needs the full-resolution float images back; the
      // coarser levels are done.
      for (Level& l : levels_) {
        if (l.factor == 1 && full_.fixed.empty()) {
          TESSERA_RETURN_IF_ERROR(ConvertLevelToFloat(l, stream));
          full_.fixed = l.fixed;
          full_.moving = l.moving;
        }
      }
      levels_.clear();
    }
    if (u.dim(0) == full_.fixed.dim(0) && u.dim(1) == full_.fixed.dim(1) && u.dim(2) == full_.fixed.dim(2)) return u;
    TESSERA_ASSIGN_OR_RETURN(NDArray u_full,
                             NDArray::Allocate({full_.fixed.dim(0), full_.fixed.dim(1), full_.fixed.dim(2), 3},
                                               DType::kFloat32, kind_, stream.ordinal()));
    TESSERA_RETURN_IF_ERROR(UpsampleDisplacement(u, &u_full, DisplacementUnits::kNormalized, stream));
    return u_full;
  }

  absl::Status Output(NDArray u_full, RegistrationResult* result) override {
    const Stream& stream = in_.stream;
    const Volume& moving = in_.moving;
    // Final loss at full resolution, then the warped original intensities.
    TESSERA_ASSIGN_OR_RETURN(Affine12 a_full, SamplerAffineFromPhysical(result->affine_ras, fixed_space_, moving_space_));
    TESSERA_RETURN_IF_ERROR(engine_->UploadAffine(a_full));
    TESSERA_RETURN_IF_ERROR(engine_->EnsureImageBuffers(full_, /*with_grad=*/false));
    GridSampleArgs args = engine_->Args(full_, u_full.empty() ? nullptr : &u_full);
    TESSERA_RETURN_IF_ERROR(GridSample(stream, args, engine_->warped().data<float>(), options_.sampler));
    TESSERA_ASSIGN_OR_RETURN(result->final_loss, engine_->EvaluateMasked(full_, args, full_.fixed, nullptr));
    // The normalised images are done: free them (and the pyramid) before the
    // original moving image is uploaded.
    levels_.clear();
    full_.fixed = NDArray();
    full_.moving = NDArray();

    if (!u_full.empty()) {
      TESSERA_ASSIGN_OR_RETURN(result->jacobian,
                               JacobianDeterminant(u_full, nullptr, stream, DisplacementUnits::kNormalized));
      // v = L^-1 u: normalised sampler displacement -> RAS mm before T.
      TESSERA_ASSIGN_OR_RETURN(Mat3 l, PhysicalToNormalizedDisplacement(result->affine_ras, moving_space_));
      TESSERA_ASSIGN_OR_RETURN(Mat3 l_inv, Invert3(l));
      // In place on the stream's device, then one copy out: no second
      // field-sized host buffer (45 GB at 1550^3).
      TESSERA_RETURN_IF_ERROR(MixComponents(u_full, l_inv, stream));
      TESSERA_ASSIGN_OR_RETURN(result->displacement_ras, u_full.CopyTo(MemoryKind::kHost, stream));
      // The warped image is sampled with u = L v from the exported v (issue
      // 34): what the written 0Warp/0GenericAffine give, so apply-transforms
      // (apply_transforms.h) reproduces it bit for bit on either backend
      // (MixComponents is the same arithmetic on both). L L^-1 u differs
      // from u by float rounding only.
      TESSERA_RETURN_IF_ERROR(MixComponents(u_full, l, stream));
    }
    NDArray moving_f32;  // only for non-float inputs: float ones are copied to the stream directly
    if (moving.data.dtype() != DType::kFloat32) {
      TESSERA_ASSIGN_OR_RETURN(moving_f32, moving.data.AsType(DType::kFloat32));
    }
    const NDArray& moving_float = moving.data.dtype() == DType::kFloat32 ? moving.data : moving_f32;
    TESSERA_ASSIGN_OR_RETURN(NDArray moving_dev, moving_float.CopyTo(kind_, stream, stream.ordinal()));
    moving_f32 = NDArray();
    args.image = moving_dev.data<float>();
    TESSERA_RETURN_IF_ERROR(GridSample(stream, args, engine_->warped().data<float>(), options_.sampler));
    TESSERA_RETURN_IF_ERROR(stream.Synchronize());
    moving_dev = NDArray();
    u_full = NDArray();
    TESSERA_ASSIGN_OR_RETURN(result->warped.data, engine_->warped().CopyTo(MemoryKind::kHost, stream));
    result->warped.geometry = in_.fixed.geometry;
    result->warped.description = "tessera warped moving image";
    return stream.Synchronize();
  }

  void Report(const std::string& stage, int scale, int iteration, int max_iterations, double loss) override {
    engine_->Report(stage, scale, iteration, max_iterations, loss);
  }

 private:
  const RunInputs in_;
  const MemoryKind kind_;
  RegistrationOptions options_;  // the plan's, smooth_warp_sigma resolved
  GridSpace fixed_space_, moving_space_;
  Level full_;                  // the full-resolution level (shares its buffers with levels_' factor-1 entry)
  std::vector<Level> levels_;   // coarse to fine
  std::unique_ptr<SimilarityMetric> metric_;
  std::unique_ptr<LevelEngine> engine_;
};

}  // namespace

std::unique_ptr<RunPhases> InCorePhases(const RunInputs& in) { return std::make_unique<InCoreRun>(in); }

}  // namespace tessera::registration::internal
