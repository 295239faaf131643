#include "services/registration/registrar.h"

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
#include "common/status.h"
#include "services/registration/array_helpers.h"
#include "services/registration/per_scale.h"
#include "kernels/registration/adam.h"
#include "kernels/registration/field_ops.h"
#include "kernels/registration/gaussian_smooth.h"
#include "kernels/registration/grid_sampler.h"
#include "kernels/registration/mixed_ops.h"
#include "kernels/registration/point_sampler.h"
#include "services/registration/bspline_stage.h"
#include "services/registration/deformable_stage.h"
#include "services/registration/grid_jitter.h"
#include "services/registration/sharded_deformable_stage.h"
#include "services/registration/host_setup.h"
#include "services/registration/noise_estimate.h"
#include "services/registration/out_of_core_stage.h"
#include "services/registration/plateau_stop.h"
#include "services/registration/space.h"
#include "services/registration/step_control.h"
#include "services/registration/transform_params.h"

namespace tessera::registration {
namespace {



// The seed of one sampled iteration's voxel subset: a SplitMix64 mix of the
// user's seed, the stage, the level and the iteration, so every iteration
// draws a different subset and a rerun draws the same ones.
uint64_t SubsetSeed(uint64_t seed, int stage, size_t level, int iteration) {
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
absl::Status ConvertLevelToHalf(Level& level, const Stream& stream) {
  for (auto [f, h] : {std::make_pair(&level.fixed, &level.fixed_half), std::make_pair(&level.moving, &level.moving_half)}) {
    TESSERA_ASSIGN_OR_RETURN(*h, NDArray::Allocate(f->shape(), DType::kUInt16, f->memory_kind(), stream.ordinal()));
    TESSERA_RETURN_IF_ERROR(ConvertToHalf(stream, f->data<float>(), static_cast<Half*>(h->raw_data()), f->num_elements()));
    TESSERA_RETURN_IF_ERROR(stream.Synchronize());
    *f = NDArray();
  }
  return absl::OkStatus();
}

// The inverse for the output phase (float images back from fp16).
absl::Status ConvertLevelToFloat(Level& level, const Stream& stream) {
  for (auto [f, h] : {std::make_pair(&level.fixed, &level.fixed_half), std::make_pair(&level.moving, &level.moving_half)}) {
    TESSERA_ASSIGN_OR_RETURN(*f, NDArray::Allocate(h->shape(), DType::kFloat32, h->memory_kind(), stream.ordinal()));
    TESSERA_RETURN_IF_ERROR(ConvertToFloat(stream, static_cast<const Half*>(h->raw_data()), f->data<float>(), h->num_elements()));
    TESSERA_RETURN_IF_ERROR(stream.Synchronize());
    *h = NDArray();
  }
  return absl::OkStatus();
}

// Everything an iteration touches, allocated once per level size.
class Engine {
 public:
  Engine(const Stream& stream, const RegistrationOptions& options, SimilarityMetric* metric,
         const ProgressCallback& progress, const std::atomic<bool>* cancel, absl::Time deadline)
      : stream_(stream),
        options_(options),
        metric_(metric),
        progress_(progress),
        cancel_(cancel),
        deadline_(deadline) {}

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

  // Loss (and optionally the sampler-affine gradient) at physical transform T.
  absl::StatusOr<double> LinearLoss(const Level& level, const Mat4& t, Affine12* grad_sampler) {
    TESSERA_ASSIGN_OR_RETURN(Affine12 a, SamplerAffineFromPhysical(t, level.fixed_space, level.moving_space));
    TESSERA_RETURN_IF_ERROR(UploadAffine(a));
    TESSERA_RETURN_IF_ERROR(EnsureImageBuffers(level));
    const GridSampleArgs args = Args(level, nullptr);
    TESSERA_RETURN_IF_ERROR(GridSample(stream_, args, warped_.data<float>(), options_.sampler));
    TESSERA_ASSIGN_OR_RETURN(double loss, metric_->Evaluate(level.fixed, warped_, grad_sampler ? &grad_w_ : nullptr));
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
    TESSERA_ASSIGN_OR_RETURN(double loss, metric_->Evaluate(sample_fixed_, sample_warped_, &sample_grad_));
    std::array<double, kAffineParams> grad;
    TESSERA_RETURN_IF_ERROR(SamplePointsAffineBackward(args, sample_grad_.data<float>(), &grad));
    for (int i = 0; i < 12; ++i) (*grad_sampler)[i] = grad[i];
    return loss;
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
          const std::vector<int64_t> points = RandomVoxelSubset(
              level.fixed.num_elements(), options_.linear_samples,
              SubsetSeed(options_.sampling_seed, model == TransformModel::kRigid ? 1 : 2, si, it));
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
    const bool bspline = options_.deformable_model == "bspline";
    if (options_.memory_mode == "lean" || bspline) {
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
      if (options_.deformable_step == "adam") fields = {&u, &m, &v};
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
      PlateauStop stop = DeformablePlateauStop(options_, jitter);
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
        TESSERA_ASSIGN_OR_RETURN(double loss,
                                 metric_->Evaluate(jitter ? shifted_fixed : level.fixed, warped_, &grad_w_));
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
        if (options_.deformable_step == "adam") {
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
  NDArray sample_fixed_, sample_warped_, sample_grad_;  // sampled linear iterations (host)
  Workspace workspace_;
};

absl::Status ValidateInputs(const Volume& fixed, const Volume& moving, const RegistrationOptions& options) {
  for (const auto& [v, which] : {std::pair<const Volume*, const char*>{&fixed, "fixed"}, {&moving, "moving"}}) {
    if (v->data.rank() != 3) {
      return absl::InvalidArgumentError(absl::StrCat(which, " image must be a 3-D scalar volume, got shape ",
                                                     ShapeToString(v->data.shape())));
    }
    if (v->data.memory_kind() == MemoryKind::kDevice) {
      return absl::InvalidArgumentError(absl::StrCat(which, " image must be in host memory"));
    }
  }
  const bool fixed_2d = fixed.data.dim(2) == 1, moving_2d = moving.data.dim(2) == 1;
  if (fixed_2d != moving_2d) {
    return absl::InvalidArgumentError(absl::StrCat("cannot register a 2-D image to a 3-D one (fixed ",
                                                   ShapeToString(fixed.data.shape()), ", moving ",
                                                   ShapeToString(moving.data.shape()), ")"));
  }
  if (options.scales.empty()) return absl::InvalidArgumentError("at least one scale is needed");
  for (size_t i = 0; i < options.scales.size(); ++i) {
    if (options.scales[i] < 1 || (i > 0 && options.scales[i] > options.scales[i - 1])) {
      return absl::InvalidArgumentError("scales must be >= 1 and coarse to fine, e.g. 4,2,1");
    }
  }
  for (const std::string& s : options.stages) {
    if (s != "rigid" && s != "affine" && s != "deformable") {
      return absl::InvalidArgumentError(absl::StrCat("unknown stage '", s, "': expected rigid, affine, deformable"));
    }
  }
  if (options.stages.empty()) return absl::InvalidArgumentError("no stages requested");
  if (options.deformable_step != "normalized" && options.deformable_step != "adam") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown deformable_step '", options.deformable_step, "': expected normalized or adam"));
  }
  if (options.deformable_halve_after < 0) {
    return absl::InvalidArgumentError(absl::StrCat("deformable_halve_after must be >= 0 (0 = a fixed step), got ",
                                                   options.deformable_halve_after));
  }
  if (!(options.deformable_min_step_fraction > 0 && options.deformable_min_step_fraction <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("deformable_min_step_fraction must be in (0, 1], got ",
                                                   options.deformable_min_step_fraction));
  }
  if (options.deformable_model != "greedy" && options.deformable_model != "bspline") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown deformable_model '", options.deformable_model, "': expected greedy or bspline"));
  }
  if (!std::isfinite(options.bspline_spacing_mm) || !(options.bspline_spacing_mm > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bspline_spacing_mm must be finite and > 0, got ", options.bspline_spacing_mm));
  }
  if (options.deformable_model == "bspline" && options.shards > 1) {
    return absl::InvalidArgumentError("deformable_model bspline runs unsharded: shards must be 1");
  }
  if (options.linear_samples < 0) {
    return absl::InvalidArgumentError(absl::StrCat("linear_samples must be >= 0 (0 = every voxel), got ",
                                                   options.linear_samples));
  }
  if (options.memory_mode != "lean" && options.memory_mode != "standard") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown memory_mode '", options.memory_mode, "': expected lean or standard"));
  }
  if (options.precision != "full" && options.precision != "mixed") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown precision '", options.precision, "': expected full or mixed"));
  }
  if (options.init != "com" && options.init != "none") {
    return absl::InvalidArgumentError(absl::StrCat("unknown init '", options.init, "': expected com or none"));
  }
  return ValidateGridSamplerTuning(options.sampler);
}

bool HasStage(const RegistrationOptions& o, const char* s) {
  return std::find(o.stages.begin(), o.stages.end(), s) != o.stages.end();
}

// True when a run's field smoothing comes from the images' noise
// (RegistrationOptions::smooth_warp_sigma < 0 with MI and the greedy
// deformable stage): only then are the noise estimates computed.
bool WarpSigmaNeedsNoise(const RegistrationOptions& options) {
  return options.smooth_warp_sigma < 0 && options.metric == "mi" && HasStage(options, "deformable") &&
         options.deformable_model != "bspline";
}

// RegistrationOptions::smooth_warp_sigma of a run: the caller's when >= 0;
// with WarpSigmaNeedsNoise, from the noise sigma of the noisier normalised
// image (noise_estimate.h; the noise arguments are read only then), with a
// log line saying so; else kFixedWarpSigma.
constexpr double kFixedWarpSigma = 0.5;
double ResolveWarpSigma(const RegistrationOptions& options, double fixed_noise, double moving_noise,
                        std::vector<std::string>* log) {
  if (!WarpSigmaNeedsNoise(options)) {
    return options.smooth_warp_sigma >= 0 ? options.smooth_warp_sigma : kFixedWarpSigma;
  }
  const double sigma = AutoWarpSigma(std::max(fixed_noise, moving_noise));
  log->push_back(absl::StrFormat(
      "deformable: field smoothing sigma %.3g voxels per iteration (auto: image noise sigma %.4f fixed, %.4f moving, "
      "of the normalised range)",
      sigma, fixed_noise, moving_noise));
  return sigma;
}


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

// Issue 13: the whole run within out_of_core.limit_bytes of device memory.
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
absl::StatusOr<RegistrationResult> RegisterBounded(const Volume& fixed, const Volume& moving,
                                                   const RegistrationOptions& requested,
                                                   const OutOfCoreChoice& out_of_core, const Stream& stream,
                                                   const ProgressCallback& progress, const std::atomic<bool>* cancel,
                                                   absl::Time deadline) {
  // Its smooth_warp_sigma is resolved once the images are normalised (below).
  RegistrationOptions options = requested;
  const Stream cpu = Stream::Cpu();
  const bool cuda = stream.backend() == Backend::kCuda;
  const MemoryKind host_kind = cuda ? MemoryKind::kPinned : MemoryKind::kHost;
  const int64_t limit = out_of_core.limit_bytes;
  const int shards = out_of_core.shards;
  RegistrationResult result;
  result.backend = std::string(BackendName(stream.backend()));
  result.log.push_back(out_of_core.reason);
  if (options.metric == "mi" && options.metric_options.mi_fixed_blur_voxels > 0 && HasStage(options, "deformable")) {
    result.log.push_back("deformable: the fixed image is not blurred for MI in a bounded run (metric.h)");
  }
  if (DeformableStageJitters(options) && HasStage(options, "deformable")) {
    result.log.push_back("deformable: the sampling grid is not jittered in a bounded run (metric.h)");
  }

  const GridSpace fixed_space = SpaceOf(fixed), moving_space = SpaceOf(moving);
  // The linear stages read the full-resolution level only when they iterate
  // there (or it is the only level): then its normalised float images are
  // kept; otherwise each exists only while its centre of mass and pyramid are
  // made, and the stages read the caller's volumes through SlabImages.
  bool linear_full = options.scales.front() == 1;
  for (size_t si = 0; si < options.scales.size(); ++si) {
    if (options.scales[si] != 1) continue;
    linear_full = linear_full || (HasStage(options, "rigid") && PerScale(options.rigid_iterations, si) > 0) ||
                  (HasStage(options, "affine") && PerScale(options.affine_iterations, si) > 0);
  }
  std::vector<Level> levels;
  levels.reserve(options.scales.size());
  for (int factor : options.scales) {
    Level level;
    level.factor = factor;
    level.fixed_space = fixed_space;
    level.moving_space = moving_space;
    if (factor != 1) {
      const Shape fs = DownsampledShape(fixed.data.shape(), factor), ms = DownsampledShape(moving.data.shape(), factor);
      TESSERA_ASSIGN_OR_RETURN(level.fixed, NDArray::Allocate(fs, DType::kFloat32, host_kind, stream.ordinal()));
      TESSERA_ASSIGN_OR_RETURN(level.moving, NDArray::Allocate(ms, DType::kFloat32, host_kind, stream.ordinal()));
      level.fixed_space = DownsampledSpace(fixed_space, fs);
      level.moving_space = DownsampledSpace(moving_space, ms);
    }
    levels.push_back(std::move(level));
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
    if (image == 0) initial.center = com;
    else moving_com = com;
    std::vector<std::pair<int, NDArray*>> outs;
    for (Level& l : levels) {
      if (l.factor == 1 && linear_full) (image == 0 ? l.fixed : l.moving) = norm;
      if (l.factor != 1) outs.push_back({l.factor, image == 0 ? &l.fixed : &l.moving});
    }
    TESSERA_ASSIGN_OR_RETURN(where[image], DownsampleToHost(norm, outs, stream, limit));
  }
  options.smooth_warp_sigma = ResolveWarpSigma(requested, noise[0], noise[1], &result.log);
  const char* fixed_where = where[0];
  const char* moving_where = where[1];
  if (options.init == "com") {
    for (int d = 0; d < 3; ++d) initial.translation[d] = moving_com[d] - initial.center[d];
  }
  // The full-resolution level of the out-of-core passes: the caller's volumes, normalised slab by slab.
  OutOfCoreLevel full_level;
  full_level.factor = 1;
  full_level.fixed_space = fixed_space;
  full_level.moving_space = moving_space;
  full_level.fixed = SlabImage{fixed.data, fixed_map.low, fixed_map.scale, /*normalize=*/true};
  full_level.moving = SlabImage{moving.data, moving_map.low, moving_map.scale, /*normalize=*/true};
  // Device bytes the run may still take (the limit less what it holds now).
  const std::shared_ptr<DeviceMemoryTracker> tracker = CurrentDeviceMemoryTracker();
  const auto room = [&] {
    const int64_t held = tracker != nullptr ? static_cast<int64_t>(tracker->current_bytes()) : 0;
    return limit == std::numeric_limits<int64_t>::max() ? limit : std::max<int64_t>(0, limit - held);
  };

  // The initial loss first, while the device is empty: its gradient scratch
  // stays resident (on the host it would be the run's host peak).
  TESSERA_ASSIGN_OR_RETURN(result.initial_loss,
                           OutOfCoreLoss(stream, options, initial.ToMat4(), full_level, NDArray(), shards, room()));

  // The linear stages' levels: on the device coarse to fine while they fit.
  std::vector<Level> linear = levels;
  size_t on_device = levels.size();
  if (cuda) {
    int64_t used = 0;
    on_device = 0;
    for (Level& l : linear) {
      if (l.fixed.empty()) break;  // the full level, not read by the linear stages
      used += LinearLevelDeviceBytes(l.fixed.num_elements(), l.moving.num_elements());
      if (used > limit) break;
      TESSERA_ASSIGN_OR_RETURN(l.fixed, l.fixed.CopyTo(MemoryKind::kDevice, stream, stream.ordinal()));
      TESSERA_ASSIGN_OR_RETURN(l.moving, l.moving.CopyTo(MemoryKind::kDevice, stream, stream.ordinal()));
      ++on_device;
    }
    TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  }
  const std::string limit_text = limit == std::numeric_limits<int64_t>::max() ? std::string("none (forced)")
                                                                               : absl::StrFormat("%.2f GB", limit / 1e9);
  result.log.push_back(absl::StrFormat(
      "bounded run (device limit %s): pyramid built on the %s (fixed) / %s (moving), host %s; linear stages on "
      "the %s at %d of %d levels%s; output slab by slab on %d shards; full-resolution images read from the "
      "caller's volumes (normalised slab by slab)",
      limit_text, fixed_where, moving_where, cuda ? "pinned" : "memory", cuda ? "gpu" : "cpu",
      static_cast<int>(on_device), static_cast<int>(levels.size()),
      on_device < levels.size() ? ", the finer ones on the host (cpu backend)" : "", shards));

  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<SimilarityMetric> metric,
                           SimilarityMetric::Create(options.metric, options.metric_options, stream));
  Engine engine(stream, options, metric.get(), progress, cancel, deadline);
  TESSERA_RETURN_IF_ERROR(engine.Init());
  std::unique_ptr<SimilarityMetric> host_metric;
  std::unique_ptr<Engine> host_engine;  // the levels that do not fit the device
  if (on_device < levels.size() && cuda) {
    TESSERA_ASSIGN_OR_RETURN(host_metric, SimilarityMetric::Create(options.metric, options.metric_options, cpu));
    host_engine = std::make_unique<Engine>(cpu, options, host_metric.get(), progress, cancel, deadline);
    TESSERA_RETURN_IF_ERROR(host_engine->Init());
  }
  Engine& first_engine = on_device > 0 ? engine : *host_engine;

  LinearTransform transform = initial;
  TESSERA_ASSIGN_OR_RETURN(double overlap, first_engine.OverlapMax(linear.front(), transform.ToMat4()));
  if (!(overlap > 0)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the images do not overlap in physical space",
        options.init == "com" ? " after centre-of-mass alignment" : " (init=none: check the headers' origins or use init=com)"));
  }
  engine.Report("init", 1, 0, 0, result.initial_loss);
  result.log.push_back(absl::StrFormat("init: centre-of-mass shift (%.2f, %.2f, %.2f) mm, loss %.6g",
                                       transform.translation[0], transform.translation[1], transform.translation[2],
                                       result.initial_loss));
  for (auto [model, stage, iterations] :
       {std::make_tuple(TransformModel::kRigid, "rigid", &options.rigid_iterations),
        std::make_tuple(TransformModel::kAffine, "affine", &options.affine_iterations)}) {
    if (!HasStage(options, stage)) continue;
    TESSERA_ASSIGN_OR_RETURN(transform, engine.RunLinearStage(model, stage, transform, linear, *iterations,
                                                              &result.log, 0, on_device));
    if (host_engine != nullptr) {
      TESSERA_ASSIGN_OR_RETURN(transform, host_engine->RunLinearStage(model, stage, transform, linear, *iterations,
                                                                      &result.log, on_device));
    }
  }
  result.affine_ras = transform.ToMat4();
  engine.ReleaseBuffers();
  linear.clear();  // the device copies
  host_engine.reset();

  NDArray u;  // normalised units, host, the fixed grid
  if (HasStage(options, "deformable")) {
    std::vector<OutOfCoreLevel> lean;
    for (const Level& l : levels) {
      if (l.factor == 1) {
        lean.push_back(full_level);
      } else {
        lean.push_back({l.factor, l.fixed_space, l.moving_space, SlabImage{l.fixed}, SlabImage{l.moving}});
      }
    }
    levels.clear();  // the stage holds the pyramid now
    DeformableStageHooks hooks{[&engine] { return engine.CheckCancelled(); },
                               [&engine](int f, int it, int max_it, double loss) {
                                 engine.Report("deformable", f, it, max_it, loss);
                               }};
    TESSERA_ASSIGN_OR_RETURN(u, RunOutOfCoreDeformableStage(stream, options, hooks, result.affine_ras, lean, shards,
                                                            &result.log, /*result_on_host=*/true, room()));
    lean.clear();
    if (!u.empty() && DimsOf(u).size() != DimsOf(fixed.data).size()) {
      TESSERA_ASSIGN_OR_RETURN(NDArray up, NDArray::Allocate({fixed.data.dim(0), fixed.data.dim(1), fixed.data.dim(2), 3},
                                                             DType::kFloat32, host_kind, stream.ordinal()));
      TESSERA_RETURN_IF_ERROR(UpsampleDisplacement(u, &up, DisplacementUnits::kNormalized, cpu));
      u = std::move(up);
    }
  }
  levels.clear();
  engine.Report("output", 1, 0, 0, 0);

  // The warp of the original intensities (any dtype, converted slab by slab).
  TESSERA_ASSIGN_OR_RETURN(OutOfCoreOutputs out, RunOutOfCoreOutputs(stream, options, result.affine_ras, full_level,
                                                                     SlabImage{moving.data}, u, shards, room()));
  result.final_loss = out.loss;
  result.warped.data = std::move(out.warped);
  result.warped.geometry = fixed.geometry;
  result.warped.description = "tessera warped moving image";
  if (!u.empty()) {
    result.jacobian = out.jacobian;
    // v = L^-1 u (RAS mm before T), in place on the host.
    TESSERA_ASSIGN_OR_RETURN(Mat3 l, PhysicalToNormalizedDisplacement(result.affine_ras, moving_space));
    TESSERA_ASSIGN_OR_RETURN(Mat3 l_inv, Invert3(l));
    TESSERA_RETURN_IF_ERROR(MixComponents(u, l_inv, cpu));
    result.displacement_ras = std::move(u);
  }
  return result;
}
}  // namespace

absl::StatusOr<RegistrationResult> Register(const Volume& fixed, const Volume& moving,
                                            const RegistrationOptions& requested, const ProgressCallback& progress,
                                            const std::atomic<bool>* cancel, absl::Time deadline) {
  TESSERA_RETURN_IF_ERROR(ValidateInputs(fixed, moving, requested));
  const absl::Time start = absl::Now();
  TESSERA_ASSIGN_OR_RETURN(Backend backend, ResolveBackend(requested.device));
  TESSERA_RETURN_IF_ERROR(ValidateShardedOptions(requested, backend));
  // Sharded ranks name their GPUs; the rest of the run is on the first.
  const int ordinal = backend == Backend::kCuda && !requested.gpus.empty() ? requested.gpus.front() : 0;
  TESSERA_ASSIGN_OR_RETURN(Stream stream, Stream::Create(backend, ordinal));
  const MemoryKind kind = MemoryKindFor(stream);
  // This registration's device memory, also charged to the caller's tracker.
  auto memory = std::make_shared<DeviceMemoryTracker>(CurrentDeviceMemoryTracker());
  ScopedDeviceMemoryCharge charge(memory);
  // Out of core (a device budget, a pair larger than the GPU's free memory,
  // or forced): every phase of the run within the limit (RegisterBounded).
  TESSERA_ASSIGN_OR_RETURN(const OutOfCoreChoice out_of_core,
                           ChooseOutOfCore(requested, stream, DimsOf(fixed.data), DimsOf(moving.data)));
  if (out_of_core.shards > 0) {
    TESSERA_ASSIGN_OR_RETURN(RegistrationResult result, RegisterBounded(fixed, moving, requested, out_of_core, stream,
                                                                        progress, cancel, deadline));
    result.peak_device_bytes = memory->peak_bytes();
    result.seconds = absl::ToDoubleSeconds(absl::Now() - start);
    return result;
  }

  TESSERA_ASSIGN_OR_RETURN(NDArray fixed_norm, NormalizedIntensitiesParallel(fixed, "fixed"));
  TESSERA_ASSIGN_OR_RETURN(NDArray moving_norm, NormalizedIntensitiesParallel(moving, "moving"));
  const GridSpace fixed_space = SpaceOf(fixed), moving_space = SpaceOf(moving);
  std::vector<std::string> setup_log;
  const RegistrationOptions options = [&] {
    RegistrationOptions o = requested;
    const bool estimate = WarpSigmaNeedsNoise(requested);
    o.smooth_warp_sigma = ResolveWarpSigma(requested, estimate ? EstimateNoiseSigma(fixed_norm) : 0,
                                           estimate ? EstimateNoiseSigma(moving_norm) : 0, &setup_log);
    return o;
  }();

  // Pyramid in stream memory; the full-resolution level is kept for output.
  Level full;
  full.factor = 1;
  full.fixed_space = fixed_space;
  full.moving_space = moving_space;
  // Centre-of-mass initialisation: rotate about the fixed image's centre of
  // mass, translate it onto the moving image's.
  LinearTransform initial;
  initial.center = CentreOfMassParallel(fixed_norm, fixed.geometry);
  if (options.init == "com") {
    const std::array<double, 3> moving_com = CentreOfMassParallel(moving_norm, moving.geometry);
    for (int d = 0; d < 3; ++d) initial.translation[d] = moving_com[d] - initial.center[d];
  }
  // The host copies end here (on the CPU backend they become the level).
  if (kind == MemoryKind::kHost) {
    full.fixed = std::move(fixed_norm);
    full.moving = std::move(moving_norm);
  } else {
    TESSERA_ASSIGN_OR_RETURN(full.fixed, fixed_norm.CopyTo(kind, stream, stream.ordinal()));
    TESSERA_ASSIGN_OR_RETURN(full.moving, moving_norm.CopyTo(kind, stream, stream.ordinal()));
    TESSERA_RETURN_IF_ERROR(stream.Synchronize());
    fixed_norm = NDArray();
    moving_norm = NDArray();
  }
  std::vector<Level> levels;
  for (int factor : options.scales) {
    if (factor == 1) {
      levels.push_back(full);
      continue;
    }
    Level level;
    level.factor = factor;
    for (auto [in, out, space, out_space] :
         {std::tuple<const NDArray*, NDArray*, const GridSpace*, GridSpace*>{&full.fixed, &level.fixed, &fixed_space,
                                                                             &level.fixed_space},
          {&full.moving, &level.moving, &moving_space, &level.moving_space}}) {
      const Shape shape = DownsampledShape(in->shape(), factor);
      TESSERA_ASSIGN_OR_RETURN(*out, NDArray::Allocate(shape, DType::kFloat32, kind, stream.ordinal()));
      TESSERA_RETURN_IF_ERROR(DownsampleVolume(*in, out, stream));
      *out_space = DownsampledSpace(*space, shape);
    }
    levels.push_back(std::move(level));
  }

  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<SimilarityMetric> metric,
                           SimilarityMetric::Create(options.metric, options.metric_options, stream));
  Engine engine(stream, options, metric.get(), progress, cancel, deadline);
  TESSERA_RETURN_IF_ERROR(engine.Init());
  RegistrationResult result;
  result.backend = std::string(BackendName(backend));

  LinearTransform transform = initial;
  TESSERA_ASSIGN_OR_RETURN(double overlap, engine.OverlapMax(levels.front(), transform.ToMat4()));
  if (!(overlap > 0)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the images do not overlap in physical space",
        options.init == "com" ? " after centre-of-mass alignment" : " (init=none: check the headers' origins or use init=com)"));
  }
  TESSERA_ASSIGN_OR_RETURN(result.initial_loss, engine.LinearLoss(full, transform.ToMat4(), nullptr));
  engine.Report("init", 1, 0, 0, result.initial_loss);
  result.log.push_back(absl::StrFormat("init: centre-of-mass shift (%.2f, %.2f, %.2f) mm, loss %.6g",
                                       transform.translation[0], transform.translation[1], transform.translation[2],
                                       result.initial_loss));
  for (std::string& line : setup_log) result.log.push_back(std::move(line));

  if (HasStage(options, "rigid")) {
    TESSERA_ASSIGN_OR_RETURN(transform, engine.RunLinearStage(TransformModel::kRigid, "rigid", transform, levels,
                                                              options.rigid_iterations, &result.log));
  }
  if (HasStage(options, "affine")) {
    TESSERA_ASSIGN_OR_RETURN(transform, engine.RunLinearStage(TransformModel::kAffine, "affine", transform, levels,
                                                              options.affine_iterations, &result.log));
  }
  result.affine_ras = transform.ToMat4();

  // The deformation, carried to full resolution.
  NDArray u_full;
  if (HasStage(options, "deformable")) {
    // Mixed precision: the stage sees fp16 levels and no float copy stays
    // alive (full shares its buffers with the factor-1 level). (Out of core
    // runs take RegisterBounded above.)
    const bool mixed = LeanStageUsesMixedPrecision(options);
    if (mixed) {
      for (Level& l : levels) TESSERA_RETURN_IF_ERROR(ConvertLevelToHalf(l, stream));
      for (const Level& l : levels) {
        if (l.factor == 1) {
          full.fixed = NDArray();
          full.moving = NDArray();
        }
      }
    }
    // MI: the fixed levels blurred as the interpolation blurs the warped image
    // (MetricOptions::mi_fixed_blur_voxels; in place: the linear stages are
    // done, and the final loss compares the same images).
    const double blur = options.metric_options.mi_fixed_blur_voxels;
    if (options.metric == "mi" && blur > 0 && !mixed) {
      for (Level& l : levels) TESSERA_RETURN_IF_ERROR(GaussianSmooth(l.fixed, &l.fixed, {blur, blur, blur}, stream));
      result.log.push_back(absl::StrFormat("deformable: fixed image blurred by sigma %.3g voxels per level (MI)", blur));
    }
    if (DeformableStageJitters(options) && options.deformable_model != "bspline" &&
        (options.shards > 1 || options.process_group != nullptr) && !ShardedStageJitters(options, stream)) {
      result.log.push_back("deformable: the sampling grid is not jittered (sharded stage; metric.h)");
    }
    TESSERA_ASSIGN_OR_RETURN(NDArray u, engine.RunDeformableStage(result.affine_ras, levels, &result.log));
    if (mixed) {
      // The output phase needs the full-resolution float images back; the
      // coarser levels are done.
      for (Level& l : levels) {
        if (l.factor == 1 && full.fixed.empty()) {
          TESSERA_RETURN_IF_ERROR(ConvertLevelToFloat(l, stream));
          full.fixed = l.fixed;
          full.moving = l.moving;
        }
      }
      levels.clear();
    }
    if (u.dim(0) != full.fixed.dim(0) || u.dim(1) != full.fixed.dim(1) || u.dim(2) != full.fixed.dim(2)) {
      TESSERA_ASSIGN_OR_RETURN(u_full, NDArray::Allocate({full.fixed.dim(0), full.fixed.dim(1), full.fixed.dim(2), 3},
                                                         DType::kFloat32, kind, stream.ordinal()));
      TESSERA_RETURN_IF_ERROR(UpsampleDisplacement(u, &u_full, DisplacementUnits::kNormalized, stream));
    } else {
      u_full = std::move(u);
    }
  }
  engine.Report("output", 1, 0, 0, 0);

  // Final loss at full resolution, then the warped original intensities.
  TESSERA_ASSIGN_OR_RETURN(Affine12 a_full, SamplerAffineFromPhysical(result.affine_ras, fixed_space, moving_space));
  TESSERA_RETURN_IF_ERROR(engine.UploadAffine(a_full));
  TESSERA_RETURN_IF_ERROR(engine.EnsureImageBuffers(full, /*with_grad=*/false));
  GridSampleArgs args = engine.Args(full, u_full.empty() ? nullptr : &u_full);
  TESSERA_RETURN_IF_ERROR(GridSample(stream, args, engine.warped().data<float>(), options.sampler));
  TESSERA_ASSIGN_OR_RETURN(result.final_loss, metric->Evaluate(full.fixed, engine.warped(), nullptr));
  // The normalised images are done: free them (and the pyramid) before the
  // original moving image is uploaded.
  levels.clear();
  full.fixed = NDArray();
  full.moving = NDArray();

  NDArray moving_f32;  // only for non-float inputs: float ones are copied to the stream directly
  if (moving.data.dtype() != DType::kFloat32) {
    TESSERA_ASSIGN_OR_RETURN(moving_f32, moving.data.AsType(DType::kFloat32));
  }
  const NDArray& moving_float = moving.data.dtype() == DType::kFloat32 ? moving.data : moving_f32;
  TESSERA_ASSIGN_OR_RETURN(NDArray moving_dev, moving_float.CopyTo(kind, stream, stream.ordinal()));
  moving_f32 = NDArray();
  args.image = moving_dev.data<float>();
  TESSERA_RETURN_IF_ERROR(GridSample(stream, args, engine.warped().data<float>(), options.sampler));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  moving_dev = NDArray();
  TESSERA_ASSIGN_OR_RETURN(result.warped.data, engine.warped().CopyTo(MemoryKind::kHost, stream));
  result.warped.geometry = fixed.geometry;
  result.warped.description = "tessera warped moving image";

  if (!u_full.empty()) {
    TESSERA_ASSIGN_OR_RETURN(result.jacobian,
                             JacobianDeterminant(u_full, nullptr, stream, DisplacementUnits::kNormalized));
    // v = L^-1 u: normalised sampler displacement -> RAS mm before T.
    TESSERA_ASSIGN_OR_RETURN(Mat3 l, PhysicalToNormalizedDisplacement(result.affine_ras, moving_space));
    TESSERA_ASSIGN_OR_RETURN(Mat3 l_inv, Invert3(l));
    // In place on the stream's device, then one copy out: no second
    // field-sized host buffer (45 GB at 1550^3).
    TESSERA_RETURN_IF_ERROR(MixComponents(u_full, l_inv, stream));
    TESSERA_ASSIGN_OR_RETURN(result.displacement_ras, u_full.CopyTo(MemoryKind::kHost, stream));
    u_full = NDArray();
  }
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  result.peak_device_bytes = memory->peak_bytes();
  result.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return result;
}

absl::StatusOr<NDArray> WarpLabels(const Volume& moving_labels, const Volume& fixed_like,
                                   const RegistrationResult& result, const std::string& device,
                                   GridSamplerTuning sampler) {
  if (moving_labels.data.rank() != 3) return absl::InvalidArgumentError("labels must be a 3-D volume");
  TESSERA_ASSIGN_OR_RETURN(Backend backend, ResolveBackend(device));
  TESSERA_ASSIGN_OR_RETURN(Stream stream, Stream::Create(backend));
  const MemoryKind kind = MemoryKindFor(stream);
  const GridSpace fixed_space = SpaceOf(fixed_like), label_space = SpaceOf(moving_labels);
  TESSERA_ASSIGN_OR_RETURN(NDArray labels32, moving_labels.data.AsType(DType::kInt32));
  TESSERA_ASSIGN_OR_RETURN(NDArray labels_dev, labels32.CopyTo(kind, stream, stream.ordinal()));
  TESSERA_ASSIGN_OR_RETURN(Affine12 a, SamplerAffineFromPhysical(result.affine_ras, fixed_space, label_space));
  float host_affine[12];
  for (int i = 0; i < 12; ++i) host_affine[i] = static_cast<float>(a[i]);
  TESSERA_ASSIGN_OR_RETURN(NDArray affine, NDArray::Allocate({12}, DType::kFloat32, kind, stream.ordinal()));
  TESSERA_RETURN_IF_ERROR(CopyBytes(affine.raw_data(), kind, host_affine, MemoryKind::kHost, sizeof(host_affine), stream));
  // u = L v for the labels' grid.
  NDArray u_dev;
  if (!result.displacement_ras.empty()) {
    TESSERA_ASSIGN_OR_RETURN(Mat3 l, PhysicalToNormalizedDisplacement(result.affine_ras, label_space));
    TESSERA_ASSIGN_OR_RETURN(NDArray u, NDArray::Allocate(result.displacement_ras.shape(), DType::kFloat32));
    const int64_t n = u.num_elements() / 3;
    const float* vv = result.displacement_ras.data<float>();
    float* uu = u.data<float>();
    for (int64_t i = 0; i < n; ++i) {
      for (int r = 0; r < 3; ++r) {
        uu[r * n + i] = static_cast<float>(l[r * 3] * vv[i] + l[r * 3 + 1] * vv[n + i] + l[r * 3 + 2] * vv[2 * n + i]);
      }
    }
    TESSERA_ASSIGN_OR_RETURN(u_dev, u.CopyTo(kind, stream, stream.ordinal()));
  }
  GridSampleArgs args;
  args.image_dims = Dims3{labels32.dim(0), labels32.dim(1), labels32.dim(2)};
  args.affine = affine.data<float>();
  args.disp = u_dev.empty() ? nullptr : u_dev.data<float>();
  args.out_dims = Dims3{fixed_like.data.dim(0), fixed_like.data.dim(1), fixed_like.data.dim(2)};
  args.padding = Padding::kZeros;
  TESSERA_ASSIGN_OR_RETURN(NDArray out, NDArray::Allocate(fixed_like.data.shape(), DType::kInt32, kind, stream.ordinal()));
  TESSERA_RETURN_IF_ERROR(GridSampleNearest(stream, labels_dev.data<int32_t>(), args, out.data<int32_t>(), sampler));
  return out.CopyTo(MemoryKind::kHost, stream);
}

}  // namespace tessera::registration
