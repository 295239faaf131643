#include "kernels/parallel/sharded_greedy_step.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/parallel/ring_sampler.h"
#include "kernels/parallel/sharded_ops.h"
#include "kernels/registration/field_ops.h"
#include "kernels/registration/grid_sampler.h"

namespace tessera {
namespace parallel {
namespace {

// The composition reads u at x + s with |s| < 1.6 lr voxels (Adam's step
// bound for beta1 = 0.9, beta2 = 0.999), plus one slice for the cell.
int64_t CompositionHalo(double lr_voxels) { return static_cast<int64_t>(std::ceil(1.6 * lr_voxels)) + 1; }

}  // namespace

int64_t GreedyStepHalo(const GreedyStepOptions& options) {
  int64_t h = std::max(SmoothingHalo(options.smooth_grad_sigma), SmoothingHalo(options.smooth_warp_sigma));
  if (options.metric == GreedyMetric::kLncc) h = std::max(h, LnccHalo(options.lncc.window));
  return std::max(h, CompositionHalo(options.lr_voxels));
}

absl::StatusOr<ShardedGreedyState> MakeShardedGreedyState(const SlabLayout& layout, NDArray fixed,
                                                          const SlabLayout& moving_layout, NDArray moving,
                                                          const float affine[12]) {
  ShardedGreedyState s;
  s.layout = layout;
  s.fixed = std::move(fixed);
  s.moving_layout = moving_layout;
  s.moving = std::move(moving);
  std::memcpy(s.affine, affine, sizeof(s.affine));
  for (NDArray* f : {&s.u, &s.m, &s.v, &s.grad_u, &s.step}) {
    TESSERA_ASSIGN_OR_RETURN(*f, NDArray::Allocate(layout.LocalShape(3), DType::kFloat32));
    std::fill(f->data<float>(), f->data<float>() + f->num_elements(), 0.f);
  }
  for (NDArray* f : {&s.warped, &s.grad_w}) {
    TESSERA_ASSIGN_OR_RETURN(*f, NDArray::Allocate(layout.LocalShape(1), DType::kFloat32));
    std::fill(f->data<float>(), f->data<float>() + f->num_elements(), 0.f);
  }
  return s;
}

absl::StatusOr<double> ShardedGreedyStep(Communicator& comm, ShardedGreedyState& st, const GreedyStepOptions& options,
                                         const Stream& stream) {
  if (stream.backend() != Backend::kCpu) {
    return absl::UnimplementedError("the sharded greedy step runs on CPU streams only (ring sampler)");
  }
  const SlabLayout& l = st.layout;
  const int64_t halo = GreedyStepHalo(options);
  if ((l.rank > 0 && l.halo_lo < halo) || (l.rank + 1 < l.ranks && l.halo_hi < halo)) {
    return absl::InvalidArgumentError(absl::StrCat("greedy step needs halos of ", halo, " slices, ", l.ToString()));
  }
  const Dims3 g = l.global;
  const int64_t lv = l.local_voxels();

  // Warp and the sampling Jacobian (into grad_u).
  RingSampleArgs ra;
  ra.out_layout = l;
  ra.disp = st.u.data<float>();
  ra.affine = st.affine;
  ra.padding = registration::Padding::kZeros;
  ra.moving_layout = st.moving_layout;
  ra.moving = st.moving.data<float>();
  TESSERA_RETURN_IF_ERROR(RingGridSample(comm, ra, st.warped.data<float>(), st.grad_u.data<float>(), stream));

  // Loss and dL/dwarped.
  double loss = 0;
  if (options.metric == GreedyMetric::kLncc) {
    TESSERA_ASSIGN_OR_RETURN(loss, ShardedLncc(comm, l, st.fixed, st.warped, options.lncc, &st.grad_w, stream));
  } else {
    TESSERA_ASSIGN_OR_RETURN(loss, ShardedMse(comm, l, st.fixed, st.warped, &st.grad_w, stream));
  }
  TESSERA_RETURN_IF_ERROR(ApplySampleJacobian(l, st.grad_w.data<float>(), st.grad_u.data<float>(), stream));
  const double gs = options.smooth_grad_sigma, ws = options.smooth_warp_sigma;
  TESSERA_RETURN_IF_ERROR(ShardedGaussianSmooth(comm, l, st.grad_u, {gs, gs, gs}, stream));

  // Adam on a zero parameter yields the step itself, in voxels. Element-wise,
  // so running it over the halo slices too is harmless (they are never read
  // as own values) and keeps every field in one layout.
  registration::AdamOptions adam;
  adam.lr = options.lr_voxels;
  TESSERA_RETURN_IF_ERROR(registration::FillZero(st.step, stream));
  TESSERA_RETURN_IF_ERROR(registration::AdamStep(st.step, st.grad_u, st.m, st.v, adam, ++st.adam_step, stream));
  auto to_normalized = [](int64_t n) { return n > 1 ? 2.f / static_cast<float>(n - 1) : 0.f; };
  TESSERA_RETURN_IF_ERROR(
      registration::ScaleComponents(st.step, {to_normalized(g.nx), to_normalized(g.ny), to_normalized(g.nz)}, stream));

  // Composition u <- s + u o (x + s) on the local slab: the slab's own
  // normalized z runs over its local extent, so s_z is rescaled to it.
  TESSERA_RETURN_IF_ERROR(HaloExchange(comm, l, st.u, stream));
  const float z_to_local = g.nz > 1 && l.local_nz() > 1
                               ? static_cast<float>(g.nz - 1) / static_cast<float>(l.local_nz() - 1)
                               : 1.f;
  TESSERA_RETURN_IF_ERROR(registration::ScaleComponents(st.step, {1.f, 1.f, z_to_local}, stream));
  NDArray& composed = st.grad_u;  // dead after Adam, as in registrar.cc
  const Dims3 ld = l.local_dims();
  for (int c = 0; c < 3; ++c) {
    registration::GridSampleArgs compose;
    compose.image = st.u.data<float>() + c * lv;
    compose.image_dims = ld;
    compose.disp = st.step.data<float>();
    compose.out_dims = ld;
    compose.padding = registration::Padding::kBorder;
    TESSERA_RETURN_IF_ERROR(registration::GridSample(stream, compose, composed.data<float>() + c * lv));
  }
  // composed += s (back in whole-grid units).
  float* s = st.step.data<float>();
  float* out = composed.data<float>();
  const float back[3] = {1.f, 1.f, 1.f / z_to_local};
  for (int c = 0; c < 3; ++c) {
    registration::cpu::Axpy(back[c], s + c * lv, out + c * lv, lv);
  }
  std::swap(st.u, composed);
  TESSERA_RETURN_IF_ERROR(ShardedGaussianSmooth(comm, l, st.u, {ws, ws, ws}, stream));
  return loss;
}

}  // namespace parallel
}  // namespace tessera
