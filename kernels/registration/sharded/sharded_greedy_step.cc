#include "kernels/registration/sharded/sharded_greedy_step.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/array_stats.h"
#include "common/buffer.h"
#include "common/memory_kind_for.h"
#include "common/status.h"
#include "kernels/registration/sharded/ring_sampler.h"
#include "kernels/registration/sharded/sharded_ops.h"
#include "kernels/registration/field_ops.h"
#include "kernels/registration/grid_sampler.h"
#include "kernels/registration/lean_compose.h"
#include "kernels/registration/slice_sums.h"

namespace tessera {
namespace parallel {
namespace {

absl::Status AllocateFields(ShardedGreedyState& s, const GreedyStepOptions& options, const Stream& stream) {
  const MemoryKind kind = MemoryKindFor(stream);
  std::vector<NDArray*> fields = {&s.u, &s.grad_u};
  if (options.rule == GreedyRule::kAdam) fields.insert(fields.end(), {&s.m, &s.v});
  for (NDArray* f : fields) {
    TESSERA_ASSIGN_OR_RETURN(*f, NDArray::Allocate(s.layout.LocalShape(3), DType::kFloat32, kind, stream.ordinal()));
    TESSERA_RETURN_IF_ERROR(registration::FillZero(*f, stream));
  }
  for (NDArray* f : {&s.warped, &s.grad_w}) {
    TESSERA_ASSIGN_OR_RETURN(*f, NDArray::Allocate(s.layout.LocalShape(1), DType::kFloat32, kind, stream.ordinal()));
    TESSERA_RETURN_IF_ERROR(registration::FillZero(*f, stream));
  }
  TESSERA_ASSIGN_OR_RETURN(s.affine_stream, NDArray::Allocate({12}, DType::kFloat32, kind, stream.ordinal()));
  TESSERA_RETURN_IF_ERROR(CopyBytes(s.affine_stream.raw_data(), kind, s.affine, MemoryKind::kHost, sizeof(s.affine), stream));
  return stream.Synchronize();
}

// The grid sampler's arguments for the local slab on the whole moving image:
// the slab's slices of the whole grid (grid_nz, out_z0; issue 39: every voxel
// sampled as in the unsharded stage, bit for bit) with the grid jitter.
registration::GridSampleArgs WholeMovingArgs(const ShardedGreedyState& st) {
  const SlabLayout& l = st.layout;
  registration::GridSampleArgs args;
  args.image = st.moving.data<float>();
  args.image_dims = {st.moving.dim(0), st.moving.dim(1), st.moving.dim(2)};
  args.affine = st.affine_stream.data<float>();
  args.disp = st.u.data<float>();
  args.out_dims = l.local_dims();
  args.padding = registration::Padding::kZeros;
  std::copy(st.grid_lo, st.grid_lo + 3, args.grid_lo);
  std::copy(st.grid_hi, st.grid_hi + 3, args.grid_hi);
  args.voxel_jitter_key = st.voxel_jitter_key;
  args.grid_nz = l.global.nz;
  args.out_z0 = l.local_z0();
  return args;
}

// Zeroes the halo slices of a local planar field (so global reductions over
// the local array see own values only).
absl::Status ZeroHalos(const SlabLayout& l, NDArray& field, const Stream& stream) {
  const int64_t lv = l.local_voxels(), slice = l.slice();
  const std::vector<float> zeros(static_cast<size_t>(std::max(l.halo_lo, l.halo_hi) * slice), 0.f);
  const MemoryKind kind = field.memory_kind();
  for (int c = 0; c < 3; ++c) {
    float* base = field.data<float>() + c * lv;
    for (auto [at, slices] : {std::pair<float*, int64_t>{base, l.halo_lo},
                              {base + l.own_offset() + l.own_voxels(), l.halo_hi}}) {
      if (slices == 0) continue;
      TESSERA_RETURN_IF_ERROR(CopyBytes(at, kind, zeros.data(), MemoryKind::kHost,
                                        static_cast<size_t>(slices * slice) * sizeof(float), stream));
    }
  }
  return absl::OkStatus();
}

}  // namespace

double GreedyStepBoundSup(const GreedyStepOptions& options) {
  registration::GreedyStep step;
  if (options.rule == GreedyRule::kNormalized) {
    step.rule = registration::GreedyStep::Rule::kScaled;
    step.scale = static_cast<float>(options.lr_voxels);
    step.max_abs_grad = 1.f;
    return registration::GreedyStepBoundVoxels(step);
  }
  // Adam's bound grows with t towards its limit (about 7.3 lr at the default
  // betas); sample t geometrically far past where it settles.
  step.rule = registration::GreedyStep::Rule::kAdam;
  step.adam.lr = options.lr_voxels;
  double sup = 0;
  for (int64_t t = 1; t <= (int64_t{1} << 24); t = t < 64 ? t + 1 : t * 2) {
    step.t = t;
    sup = std::max(sup, registration::GreedyStepBoundVoxels(step));
  }
  return sup;
}

int64_t GreedyStepHalo(const GreedyStepOptions& options) {
  int64_t h = std::max(SmoothingHalo(options.smooth_grad_sigma), SmoothingHalo(options.smooth_warp_sigma));
  if (options.metric == GreedyMetric::kLncc) h = std::max(h, LnccHalo(options.lncc.window));
  return std::max(h, registration::ComposeHaloSlices(GreedyStepBoundSup(options)));
}

absl::StatusOr<ShardedGreedyState> MakeShardedGreedyState(const SlabLayout& layout, NDArray fixed,
                                                          const SlabLayout& moving_layout, NDArray moving,
                                                          const float affine[12], const GreedyStepOptions& options,
                                                          const Stream& stream) {
  ShardedGreedyState s;
  s.layout = layout;
  s.fixed = std::move(fixed);
  s.moving_layout = moving_layout;
  s.moving = std::move(moving);
  std::memcpy(s.affine, affine, sizeof(s.affine));
  TESSERA_RETURN_IF_ERROR(AllocateFields(s, options, stream));
  return s;
}

absl::StatusOr<ShardedGreedyState> MakeShardedGreedyStateWholeMoving(const SlabLayout& layout, NDArray fixed,
                                                                     NDArray moving, const float affine[12],
                                                                     const GreedyStepOptions& options,
                                                                     const Stream& stream) {
  if (moving.rank() != 3) {
    return absl::InvalidArgumentError(absl::StrCat("whole moving image must be 3-D, got ", ShapeToString(moving.shape())));
  }
  ShardedGreedyState s;
  s.layout = layout;
  s.fixed = std::move(fixed);
  s.moving = std::move(moving);
  s.moving_whole = true;
  std::memcpy(s.affine, affine, sizeof(s.affine));
  TESSERA_RETURN_IF_ERROR(AllocateFields(s, options, stream));
  return s;
}

absl::Status GreedySamplePhase(Communicator& comm, ShardedGreedyState& st, const GreedyStepOptions& options,
                               const Stream& stream) {
  const SlabLayout& l = st.layout;
  const int64_t halo = GreedyStepHalo(options);
  if ((l.rank > 0 && l.halo_lo < halo) || (l.rank + 1 < l.ranks && l.halo_hi < halo)) {
    return absl::InvalidArgumentError(absl::StrCat("greedy step needs halos of ", halo, " slices, ", l.ToString()));
  }
  if (st.moving_whole) return registration::GridSample(stream, WholeMovingArgs(st), st.warped.data<float>());
  if (st.moving_window) {
    // Warp and the sampling Jacobian (into grad_u) from the window in hand.
    WindowSampleArgs wa;
    wa.out_layout = l;
    wa.disp = st.u.data<float>();
    wa.affine = st.affine;
    wa.padding = registration::Padding::kZeros;
    wa.moving_dims = {st.moving_layout.global.nx, st.moving_layout.global.ny, st.moving_layout.global.nz};
    wa.window = st.moving.data<float>();
    wa.window_z0 = st.moving_z0;
    wa.window_nz = st.moving.dim(2);
    return WindowGridSample(wa, st.warped.data<float>(), st.grad_u.data<float>(), stream);
  }
  // Warp and the sampling Jacobian (into grad_u) around the ring.
  RingSampleArgs ra;
  ra.out_layout = l;
  ra.disp = st.u.data<float>();
  ra.affine = st.affine;
  ra.padding = registration::Padding::kZeros;
  ra.moving_layout = st.moving_layout;
  ra.moving = st.moving.data<float>();
  std::copy(st.grid_lo, st.grid_lo + 3, ra.grid_lo);
  std::copy(st.grid_hi, st.grid_hi + 3, ra.grid_hi);
  ra.voxel_jitter_key = st.voxel_jitter_key;
  return RingGridSample(comm, ra, st.warped.data<float>(), st.grad_u.data<float>(), stream);
}

absl::StatusOr<double> GreedyMetricPhase(Communicator& comm, ShardedGreedyState& st, const GreedyStepOptions& options,
                                         const Stream& stream) {
  const SlabLayout& l = st.layout;
  double loss = 0;
  switch (options.metric) {
    case GreedyMetric::kLncc: {
      // The sampler's workspace (same stream) keeps LNCC's a, b, c between iterations.
      TESSERA_ASSIGN_OR_RETURN(loss, ShardedLncc(comm, l, st.fixed, st.warped, options.lncc, &st.grad_w, stream,
                                                 st.sampler_workspace.get()));
      break;
    }
    case GreedyMetric::kMse: {
      TESSERA_ASSIGN_OR_RETURN(loss, ShardedMse(comm, l, st.fixed, st.warped, &st.grad_w, stream));
      break;
    }
    case GreedyMetric::kMi: {
      TESSERA_ASSIGN_OR_RETURN(registration::MattesMiResult r,
                               ShardedMattesMi(comm, l, st.fixed, st.warped, nullptr, options.mi, &st.grad_w, stream));
      loss = r.loss;
      break;
    }
    default:
      return absl::InvalidArgumentError("unknown greedy metric");
  }
  // dL/du: the sampler's backward pass on the whole image, or J (ring/window) times dL/dwarped.
  if (st.moving_whole) {
    registration::GridSampleGrads grads;
    grads.grad_disp = st.grad_u.data<float>();
    TESSERA_RETURN_IF_ERROR(registration::GridSampleBackward(stream, WholeMovingArgs(st), st.grad_w.data<float>(),
                                                             grads, st.sampler_workspace.get()));
  } else {
    TESSERA_RETURN_IF_ERROR(
        ApplySampleJacobian(l, st.moving_layout.global, st.grad_w.data<float>(), st.grad_u.data<float>(), stream));
  }
  return loss;
}

bool GreedyMetricNeedsPrepass(const GreedyStepOptions& options) { return options.metric == GreedyMetric::kMi; }

absl::Status GreedyMetricPrepass(Communicator& comm, ShardedGreedyState& st, const GreedyStepOptions& options,
                                 const Stream& stream) {
  if (!GreedyMetricNeedsPrepass(options)) return absl::OkStatus();
  return ShardedMattesMi(comm, st.layout, st.fixed, st.warped, nullptr, options.mi, nullptr, stream).status();
}

absl::Status GreedySmoothGradientPhase(Communicator& comm, ShardedGreedyState& st, const GreedyStepOptions& options,
                                       const Stream& stream) {
  const SlabLayout& l = st.layout;
  const double gs = options.smooth_grad_sigma;
  TESSERA_RETURN_IF_ERROR(ShardedGaussianSmooth(comm, l, st.grad_u, {gs, gs, gs}, stream));
  // Halo slices take no step: their u is refreshed from the neighbours before
  // anything reads it, and the normalized rule's max must see own values only.
  TESSERA_RETURN_IF_ERROR(ZeroHalos(l, st.grad_u, stream));
  if (options.rule != GreedyRule::kNormalized) return absl::OkStatus();
  // Steepest descent scaled so the largest component over ALL ranks moves lr.
  TESSERA_ASSIGN_OR_RETURN(ArrayStats stats, ComputeArrayStats(st.grad_u, stream));
  TESSERA_ASSIGN_OR_RETURN(
      st.largest_grad,
      AllReduceHostScalar(comm, std::max(std::abs(stats.min), std::abs(stats.max)), ReduceOp::kMax, stream));
  return absl::OkStatus();
}

absl::Status GreedyComposePhase(Communicator& comm, ShardedGreedyState& st, const GreedyStepOptions& options,
                                const Stream& stream) {
  const SlabLayout& l = st.layout;
  const Dims3 g = l.global;
  // The smoothing phase zeroed them; a caller restoring only the own slices
  // of grad_u (out of core) relies on this.
  TESSERA_RETURN_IF_ERROR(ZeroHalos(l, st.grad_u, stream));
  registration::GreedyStep step;
  step.to_normalized = {g.nx > 1 ? 2.f / static_cast<float>(g.nx - 1) : 0.f,
                        g.ny > 1 ? 2.f / static_cast<float>(g.ny - 1) : 0.f,
                        g.nz > 1 ? 2.f / static_cast<float>(g.nz - 1) : 0.f};
  step.grid_nz = g.nz;  // the local slab samples in the whole grid's z units
  step.grid_z0 = l.local_z0();
  if (options.rule == GreedyRule::kAdam) {
    step.rule = registration::GreedyStep::Rule::kAdam;
    step.adam.lr = options.lr_voxels;
    step.t = ++st.adam_step;
    step.m = st.m.data<float>();
    step.v = st.v.data<float>();
  } else {
    const double largest = st.largest_grad;
    step.rule = registration::GreedyStep::Rule::kScaled;
    step.max_abs_grad = static_cast<float>(largest);
    step.scale = largest > 0 ? static_cast<float>(-options.lr_voxels / largest) : 0.f;
  }
  const int64_t reach = registration::ComposeHaloSlices(registration::GreedyStepBoundVoxels(step));
  if ((l.rank > 0 && l.halo_lo < reach) || (l.rank + 1 < l.ranks && l.halo_hi < reach)) {
    return absl::InvalidArgumentError(absl::StrCat("the composition reaches ", reach, " slices, ", l.ToString()));
  }
  if (options.compose_slab_voxels > 0) {
    const int64_t plane = std::max<int64_t>(1, g.nx * g.ny);
    step.slab_depth = std::max(reach, (options.compose_slab_voxels + plane - 1) / plane);  // clamped to the slab
  }
  // The composition reads u around each own slice: refresh the halos first.
  TESSERA_RETURN_IF_ERROR(HaloExchange(comm, l, st.u, stream));
  return registration::ComposeGreedyStepInPlace(stream, st.u.data<float>(), st.grad_u.data<float>(), l.local_dims(),
                                                step, st.compose_workspace.get());
}

absl::Status GreedySmoothFieldPhase(Communicator& comm, ShardedGreedyState& st, const GreedyStepOptions& options,
                                    const Stream& stream) {
  const double ws = options.smooth_warp_sigma;
  return ShardedGaussianSmooth(comm, st.layout, st.u, {ws, ws, ws}, stream);
}

absl::StatusOr<double> GreedyLossFromReducedSum(const GreedyStepOptions& options, const std::vector<double>& reduced,
                                                Dims3 global) {
  // Per-slice sums (nz values, AllReduceSliceSums) on either backend; one
  // value from a caller that summed them itself.
  if (reduced.size() != 1 && reduced.size() != static_cast<size_t>(global.nz)) {
    return absl::InvalidArgumentError(absl::StrCat("expected one reduced loss sum or ", global.nz,
                                                   " per-slice sums, got ", reduced.size(), " values"));
  }
  const double sum = reduced.size() == 1 ? reduced[0] : registration::SumOfSlices(reduced.data(), global.nz);
  const double voxels = static_cast<double>(global.size());
  switch (options.metric) {
    case GreedyMetric::kLncc:
      return -sum / voxels;  // ShardedLncc: -(sum of cc) / N
    case GreedyMetric::kMse:
      return sum / voxels;   // ShardedMse: sum of squares / N
    default:
      return absl::InvalidArgumentError("MI's loss comes from its metric phase (the histogram is all-reduced)");
  }
}

absl::StatusOr<double> ShardedGreedyEvaluate(Communicator& comm, ShardedGreedyState& st,
                                             const GreedyStepOptions& options, const Stream& stream) {
  TESSERA_RETURN_IF_ERROR(GreedySamplePhase(comm, st, options, stream));
  return GreedyMetricPhase(comm, st, options, stream);
}

absl::Status ShardedGreedyUpdate(Communicator& comm, ShardedGreedyState& st, const GreedyStepOptions& options,
                                 const Stream& stream) {
  TESSERA_RETURN_IF_ERROR(GreedySmoothGradientPhase(comm, st, options, stream));
  TESSERA_RETURN_IF_ERROR(GreedyComposePhase(comm, st, options, stream));
  return GreedySmoothFieldPhase(comm, st, options, stream);
}

absl::StatusOr<double> ShardedGreedyStep(Communicator& comm, ShardedGreedyState& st, const GreedyStepOptions& options,
                                         const Stream& stream) {
  TESSERA_ASSIGN_OR_RETURN(double loss, ShardedGreedyEvaluate(comm, st, options, stream));
  TESSERA_RETURN_IF_ERROR(ShardedGreedyUpdate(comm, st, options, stream));
  return loss;
}

}  // namespace parallel
}  // namespace tessera
