#include "kernels/registration/pipeline/bspline_stage.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/memory_kind_for.h"
#include "common/status.h"
#include "kernels/registration/adam.h"
#include "kernels/registration/field_ops.h"
#include "kernels/registration/grid_sampler.h"
#include "kernels/registration/pipeline/array_helpers.h"
#include "kernels/registration/pipeline/per_scale.h"
#include "kernels/registration/pipeline/grid_jitter.h"
#include "kernels/registration/pipeline/largest_magnitude.h"
#include "kernels/registration/pipeline/metric.h"
#include "kernels/registration/pipeline/metric_mask.h"
#include "kernels/registration/pipeline/plateau_stop.h"
#include "kernels/registration/pipeline/step_control.h"

namespace tessera::registration {
namespace {

Shape ControlShape(const BsplineGrid& g) { return {g[0].controls, g[1].controls, g[2].controls, 3}; }

// Component factors of x -> 1 / x, keeping 0 for flat axes (no motion there).
std::array<float, 3> Inverse(const std::array<float, 3>& f) {
  std::array<float, 3> r{};
  for (int a = 0; a < 3; ++a) r[a] = f[a] != 0.f ? 1.f / f[a] : 0.f;
  return r;
}

}  // namespace

absl::StatusOr<BsplineGrid> BsplineGridFor(const GridSpace& space, double spacing_mm) {
  if (!std::isfinite(spacing_mm) || !(spacing_mm > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("bspline_spacing_mm must be finite and > 0, got ", spacing_mm));
  }
  BsplineGrid grid;
  for (int a = 0; a < 3; ++a) {
    TESSERA_ASSIGN_OR_RETURN(grid[a], MakeBsplineAxis(space.dims[a], spacing_mm / space.geometry.spacing[a]));
  }
  return grid;
}

absl::StatusOr<NDArray> RunBsplineStage(const Stream& stream, const RegistrationOptions& options,
                                        const DeformableStageHooks& hooks, const Mat4& t,
                                        const std::vector<DeformableLevel>& levels, std::vector<std::string>* log) {
  const MemoryKind kind = MemoryKindFor(stream);
  const bool adam = options.deformable_step == DeformableStep::kAdam;
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<SimilarityMetric> metric,
                           SimilarityMetric::Create(options.metric, options.metric_options, stream));
  TESSERA_ASSIGN_OR_RETURN(NDArray affine, NDArray::Allocate({12}, DType::kFloat32, kind, stream.ordinal()));
  const auto allocate = [&](const Shape& shape) { return NDArray::Allocate(shape, DType::kFloat32, kind, stream.ordinal()); };
  Workspace spline_workspace, sampler_workspace;
  MetricMask mask(stream, options);  // issue 34: inactive without masks
  NDArray c;  // control coefficients, normalised sampler units (level independent)
  NDArray u;  // B c on the current level
  BsplineGrid grid{};
  const int levels_count = static_cast<int>(levels.size());
  for (int si = 0; si < levels_count; ++si) {
    const DeformableLevel& level = levels[si];
    if (level.fixed == nullptr || level.moving == nullptr) {  // fp16 levels (precision "mixed")
      return absl::InvalidArgumentError("deformable_model bspline needs float images: use precision full");
    }
    const NDArray& fixed = *level.fixed;
    // The grid doubles its spacing per coarser level, so levels nest exactly.
    const double spacing_mm = options.bspline_spacing_mm * std::ldexp(1.0, levels_count - 1 - si);
    TESSERA_ASSIGN_OR_RETURN(BsplineGrid level_grid, BsplineGridFor(level.fixed_space, spacing_mm));
    TESSERA_ASSIGN_OR_RETURN(NDArray level_c, allocate(ControlShape(level_grid)));
    if (c.empty()) {
      TESSERA_RETURN_IF_ERROR(FillZero(level_c, stream));
    } else {
      TESSERA_RETURN_IF_ERROR(BsplineRefine(c, &level_c, stream, &spline_workspace));
    }
    c = std::move(level_c);
    grid = level_grid;
    const Shape field_shape = {fixed.dim(0), fixed.dim(1), fixed.dim(2), 3};
    u = NDArray();  // the coarser level's field first
    TESSERA_ASSIGN_OR_RETURN(u, allocate(field_shape));
    TESSERA_RETURN_IF_ERROR(BsplineEvaluate(grid, c, &u, stream, &spline_workspace));
    const int max_it = PerScale(options.deformable_iterations, si);
    if (max_it <= 0) continue;
    const absl::Time start = absl::Now();
    TESSERA_ASSIGN_OR_RETURN(NDArray warped, allocate(fixed.shape()));
    TESSERA_ASSIGN_OR_RETURN(NDArray grad_w, allocate(fixed.shape()));
    TESSERA_ASSIGN_OR_RETURN(NDArray g, allocate(field_shape));
    TESSERA_ASSIGN_OR_RETURN(NDArray gc, allocate(c.shape()));
    NDArray m, v;  // Adam's moments live on the control grid, fresh per level
    if (adam) {
      TESSERA_ASSIGN_OR_RETURN(m, allocate(c.shape()));
      TESSERA_ASSIGN_OR_RETURN(v, allocate(c.shape()));
      TESSERA_RETURN_IF_ERROR(FillZero(m, stream));
      TESSERA_RETURN_IF_ERROR(FillZero(v, stream));
    }
    TESSERA_ASSIGN_OR_RETURN(Affine12 a, SamplerAffineFromPhysical(t, level.fixed_space, level.moving_space));
    float host_affine[12];
    for (int i = 0; i < 12; ++i) host_affine[i] = static_cast<float>(a[i]);
    TESSERA_RETURN_IF_ERROR(CopyBytes(affine.raw_data(), kind, host_affine, MemoryKind::kHost, sizeof(host_affine), stream));
    const Dims3 dims = DimsOf(fixed);
    // Normalised units per voxel of this level; steps are taken in voxels.
    const std::array<float, 3> to_normalized = {dims.nx > 1 ? 2.f / static_cast<float>(dims.nx - 1) : 0.f,
                                                dims.ny > 1 ? 2.f / static_cast<float>(dims.ny - 1) : 0.f,
                                                dims.nz > 1 ? 2.f / static_cast<float>(dims.nz - 1) : 0.f};
    TESSERA_RETURN_IF_ERROR(mask.SetLevel(level.factor, level.fixed_space, level.moving_space));
    GridSampleArgs args;
    args.image = level.moving->data<float>();
    args.image_dims = DimsOf(*level.moving);
    args.affine = affine.data<float>();
    args.disp = u.data<float>();
    args.out_dims = dims;
    args.padding = Padding::kZeros;
    // MI's jittered sampling grid, as in the greedy stage (grid_jitter.h): the
    // fixed image is resampled on each iteration's grid beside the moving one.
    const bool jitter = DeformableStageJitters(options);
    NDArray shifted_fixed;
    if (jitter) {
      TESSERA_ASSIGN_OR_RETURN(shifted_fixed, allocate(fixed.shape()));
    }
    GridJitter grid_jitter(options.sampling_seed, si, dims.nx, dims.ny, dims.nz);
    GridSampleArgs fixed_args = jitter ? GridJitter::FixedImageArgs(fixed.data<float>(), dims) : GridSampleArgs();
    PlateauStop stop = DeformablePlateauStop(options, jitter, si + 1 == levels_count, max_it);
    StepControl control = DeformableStepControl(options, jitter);
    AdamOptions adam_options;
    int it = 0;
    for (it = 1; it <= max_it; ++it) {
      if (hooks.check_cancelled) TESSERA_RETURN_IF_ERROR(hooks.check_cancelled());
      if (jitter) {
        grid_jitter.Advance(options.metric_options.mi_voxel_jitter, &args, &fixed_args);
        TESSERA_RETURN_IF_ERROR(GridSample(stream, fixed_args, shifted_fixed.data<float>(), options.sampler));
      }
      TESSERA_RETURN_IF_ERROR(GridSample(stream, args, warped.data<float>(), options.sampler));
      double loss = 0;
      if (mask.active()) {
        TESSERA_ASSIGN_OR_RETURN(const VoxelMask m, mask.Update(args));
        TESSERA_ASSIGN_OR_RETURN(loss, metric->Evaluate(jitter ? shifted_fixed : fixed, warped, &grad_w,
                                                        &mask.combined(), m.count));
      } else {
        TESSERA_ASSIGN_OR_RETURN(loss, metric->Evaluate(jitter ? shifted_fixed : fixed, warped, &grad_w));
      }
      stop.Update(loss);
      const double lr = control.Update(loss);
      if (hooks.report) hooks.report(level.factor, it, max_it, loss);
      if (stop.done()) break;
      GridSampleGrads grads;
      grads.grad_disp = g.data<float>();
      TESSERA_RETURN_IF_ERROR(
          GridSampleBackward(stream, args, grad_w.data<float>(), grads, &sampler_workspace, options.sampler));
      TESSERA_RETURN_IF_ERROR(BsplineAdjoint(grid, g, &gc, stream, &spline_workspace));
      // dL/dc in normalised units -> per voxel of this level (chain rule).
      TESSERA_RETURN_IF_ERROR(ScaleComponents(gc, to_normalized, stream));
      if (adam) {
        adam_options.lr = lr;
        TESSERA_RETURN_IF_ERROR(ScaleComponents(c, Inverse(to_normalized), stream));
        TESSERA_RETURN_IF_ERROR(AdamStep(c, gc, m, v, adam_options, it, stream));
        TESSERA_RETURN_IF_ERROR(ScaleComponents(c, to_normalized, stream));
      } else {
        // Steepest descent scaled so the largest control step is lr voxels.
        TESSERA_ASSIGN_OR_RETURN(const double largest, LargestFiniteMagnitude(gc, stream));
        if (!(largest > 0)) break;  // no gradient: nothing left to move
        const float scale = static_cast<float>(-lr / largest);
        TESSERA_RETURN_IF_ERROR(ScaleComponents(
            gc, {scale * to_normalized[0], scale * to_normalized[1], scale * to_normalized[2]}, stream));
        TESSERA_RETURN_IF_ERROR(Axpy(1.f, gc, c, stream));
      }
      TESSERA_RETURN_IF_ERROR(BsplineEvaluate(grid, c, &u, stream, &spline_workspace));
    }
    log->push_back(absl::StrFormat(
        "deformable x%d (bspline %.3g mm, %lldx%lldx%lld controls%s): %d iterations, loss %.6g -> %.6g (best %.6g), %.2f s",
        level.factor, spacing_mm, static_cast<long long>(grid[0].controls), static_cast<long long>(grid[1].controls),
        static_cast<long long>(grid[2].controls), JitterLogTag(options, jitter), std::min(it, max_it), stop.first(),
        stop.last(), stop.best(),
        absl::ToDoubleSeconds(absl::Now() - start)));
    TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  }
  return u;
}

}  // namespace tessera::registration
