#include "kernels/registration/pipeline/deformable_stage.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/buffer.h"
#include "common/memory_kind_for.h"
#include "common/status.h"
#include "kernels/registration/field_ops.h"
#include "kernels/registration/gaussian_smooth.h"
#include "kernels/registration/grid_sampler.h"
#include "kernels/registration/lean_compose.h"
#include "kernels/registration/lean_smooth.h"
#include "kernels/registration/lncc.h"
#include "kernels/registration/mixed_ops.h"
#include "kernels/registration/mse.h"
#include "kernels/registration/mutual_info.h"
#include "kernels/registration/mutual_info_cpu_steps.h"
#include "kernels/registration/pipeline/array_helpers.h"
#include "kernels/registration/pipeline/per_scale.h"
#include "kernels/registration/pipeline/grid_jitter.h"
#include "kernels/registration/pipeline/largest_magnitude.h"
#include "kernels/registration/pipeline/metric_mask.h"
#include "kernels/registration/pipeline/plateau_stop.h"
#include "kernels/registration/pipeline/sharded_deformable_stage.h"
#include "kernels/registration/pipeline/step_control.h"

namespace tessera::registration {
namespace {

const Half* HalfData(const NDArray& a) { return static_cast<const Half*>(a.raw_data()); }
BFloat16* Bf16Data(const NDArray& a) { return static_cast<BFloat16*>(a.raw_data()); }

// The metric evaluated in the lean buffers: W holds the warped image on entry
// and dL/dW on return; G (3 image volumes) is free scratch.
class LeanMetric {
 public:
  LeanMetric(const Stream& stream, const RegistrationOptions& options) : stream_(stream), options_(options) {}

  absl::Status Init() {
    TESSERA_ASSIGN_OR_RETURN(loss_, NDArray::Allocate({1}, DType::kFloat32, MemoryKindFor(stream_), stream_.ordinal()));
    if (options_.metric == Metric::kMi) {
      mi_ = MattesMiOptionsFor(options_.metric_options);
      if (stream_.backend() == Backend::kCuda) {
        TESSERA_ASSIGN_OR_RETURN(size_t bytes, MattesMiScratchBytes(mi_.bins, stream_.ordinal()));
        TESSERA_ASSIGN_OR_RETURN(mi_scratch_, Buffer::Allocate(MemoryKind::kDevice, bytes, stream_.ordinal()));
      }
    }
    lncc_.window = options_.metric_options.lncc_window;
    return absl::OkStatus();
  }

  // MI's gradient needs its own image-sized array on CUDA (its API takes
  // whole arrays that must not alias); the CPU writes it over W.
  absl::Status PrepareLevel(const Shape& shape) {
    mi_grad_ = NDArray();
    lncc_cpu_bytes_ = LeanMetricCpuScratchBytes(options_, stream_.backend(), Dims3{shape[0], shape[1], shape[2]});
    lncc_workspace_.ForgetFixed();  // a new level's fixed image
    if (options_.metric == Metric::kMi && stream_.backend() == Backend::kCuda) {
      TESSERA_ASSIGN_OR_RETURN(mi_grad_, NDArray::Allocate(shape, DType::kFloat32, MemoryKindFor(stream_),
                                                           stream_.ordinal()));
    }
    return absl::OkStatus();
  }

  // MI's gradient (CUDA), LNCC's kept volumes (CPU: lncc_workspace_.host,
  // reserved by the level's first evaluation).
  size_t level_bytes() const { return mi_grad_.nbytes() + static_cast<size_t>(lncc_cpu_bytes_); }

  // Mixed precision (lncc, mse): fixed in fp16, scratch = G in bf16.
  // mask (issue 34): null, or the combined uint8 mask holding `voxels.count` voxels.
  absl::StatusOr<double> EvaluateMixed(const NDArray& fixed_half, Dims3 dims, NDArray& work, NDArray& scratch,
                                       bool want_grad, const NDArray* mask = nullptr, VoxelMask voxels = {}) {
    if (options_.metric == Metric::kLncc) {
      TESSERA_RETURN_IF_ERROR(LnccHalfFixed(stream_, HalfData(fixed_half), work.data<float>(), dims, lncc_,
                                            loss_.data<float>(), want_grad ? work.data<float>() : nullptr,
                                            Bf16Data(scratch), &lncc_workspace_, voxels));
      return ReadLoss();
    }
    if (mask != nullptr) return absl::InvalidArgumentError("precision 'mixed' supports masks with lncc only");
    if (options_.metric == Metric::kMse) {
      TESSERA_RETURN_IF_ERROR(MseHalfFixed(stream_, HalfData(fixed_half), work.data<float>(), dims,
                                           loss_.data<float>(), want_grad, &workspace_));
      return ReadLoss();
    }
    return absl::InvalidArgumentError(absl::StrCat("precision 'mixed' supports lncc and mse, not '", OptionName(options_.metric), "'"));
  }

  absl::StatusOr<double> Evaluate(const NDArray& fixed, NDArray& work, NDArray& scratch, bool want_grad,
                                  const NDArray* mask = nullptr, VoxelMask voxels = {}) {
    const Dims3 dims = DimsOf(fixed);
    const MemoryKind kind = MemoryKindFor(stream_);
    if (options_.metric == Metric::kLncc) {
      TESSERA_RETURN_IF_ERROR(LnccWithCoefficients(stream_, fixed.data<float>(), work.data<float>(), dims, lncc_,
                                                   loss_.data<float>(), want_grad ? work.data<float>() : nullptr,
                                                   scratch.data<float>(), &lncc_workspace_, voxels));
      return ReadLoss();
    }
    if (options_.metric == Metric::kMse) {
      // W -> G's first volume, then the gradient into W (no aliasing).
      float* copy = scratch.data<float>();
      TESSERA_RETURN_IF_ERROR(CopyBytes(copy, kind, work.data<float>(), kind, fixed.nbytes(), stream_));
      TESSERA_RETURN_IF_ERROR(Mse(stream_, fixed.data<float>(), copy, dims, loss_.data<float>(),
                                  want_grad ? work.data<float>() : nullptr, &workspace_, voxels));
      return ReadLoss();
    }
    if (want_grad && stream_.backend() == Backend::kCpu) {
      // Issue 38: dL/dW over W in place (no gradient array, no copy).
      TESSERA_ASSIGN_OR_RETURN(MattesMiResult r, mi_cpu::MattesMutualInformationOverWarped(fixed, work, mask, mi_));
      return r.loss;
    }
    TESSERA_ASSIGN_OR_RETURN(MattesMiResult r, MattesMutualInformation(fixed, work, mask, mi_,
                                                                       want_grad ? &mi_grad_ : nullptr, stream_,
                                                                       mi_scratch_.get()));
    if (want_grad) TESSERA_RETURN_IF_ERROR(CopyBytes(work.raw_data(), kind, mi_grad_.raw_data(), kind, fixed.nbytes(), stream_));
    return r.loss;
  }

 private:
  absl::StatusOr<double> ReadLoss() {
    float host = 0;
    TESSERA_RETURN_IF_ERROR(CopyBytes(&host, MemoryKind::kHost, loss_.raw_data(), loss_.memory_kind(), sizeof(float), stream_));
    return static_cast<double>(host);
  }

  const Stream& stream_;
  const RegistrationOptions& options_;
  NDArray loss_, mi_grad_;
  LnccOptions lncc_;
  MattesMiOptions mi_;
  std::shared_ptr<Buffer> mi_scratch_;
  Workspace workspace_;
  // LNCC's reduction partials (CUDA) or, issue 38, the CPU LNCC's volumes and
  // the fixed image's box sums, kept across the iterations (the fixed image
  // of a level never changes).
  LnccWorkspace lncc_workspace_;
  int64_t lncc_cpu_bytes_ = 0;
};

}  // namespace

int64_t LeanMetricCpuScratchBytes(const RegistrationOptions& options, Backend backend, Dims3 dims) {
  return backend == Backend::kCpu && options.metric == Metric::kLncc ? cpu::LnccScratch::Bytes(dims) : 0;
}

bool LeanStageUsesMixedPrecision(const RegistrationOptions& options) {
  // The B-spline stage (bspline_stage.h) takes float levels.
  return options.precision == Precision::kMixed && options.memory_mode == MemoryMode::kLean && options.shards <= 1 &&
         options.process_group == nullptr && options.metric == Metric::kLncc && options.deformable_model == DeformableModel::kGreedy;
}

bool DeformableStageJitters(const RegistrationOptions& options) {
  return options.metric == Metric::kMi && options.metric_options.mi_grid_jitter;
}

const char* JitterLogTag(const RegistrationOptions& options, bool jitter) {
  if (!jitter) return "";
  return options.metric_options.mi_voxel_jitter ? ", jittered voxels" : ", jittered grid";
}

PlateauStop DeformablePlateauStop(const RegistrationOptions& options, bool jitter, bool finest, int budget) {
  return PlateauStop(options.tolerance, jitter ? std::max(options.patience, kJitteredPatience) : options.patience,
                     options.plateau_window, /*rate_rule=*/!finest || options.plateau_window_finest, budget,
                     finest ? options.finest_remaining_gain : 0.0);
}

StepControl DeformableStepControl(const RegistrationOptions& options, bool jitter) {
  const int halve_after = jitter && options.deformable_halve_after > 0
                              ? std::max(options.deformable_halve_after, kJitteredHalveAfter)
                              : options.deformable_halve_after;
  return StepControl(options.deformable_lr_voxels, halve_after, options.deformable_min_step_fraction);
}

absl::StatusOr<NDArray> RunLeanDeformableStage(const Stream& stream, const RegistrationOptions& options,
                                               const DeformableStageHooks& hooks, const Mat4& t,
                                               const std::vector<DeformableLevel>& levels,
                                               std::vector<std::string>* log) {
  // One shard of a group spread over processes (registrar.h process_group).
  if (options.process_group != nullptr) return RunShardedDeformableStage(stream, options, hooks, t, levels, log);
  const MemoryKind kind = MemoryKindFor(stream);
  const bool adam = options.deformable_step == DeformableStep::kAdam;
  LeanMetric metric(stream, options);
  TESSERA_RETURN_IF_ERROR(metric.Init());
  TESSERA_ASSIGN_OR_RETURN(NDArray affine, NDArray::Allocate({12}, DType::kFloat32, kind, stream.ordinal()));
  Workspace sampler_workspace, compose_workspace, stats_workspace;
  MetricMask mask(stream, options);  // issue 34: inactive without masks
  NDArray u, m, v;  // u and Adam's moments (planar fields, normalised units for u)
  int64_t step_count = 0;
  for (size_t si = 0; si < levels.size(); ++si) {
    const DeformableLevel& level = levels[si];
    const bool mixed = level.fixed_half != nullptr;
    if (mixed != (level.moving_half != nullptr) || mixed == (level.fixed != nullptr) ||
        (level.fixed == nullptr) != (level.moving == nullptr)) {
      return absl::InvalidArgumentError(absl::StrCat("lean deformable stage: level x", level.factor,
                                                     " must have float or fp16 fixed and moving images"));
    }
    if (mixed && options.metric == Metric::kMi) {
      return absl::InvalidArgumentError("lean deformable stage: fp16 levels need metric lncc or mse, not mi");
    }
    const NDArray& fixed_any = mixed ? *level.fixed_half : *level.fixed;
    const NDArray& moving_any = mixed ? *level.moving_half : *level.moving;
    const Shape image_shape = fixed_any.shape();
    const Shape field_shape = {fixed_any.dim(0), fixed_any.dim(1), fixed_any.dim(2), 3};
    const auto alloc = [&]() { return NDArray::Allocate(field_shape, DType::kFloat32, kind, stream.ordinal()); };
    std::vector<NDArray*> fields = {&u};
    if (adam) fields = {&u, &m, &v};
    if (u.empty()) {
      for (NDArray* a : fields) {
        TESSERA_ASSIGN_OR_RETURN(*a, alloc());
        TESSERA_RETURN_IF_ERROR(FillZero(*a, stream));
      }
    } else if (u.shape() != field_shape) {
      for (NDArray* a : fields) {  // normalised units do not change with resolution
        TESSERA_ASSIGN_OR_RETURN(NDArray up, alloc());
        TESSERA_RETURN_IF_ERROR(UpsampleDisplacement(*a, &up, DisplacementUnits::kNormalized, stream));
        *a = std::move(up);
      }
    }
    const int max_it = PerScale(options.deformable_iterations, si);
    if (max_it <= 0) continue;
    const absl::Time start = absl::Now();
    // The level's two work buffers (see the header).
    // Mixed: G in bf16 (kUInt16 storage, storage16.h).
    TESSERA_ASSIGN_OR_RETURN(NDArray work, NDArray::Allocate(image_shape, DType::kFloat32, kind, stream.ordinal()));
    const DType g_type = mixed ? DType::kUInt16 : DType::kFloat32;
    TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> g_buffer,
                             Buffer::Allocate(kind, static_cast<size_t>(NumElements(field_shape)) * SizeOf(g_type), stream.ordinal()));
    TESSERA_ASSIGN_OR_RETURN(NDArray g, NDArray::View(g_buffer, field_shape, g_type));
    // Jitter (MI, never mixed): the shifted fixed image lives in G's first
    // volume, which MI's evaluation leaves unused (the backward pass then
    // overwrites it), so the stage holds no more memory.
    const bool jitter = DeformableStageJitters(options) && !mixed;
    NDArray shifted_fixed;
    if (jitter) {
      TESSERA_ASSIGN_OR_RETURN(shifted_fixed, NDArray::View(g_buffer, image_shape, DType::kFloat32));
    }

    TESSERA_RETURN_IF_ERROR(metric.PrepareLevel(image_shape));
    // What this level holds, per voxel: images, u (and Adam's moments), W, G, MI's extra.
    const double voxels = static_cast<double>(work.num_elements());
    const double held_bytes_per_voxel =
        static_cast<double>(fixed_any.nbytes() + moving_any.nbytes() + u.nbytes() + m.nbytes() + v.nbytes() +
                            work.nbytes() + g.nbytes() + metric.level_bytes()) / voxels;
    TESSERA_ASSIGN_OR_RETURN(Affine12 a, SamplerAffineFromPhysical(t, level.fixed_space, level.moving_space));
    float host_affine[12];
    for (int i = 0; i < 12; ++i) host_affine[i] = static_cast<float>(a[i]);
    TESSERA_RETURN_IF_ERROR(CopyBytes(affine.raw_data(), kind, host_affine, MemoryKind::kHost, sizeof(host_affine), stream));
    const Dims3 dims = DimsOf(fixed_any);
    GreedyStep step;
    step.rule = adam ? GreedyStep::Rule::kAdam : GreedyStep::Rule::kScaled;
    step.adam.lr = options.deformable_lr_voxels;
    step.m = adam ? m.data<float>() : nullptr;
    step.v = adam ? v.data<float>() : nullptr;
    step.to_normalized = {dims.nx > 1 ? 2.f / static_cast<float>(dims.nx - 1) : 0.f,
                          dims.ny > 1 ? 2.f / static_cast<float>(dims.ny - 1) : 0.f,
                          dims.nz > 1 ? 2.f / static_cast<float>(dims.nz - 1) : 0.f};
    const double gs = options.smooth_grad_sigma, ws = options.smooth_warp_sigma;
    GridSampleArgs args;
    args.image = mixed ? nullptr : level.moving->data<float>();
    args.image_dims = DimsOf(moving_any);
    args.affine = affine.data<float>();
    args.disp = u.data<float>();
    args.out_dims = dims;
    args.padding = Padding::kZeros;
    TESSERA_RETURN_IF_ERROR(mask.SetLevel(level.factor, level.fixed_space, level.moving_space));
    GridJitter grid_jitter(options.sampling_seed, static_cast<int>(si), dims.nx, dims.ny, dims.nz);
    // The fixed image on the jittered grid.
    GridSampleArgs fixed_args = jitter ? GridJitter::FixedImageArgs(level.fixed->data<float>(), dims) : GridSampleArgs();
    PlateauStop stop = DeformablePlateauStop(options, jitter, si + 1 == levels.size(), max_it);
    StepControl control = DeformableStepControl(options, jitter);
    int it = 0;
    for (it = 1; it <= max_it; ++it) {
      if (hooks.check_cancelled) TESSERA_RETURN_IF_ERROR(hooks.check_cancelled());
      if (jitter) {
        grid_jitter.Advance(options.metric_options.mi_voxel_jitter, &args, &fixed_args);
        TESSERA_RETURN_IF_ERROR(GridSample(stream, fixed_args, shifted_fixed.data<float>(), options.sampler));
      }
      if (mixed) {
        TESSERA_RETURN_IF_ERROR(GridSampleHalfImage(stream, args, HalfData(moving_any), work.data<float>(), options.sampler));
      } else {
        TESSERA_RETURN_IF_ERROR(GridSample(stream, args, work.data<float>(), options.sampler));
      }
      // The masks' voxels for this iteration's sampling (issue 34).
      VoxelMask voxels;
      if (mask.active()) {
        TESSERA_ASSIGN_OR_RETURN(voxels, mask.Update(args));
      }
      const NDArray* mask_array = mask.active() ? &mask.combined() : nullptr;
      // The loss alone first when this may be the last iteration would save
      // the backward pass, but the standard loop always computes both.
      TESSERA_ASSIGN_OR_RETURN(double loss, mixed ? metric.EvaluateMixed(fixed_any, dims, work, g, /*want_grad=*/true,
                                                                         mask_array, voxels)
                                                  : metric.Evaluate(jitter ? shifted_fixed : fixed_any, work, g,
                                                                    /*want_grad=*/true, mask_array, voxels));
      stop.Update(loss);
      const double lr = control.Update(loss);
      if (hooks.report) hooks.report(level.factor, it, max_it, loss);
      if (stop.done()) break;
      if (mixed) {
        TESSERA_RETURN_IF_ERROR(GridSampleBackwardHalfImage(stream, args, HalfData(moving_any), work.data<float>(),
                                                            Bf16Data(g), options.sampler));
        TESSERA_RETURN_IF_ERROR(SmoothBf16InPlaceWithScratch(Bf16Data(g), dims, 3, {gs, gs, gs}, work.data<float>(),
                                                             work.num_elements(), stream));
      } else {
        GridSampleGrads grads;
        grads.grad_disp = g.data<float>();
        TESSERA_RETURN_IF_ERROR(
            GridSampleBackward(stream, args, work.data<float>(), grads, &sampler_workspace, options.sampler));
        TESSERA_RETURN_IF_ERROR(
            SmoothInPlaceWithScratch(g, {gs, gs, gs}, work.data<float>(), work.num_elements(), stream));
      }
      if (adam) {
        step.t = ++step_count;
        step.adam.lr = lr;
      } else {
        // Steepest descent scaled so the largest component moves lr voxels.
        double largest = 0;
        if (mixed) {
          TESSERA_ASSIGN_OR_RETURN(float max_abs, MaxAbs(stream, Bf16Data(g), g.num_elements(), &stats_workspace));
          largest = max_abs;
        } else {
          TESSERA_ASSIGN_OR_RETURN(largest, LargestFiniteMagnitude(g, stream));
        }
        step.max_abs_grad = static_cast<float>(largest);
        step.scale = largest > 0 ? static_cast<float>(-lr / largest) : 0.f;
      }
      if (mixed) {
        TESSERA_RETURN_IF_ERROR(
            ComposeGreedyStepInPlace(stream, u.data<float>(), Bf16Data(g), dims, step, &compose_workspace));
      } else {
        TESSERA_RETURN_IF_ERROR(
            ComposeGreedyStepInPlace(stream, u.data<float>(), g.data<float>(), dims, step, &compose_workspace));
      }
      TESSERA_RETURN_IF_ERROR(SmoothInPlaceWithScratch(u, {ws, ws, ws}, work.data<float>(), work.num_elements(), stream));
    }
    log->push_back(absl::StrFormat(
        "deformable x%d (lean, %s precision%s): %d iterations, loss %.6g -> %.6g (best %.6g), %.2f s, %.1f B/voxel held",
        level.factor, mixed ? "mixed" : "full", JitterLogTag(options, jitter), std::min(it, max_it), stop.first(), stop.last(), stop.best(),
        absl::ToDoubleSeconds(absl::Now() - start), held_bytes_per_voxel));
    // work and g are released here, before the next level's upsampling.
    TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  }
  return u;
}

}  // namespace tessera::registration
