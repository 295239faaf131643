// The registrar's per-level machinery, shared by its in-core and
// out-of-core runs (run_phases.h): a pyramid level, and the engine that
// runs the linear stages and the in-core deformable loop over levels.
// Internal to the registrar library.
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_LEVEL_ENGINE_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_LEVEL_ENGINE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/array_stats.h"
#include "common/buffer.h"
#include "common/image_preview.h"
#include "common/memory_kind_for.h"
#include "common/status.h"
#include "kernels/registration/pipeline/array_helpers.h"
#include "kernels/registration/pipeline/per_scale.h"
#include "kernels/registration/adam.h"
#include "kernels/registration/field_ops.h"
#include "kernels/registration/gaussian_smooth.h"
#include "kernels/registration/grid_sampler.h"
#include "kernels/registration/mixed_ops.h"
#include "kernels/registration/point_sampler.h"
#include "kernels/registration/pipeline/bspline_stage.h"
#include "kernels/registration/pipeline/deformable_stage.h"
#include "kernels/registration/pipeline/grid_jitter.h"
#include "kernels/registration/pipeline/metric_mask.h"
#include "kernels/registration/pipeline/sharded_deformable_stage.h"
#include "kernels/registration/pipeline/host_setup.h"
#include "kernels/registration/pipeline/noise_estimate.h"
#include "kernels/registration/pipeline/out_of_core_stage.h"
#include "kernels/registration/pipeline/plateau_stop.h"
#include "kernels/registration/pipeline/space.h"
#include "kernels/registration/pipeline/step_control.h"
#include "kernels/registration/pipeline/transform_params.h"
#include "kernels/registration/pipeline/registrar.h"

namespace tessera::registration::internal {



// The seed of one sampled iteration's voxel subset: a SplitMix64 mix of the
// user's seed, the stage, the level and the iteration, so every iteration
// draws a different subset and a rerun draws the same ones.
inline uint64_t SubsetSeed(uint64_t seed, int stage, size_t level, int iteration) {
  uint64_t z = seed;
  for (uint64_t part : {uint64_t(stage), uint64_t(level), uint64_t(iteration)}) {
    z += 0x9e3779b97f4a7c15ULL + part;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
  }
  return z;
}

// One resolution of the pyramid, in the stream's memory.
struct Level {
  int factor = 1;
  GridSpace fixed_space, moving_space;
  NDArray fixed, moving;  // normalised intensities
  // Mixed precision: the same as fp16 (kUInt16 holding Half) during the lean
  // deformable stage, when fixed and moving are released.
  NDArray fixed_half, moving_half;
};

// Replaces a level's float images by fp16 copies, one image at a time (the
// transient is one fp16 image, before the stage allocates anything).
inline absl::Status ConvertLevelToHalf(Level& level, const Stream& stream) {
  for (auto [f, h] : {std::make_pair(&level.fixed, &level.fixed_half), std::make_pair(&level.moving, &level.moving_half)}) {
    TESSERA_ASSIGN_OR_RETURN(*h, NDArray::Allocate(f->shape(), DType::kUInt16, f->memory_kind(), stream.ordinal()));
    TESSERA_RETURN_IF_ERROR(ConvertToHalf(stream, f->data<float>(), static_cast<Half*>(h->raw_data()), f->num_elements()));
    TESSERA_RETURN_IF_ERROR(stream.Synchronize());
    *f = NDArray();
  }
  return absl::OkStatus();
}

// The inverse for the output phase (float images back from fp16).
inline absl::Status ConvertLevelToFloat(Level& level, const Stream& stream) {
  for (auto [f, h] : {std::make_pair(&level.fixed, &level.fixed_half), std::make_pair(&level.moving, &level.moving_half)}) {
    TESSERA_ASSIGN_OR_RETURN(*f, NDArray::Allocate(h->shape(), DType::kFloat32, h->memory_kind(), stream.ordinal()));
    TESSERA_RETURN_IF_ERROR(ConvertToFloat(stream, static_cast<const Half*>(h->raw_data()), f->data<float>(), h->num_elements()));
    TESSERA_RETURN_IF_ERROR(stream.Synchronize());
    *h = NDArray();
  }
  return absl::OkStatus();
}

// Everything an iteration touches, allocated once per level size.
class LevelEngine {
 public:
  LevelEngine(const Stream& stream, const RegistrationOptions& options, SimilarityMetric* metric,
         const ProgressCallback& progress, const std::atomic<bool>* cancel, absl::Time deadline)
      : stream_(stream),
        options_(options),
        metric_(metric),
        progress_(progress),
        cancel_(cancel),
        deadline_(deadline),
        mask_(std::make_unique<MetricMask>(stream, options)) {}

  absl::Status Init() {
    TESSERA_ASSIGN_OR_RETURN(affine_, NDArray::Allocate({12}, DType::kFloat32, MemoryKindFor(stream_), stream_.ordinal()));
    TESSERA_ASSIGN_OR_RETURN(grad_affine_,
                             NDArray::Allocate({12}, DType::kFloat32, MemoryKindFor(stream_), stream_.ordinal()));
    return absl::OkStatus();
  }

  absl::Status CheckCancelled() const {
    if (cancel_ != nullptr && cancel_->load()) return absl::CancelledError("registration cancelled");
    if (deadline_ != absl::InfiniteFuture() && absl::Now() > deadline_) {
      return absl::DeadlineExceededError("registration stopped: its deadline passed");
    }
    return absl::OkStatus();
  }

  void Report(const std::string& stage, int scale, int it, int max_it, double loss) {
    if (progress_) progress_(RegistrationProgress{stage, scale, it, max_it, loss});
  }

  absl::Status UploadAffine(const Affine12& a) {
    float host[12];
    for (int i = 0; i < 12; ++i) host[i] = static_cast<float>(a[i]);
    return CopyBytes(affine_.raw_data(), affine_.memory_kind(), host, MemoryKind::kHost, sizeof(host), stream_);
  }

  // with_grad = false (the output phase): the warped image only, so the
  // output stays below the deformable stage's peak.
  absl::Status EnsureImageBuffers(const Level& level, bool with_grad = true) {
    const Shape shape = level.fixed.shape();
    if (warped_.empty() || warped_.shape() != shape) {
      TESSERA_ASSIGN_OR_RETURN(warped_, NDArray::Allocate(shape, DType::kFloat32, MemoryKindFor(stream_), stream_.ordinal()));
      grad_w_ = NDArray();
    }
    if (with_grad && (grad_w_.empty() || grad_w_.shape() != shape)) {
      TESSERA_ASSIGN_OR_RETURN(grad_w_, NDArray::Allocate(shape, DType::kFloat32, MemoryKindFor(stream_), stream_.ordinal()));
    }
    return absl::OkStatus();
  }

  GridSampleArgs Args(const Level& level, const NDArray* disp) const {
    GridSampleArgs args;
    args.image = level.moving.data<float>();
    args.image_dims = DimsOf(level.moving);
    args.affine = affine_.data<float>();
    args.disp = disp ? disp->data<float>() : nullptr;
    args.out_dims = DimsOf(level.fixed);
    args.padding = Padding::kZeros;
    return args;
  }

  // The metric of `fixed` and warped() for the moving image sampled with
  // `args` on `level`, restricted to the masks when the run has any
  // (metric_mask.h); grad as SimilarityMetric::Evaluate.
  absl::StatusOr<double> EvaluateMasked(const Level& level, const GridSampleArgs& args, const NDArray& fixed,
                                        NDArray* grad) {
    if (!mask_->active()) return metric_->Evaluate(fixed, warped_, grad);
    TESSERA_RETURN_IF_ERROR(mask_->SetLevel(level.factor, level.fixed_space, level.moving_space));
    TESSERA_ASSIGN_OR_RETURN(const VoxelMask m, mask_->Update(args));
    return metric_->Evaluate(fixed, warped_, grad, &mask_->combined(), m.count);
  }

  // Loss (and optionally the sampler-affine gradient) at physical transform T.
  absl::StatusOr<double> LinearLoss(const Level& level, const Mat4& t, Affine12* grad_sampler) {
    TESSERA_ASSIGN_OR_RETURN(Affine12 a, SamplerAffineFromPhysical(t, level.fixed_space, level.moving_space));
    TESSERA_RETURN_IF_ERROR(UploadAffine(a));
    TESSERA_RETURN_IF_ERROR(EnsureImageBuffers(level));
    const GridSampleArgs args = Args(level, nullptr);
    TESSERA_RETURN_IF_ERROR(GridSample(stream_, args, warped_.data<float>(), options_.sampler));
    TESSERA_ASSIGN_OR_RETURN(double loss, EvaluateMasked(level, args, level.fixed, grad_sampler ? &grad_w_ : nullptr));
    if (grad_sampler != nullptr) {
      GridSampleGrads grads;
      grads.grad_affine = grad_affine_.data<float>();
      TESSERA_RETURN_IF_ERROR(
          GridSampleBackward(stream_, args, grad_w_.data<float>(), grads, &workspace_, options_.sampler));
      float host[12];
      TESSERA_RETURN_IF_ERROR(
          CopyBytes(host, MemoryKind::kHost, grad_affine_.raw_data(), grad_affine_.memory_kind(), sizeof(host), stream_));
      for (int i = 0; i < 12; ++i) (*grad_sampler)[i] = host[i];
    }
    return loss;
  }

  // Whether the linear stages sample this level (see RegistrationOptions::linear_samples).
  bool SamplesLinear(const Level& level) const {
    return stream_.backend() == Backend::kCpu && options_.linear_samples > 0 && metric_->pointwise() &&
           level.fixed.num_elements() > 2 * options_.linear_samples;
  }

  // LinearLoss over `points` of the level's fixed grid only: the CPU
  // backend's stochastic iterations.
  absl::StatusOr<double> SampledLinearLoss(const Level& level, const Mat4& t, const std::vector<int64_t>& points,
                                           Affine12* grad_sampler) {
    TESSERA_ASSIGN_OR_RETURN(Affine12 a, SamplerAffineFromPhysical(t, level.fixed_space, level.moving_space));
    float affine[12];
    for (int i = 0; i < 12; ++i) affine[i] = static_cast<float>(a[i]);
    const int64_t k = static_cast<int64_t>(points.size());
    if (sample_fixed_.empty() || sample_fixed_.dim(0) != k) {
      for (NDArray* s : {&sample_fixed_, &sample_warped_, &sample_grad_}) {
        TESSERA_ASSIGN_OR_RETURN(*s, NDArray::Allocate({k, 1, 1}, DType::kFloat32));
      }
      TESSERA_ASSIGN_OR_RETURN(sample_mask_, NDArray::Allocate({k, 1, 1}, DType::kUInt8));
    }
    const float* fixed = level.fixed.data<float>();
    for (int64_t i = 0; i < k; ++i) sample_fixed_.data<float>()[i] = fixed[points[i]];
    PointSampleArgs args;
    args.image = level.moving.data<float>();
    args.image_dims = DimsOf(level.moving);
    args.affine = affine;
    args.grid_dims = DimsOf(level.fixed);
    args.points = points.data();
    args.count = k;
    TESSERA_RETURN_IF_ERROR(SamplePoints(args, sample_warped_.data<float>()));
    // Masks: the points were drawn inside the fixed mask (SampledPoints); the
    // moving mask is looked up at each mapped point.
    const NDArray* mask = nullptr;
    int64_t inside = k;
    if (options_.moving_mask != nullptr) {
      inside = mask_->SampleMovingMask(affine, points, sample_mask_.data<uint8_t>());
      if (inside == 0) {
        return absl::FailedPreconditionError(absl::StrCat("no sampled voxel of level x", level.factor,
                                                          " maps inside the moving mask; check the masks' spaces"));
      }
      mask = &sample_mask_;
    }
    TESSERA_ASSIGN_OR_RETURN(double loss, metric_->Evaluate(sample_fixed_, sample_warped_, &sample_grad_, mask, inside));
    std::array<double, kAffineParams> grad;
    TESSERA_RETURN_IF_ERROR(SamplePointsAffineBackward(args, sample_grad_.data<float>(), &grad));
    for (int i = 0; i < 12; ++i) (*grad_sampler)[i] = grad[i];
    return loss;
  }

  // The voxels of a sampled iteration: drawn from the whole level, or inside
  // the fixed mask when there is one.
  absl::StatusOr<std::vector<int64_t>> SampledPoints(const Level& level, uint64_t seed) {
    if (!mask_->active()) return RandomVoxelSubset(level.fixed.num_elements(), options_.linear_samples, seed);
    TESSERA_RETURN_IF_ERROR(mask_->SetLevel(level.factor, level.fixed_space, level.moving_space));
    return mask_->DrawInsideFixedMask(options_.linear_samples, seed);
  }

  // Fraction of fixed voxels whose mapped point lands inside the moving image
  // with non-zero intensity; 0 means no overlap at all.
  absl::StatusOr<double> OverlapMax(const Level& level, const Mat4& t) {
    TESSERA_ASSIGN_OR_RETURN(Affine12 a, SamplerAffineFromPhysical(t, level.fixed_space, level.moving_space));
    TESSERA_RETURN_IF_ERROR(UploadAffine(a));
    TESSERA_RETURN_IF_ERROR(EnsureImageBuffers(level));
    TESSERA_RETURN_IF_ERROR(GridSample(stream_, Args(level, nullptr), warped_.data<float>(), options_.sampler));
    TESSERA_ASSIGN_OR_RETURN(ArrayStats stats, ComputeArrayStats(warped_, stream_));
    return stats.max;
  }

  // RegistrationOptions::dense_finest_linear: whether the linear stages skip
  // level si (the CPU's dense finest level of a large pyramid).
  bool SkipsFinestLinear(const std::vector<Level>& levels, size_t si) const {
    return stream_.backend() == Backend::kCpu && !options_.dense_finest_linear && !keep_finest_linear_ &&
           !metric_->pointwise() && si > 0 && si + 1 == levels.size() &&
           levels[si - 1].fixed_space.dims[0] * levels[si - 1].fixed_space.dims[1] * levels[si - 1].fixed_space.dims[2] >=
               kSkipFinestLinearCoarserVoxels;
  }
  // The host engine of a GPU run (out_of_core_run.cc) keeps the GPU's
  // schedule: its finest linear level runs.
  void KeepFinestLinear() { keep_finest_linear_ = true; }

  // Levels [begin, end) of `levels` (a bounded run splits them between the
  // device and the host; the level index sets the iterations and the step).
  absl::StatusOr<LinearTransform> RunLinearStage(TransformModel model, const std::string& stage, LinearTransform current,
                                                 const std::vector<Level>& levels, const std::vector<int>& iterations,
                                                 std::vector<std::string>* log, size_t begin = 0,
                                                 size_t end = SIZE_MAX) {
    for (size_t si = begin; si < std::min(end, levels.size()); ++si) {
      const Level& level = levels[si];
      const int max_it = PerScale(iterations, si);
      if (max_it <= 0) continue;
      if (SkipsFinestLinear(levels, si)) {
        log->push_back(absl::StrFormat("%s x%d: skipped (%s on the CPU: every voxel per iteration; dense_finest_linear runs it)",
                                       stage, level.factor, metric_->name()));
        continue;
      }
      const absl::Time start = absl::Now();
      TransformParameterization param(model, current, options_.translation_scale_mm, options_.matrix_scale);
      const int n = param.size();
      TESSERA_ASSIGN_OR_RETURN(NDArray p, NDArray::Allocate({n}, DType::kFloat32));
      TESSERA_ASSIGN_OR_RETURN(NDArray g, NDArray::Allocate({n}, DType::kFloat32));
      TESSERA_ASSIGN_OR_RETURN(NDArray m, NDArray::Allocate({n}, DType::kFloat32));
      TESSERA_ASSIGN_OR_RETURN(NDArray v, NDArray::Allocate({n}, DType::kFloat32));
      for (NDArray* a : {&p, &m, &v}) std::fill(a->data<float>(), a->data<float>() + n, 0.f);
      AdamOptions adam;
      adam.lr = options_.linear_lr / std::pow(2.0, static_cast<double>(si));
      std::vector<double> params(n, 0.0), best_params = params;
      PlateauStop stop(options_.tolerance, options_.patience);
      double last = 0, smoothed = 0;
      int it = 0;
      // Sampled iterations see a new random subset each time (elastix's
      // NewSamplesEveryIteration), so their losses are noisy: convergence is
      // judged on a running mean, and the level ends with the last
      // parameters (Adam's momentum has averaged the noisy gradients) rather
      // than those of the luckiest subset.
      const bool sampled = SamplesLinear(level);
      for (it = 1; it <= max_it; ++it) {
        TESSERA_RETURN_IF_ERROR(CheckCancelled());
        Affine12 grad_sampler;
        double loss = 0;
        if (sampled) {
          TESSERA_ASSIGN_OR_RETURN(
              const std::vector<int64_t> points,
              SampledPoints(level, SubsetSeed(options_.sampling_seed, model == TransformModel::kRigid ? 1 : 2, si, it)));
          TESSERA_ASSIGN_OR_RETURN(loss, SampledLinearLoss(level, param.Apply(params).ToMat4(), points, &grad_sampler));
        } else {
          TESSERA_ASSIGN_OR_RETURN(loss, LinearLoss(level, param.Apply(params).ToMat4(), &grad_sampler));
        }
        if (it == 1) smoothed = loss;
        last = loss;
        if (sampled) {
          smoothed = 0.8 * smoothed + 0.2 * loss;
          loss = smoothed;
        }
        stop.Update(loss);
        if (stop.improved() || sampled) best_params = params;
        Report(stage, level.factor, it, max_it, last);
        if (stop.done()) break;
        TESSERA_ASSIGN_OR_RETURN(Mat4 grad_t,
                                 PhysicalGradientFromSampler(grad_sampler, level.fixed_space, level.moving_space));
        const std::vector<double> grad = param.Gradient(params, grad_t);
        for (int i = 0; i < n; ++i) {
          g.data<float>()[i] = static_cast<float>(grad[i]);
          p.data<float>()[i] = static_cast<float>(params[i]);
        }
        TESSERA_RETURN_IF_ERROR(AdamStep(p, g, m, v, adam, it, Stream::Cpu()));
        for (int i = 0; i < n; ++i) params[i] = p.data<float>()[i];
      }
      current = param.Apply(best_params);
      log->push_back(absl::StrFormat("%s x%d: %d iterations%s, loss %.6g -> %.6g (best %.6g), %.2f s", stage,
                                     level.factor, std::min(it, max_it),
                                     sampled ? absl::StrCat(" of ", options_.linear_samples, " samples") : "",
                                     stop.first(), last, stop.best(), absl::ToDoubleSeconds(absl::Now() - start)));
    }
    return current;
  }

  // Greedy deformable registration; returns u in normalised units on the
  // finest level's grid.
  // out_of_core_shards > 0: the greedy lean stage out of core (ChooseOutOfCore).
  absl::StatusOr<NDArray> RunDeformableStage(const Mat4& t, const std::vector<Level>& levels,
                                             std::vector<std::string>* log, int out_of_core_shards = 0) {
    const bool bspline = options_.deformable_model == DeformableModel::kBspline;
    if (mask_->active() && (out_of_core_shards > 0 || options_.shards > 1)) {
      return absl::InvalidArgumentError(out_of_core_shards > 0 ? "masks are not supported out of core yet"
                                                               : "masks are not supported with shards > 1 yet");
    }
    if (options_.memory_mode == MemoryMode::kLean || bspline) {
      // The lean stage keeps its own (smaller) buffers: free the linear stages'.
      ReleaseBuffers();
      std::vector<DeformableLevel> lean;
      for (const Level& l : levels) {
        if (!l.fixed_half.empty()) {  // mixed precision (LeanStageUsesMixedPrecision)
          lean.push_back({l.factor, l.fixed_space, l.moving_space, nullptr, nullptr, &l.fixed_half, &l.moving_half});
        } else {
          lean.push_back({l.factor, l.fixed_space, l.moving_space, &l.fixed, &l.moving});
        }
      }
      DeformableStageHooks hooks{[this] { return CheckCancelled(); },
                                 [this](int f, int it, int max_it, double loss) { Report("deformable", f, it, max_it, loss); }};
      if (bspline) return RunBsplineStage(stream_, options_, hooks, t, lean, log);
      if (out_of_core_shards > 0) {
        return RunOutOfCoreDeformableStage(stream_, options_, hooks, t, lean, out_of_core_shards, log);
      }
      if (options_.shards > 1) return RunShardedDeformableStage(stream_, options_, hooks, t, lean, log);
      return RunLeanDeformableStage(stream_, options_, hooks, t, lean, log);
    }
    NDArray u, m, v;
    int64_t step_count = 0;
    for (size_t si = 0; si < levels.size(); ++si) {
      const Level& level = levels[si];
      const Shape field_shape = {level.fixed.dim(0), level.fixed.dim(1), level.fixed.dim(2), 3};
      const auto alloc = [&]() { return NDArray::Allocate(field_shape, DType::kFloat32, MemoryKindFor(stream_), stream_.ordinal()); };
      // Adam's moments are fields too; the normalized step needs none.
      std::vector<NDArray*> fields = {&u};
      if (options_.deformable_step == DeformableStep::kAdam) fields = {&u, &m, &v};
      if (u.empty()) {
        for (NDArray* a : fields) {
          TESSERA_ASSIGN_OR_RETURN(*a, alloc());
          TESSERA_RETURN_IF_ERROR(FillZero(*a, stream_));
        }
      } else if (u.shape() != field_shape) {
        // Carry the field (and Adam's moments) to the finer grid (normalised
        // units do not change with resolution).
        for (NDArray* a : fields) {
          TESSERA_ASSIGN_OR_RETURN(NDArray up, alloc());
          TESSERA_RETURN_IF_ERROR(UpsampleDisplacement(*a, &up, DisplacementUnits::kNormalized, stream_));
          *a = std::move(up);
        }
      }
      const int max_it = PerScale(options_.deformable_iterations, si);
      if (max_it <= 0) continue;
      const absl::Time start = absl::Now();
      // grad_u is dead once Adam has consumed it, so it doubles as the
      // buffer the composition writes into (one field less at 512^3: 1.6 GB).
      TESSERA_ASSIGN_OR_RETURN(NDArray grad_u, alloc());
      TESSERA_ASSIGN_OR_RETURN(NDArray step, alloc());
      TESSERA_RETURN_IF_ERROR(EnsureImageBuffers(level));
      TESSERA_ASSIGN_OR_RETURN(Affine12 a, SamplerAffineFromPhysical(t, level.fixed_space, level.moving_space));
      TESSERA_RETURN_IF_ERROR(UploadAffine(a));
      const Dims3 dims = DimsOf(level.fixed);
      const int64_t voxels = dims.size();
      const std::array<float, 3> to_normalized = {
          dims.nx > 1 ? 2.f / static_cast<float>(dims.nx - 1) : 0.f,
          dims.ny > 1 ? 2.f / static_cast<float>(dims.ny - 1) : 0.f,
          dims.nz > 1 ? 2.f / static_cast<float>(dims.nz - 1) : 0.f};
      const std::array<double, 3> grad_sigma = {options_.smooth_grad_sigma, options_.smooth_grad_sigma,
                                                options_.smooth_grad_sigma};
      const std::array<double, 3> warp_sigma = {options_.smooth_warp_sigma, options_.smooth_warp_sigma,
                                                options_.smooth_warp_sigma};
      AdamOptions adam;
      adam.lr = options_.deformable_lr_voxels;
      // The lean stage's grid jitter, same shifts (grid_jitter.h).
      const bool jitter = DeformableStageJitters(options_);
      GridJitter grid_jitter(options_.sampling_seed, static_cast<int>(si), dims.nx, dims.ny, dims.nz);
      NDArray shifted_fixed;
      if (jitter) {
        TESSERA_ASSIGN_OR_RETURN(shifted_fixed, NDArray::Allocate(level.fixed.shape(), DType::kFloat32,
                                                                  MemoryKindFor(stream_), stream_.ordinal()));
      }
      GridSampleArgs fixed_args = jitter ? GridJitter::FixedImageArgs(level.fixed.data<float>(), dims) : GridSampleArgs();
      PlateauStop stop = DeformablePlateauStop(options_, jitter, si + 1 == levels.size(), max_it);
      StepControl control = DeformableStepControl(options_, jitter);
      int it = 0;
      for (it = 1; it <= max_it; ++it) {
        TESSERA_RETURN_IF_ERROR(CheckCancelled());
        GridSampleArgs args = Args(level, &u);
        if (jitter) {
          grid_jitter.Advance(options_.metric_options.mi_voxel_jitter, &args, &fixed_args);
          TESSERA_RETURN_IF_ERROR(GridSample(stream_, fixed_args, shifted_fixed.data<float>(), options_.sampler));
        }
        TESSERA_RETURN_IF_ERROR(GridSample(stream_, args, warped_.data<float>(), options_.sampler));
        TESSERA_ASSIGN_OR_RETURN(double loss, EvaluateMasked(level, args, jitter ? shifted_fixed : level.fixed, &grad_w_));
        stop.Update(loss);
        adam.lr = control.Update(loss);
        Report("deformable", level.factor, it, max_it, loss);
        if (stop.done()) break;
        GridSampleGrads grads;
        grads.grad_disp = grad_u.data<float>();
        TESSERA_RETURN_IF_ERROR(
            GridSampleBackward(stream_, args, grad_w_.data<float>(), grads, &workspace_, options_.sampler));
        TESSERA_RETURN_IF_ERROR(GaussianSmooth(grad_u, &grad_u, grad_sigma, stream_));
        // The step s in voxels (Adam on a zero parameter yields s itself).
        TESSERA_RETURN_IF_ERROR(FillZero(step, stream_));
        if (options_.deformable_step == DeformableStep::kAdam) {
          TESSERA_RETURN_IF_ERROR(AdamStep(step, grad_u, m, v, adam, ++step_count, stream_));
        } else {
          // Steepest descent scaled so the largest component moves lr voxels:
          // each voxel moves in proportion to its evidence (see registrar.h).
          TESSERA_ASSIGN_OR_RETURN(ArrayStats g, ComputeArrayStats(grad_u, stream_));
          const double largest = std::max(std::abs(g.min), std::abs(g.max));
          if (largest > 0) TESSERA_RETURN_IF_ERROR(Axpy(static_cast<float>(-adam.lr / largest), grad_u, step, stream_));
        }
        TESSERA_RETURN_IF_ERROR(ScaleComponents(step, to_normalized, stream_));
        // Compositional update u <- s + u o (x + s): sample each component of u
        // at x + s (border padding keeps the field's edge values).
        NDArray& composed = grad_u;
        for (int c = 0; c < 3; ++c) {
          GridSampleArgs compose;
          compose.image = u.data<float>() + c * voxels;
          compose.image_dims = dims;
          compose.affine = nullptr;
          compose.disp = step.data<float>();
          compose.out_dims = dims;
          compose.padding = Padding::kBorder;
          TESSERA_RETURN_IF_ERROR(
              GridSample(stream_, compose, composed.data<float>() + c * voxels, options_.sampler));
        }
        TESSERA_RETURN_IF_ERROR(Axpy(1.f, step, composed, stream_));
        std::swap(u, composed);
        TESSERA_RETURN_IF_ERROR(GaussianSmooth(u, &u, warp_sigma, stream_));
      }
      log->push_back(absl::StrFormat("deformable x%d: %d iterations, loss %.6g -> %.6g (best %.6g), %.2f s",
                                     level.factor, std::min(it, max_it), stop.first(), stop.last(), stop.best(),
                                     absl::ToDoubleSeconds(absl::Now() - start)));
    }
    return u;
  }

  NDArray& warped() { return warped_; }
  NDArray& affine_buffer() { return affine_; }
  // Frees the linear stages' level-sized buffers and the metric's scratch.
  void ReleaseBuffers() {
    warped_ = NDArray();
    grad_w_ = NDArray();
    workspace_.Release();
    metric_->ReleaseScratch();
  }

 private:
  const Stream& stream_;
  const RegistrationOptions& options_;
  SimilarityMetric* metric_;
  const ProgressCallback& progress_;
  const std::atomic<bool>* cancel_;
  const absl::Time deadline_;
  NDArray affine_, grad_affine_, warped_, grad_w_;
  NDArray sample_fixed_, sample_warped_, sample_grad_, sample_mask_;  // sampled linear iterations (host)
  std::unique_ptr<MetricMask> mask_;  // the run's masks per level (inactive without masks)
  Workspace workspace_;
  bool keep_finest_linear_ = false;
};

}  // namespace tessera::registration::internal

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_LEVEL_ENGINE_H_
