// Validation, the step bound and the slab loop of ComposeGreedyStepInPlace
// (lean_compose.h); the per-slab work is in lean_compose_cpu.cc / .cu.
#include "kernels/registration/lean_compose.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/memory_kind_for.h"
#include "common/status.h"
#include "kernels/registration/parallel.h"
#include "kernels/registration/sampler_math.h"

namespace tessera {
namespace registration {

double GreedyStepBoundVoxels(const GreedyStep& step) {
  if (step.rule == GreedyStep::Rule::kScaled) {
    return std::abs(static_cast<double>(step.scale)) * std::abs(static_cast<double>(step.max_abs_grad));
  }
  const AdamOptions& o = step.adam;
  const double t = static_cast<double>(std::max<int64_t>(step.t, 1));
  const double bc1 = 1.0 - std::pow(o.beta1, t), bc2 = 1.0 - std::pow(o.beta2, t);
  // |m_t| <= (1 - b1) sqrt(sum_k (b1^2 / b2)^k) sqrt(v_t / (1 - b2)) (Cauchy-Schwarz).
  const double r = o.beta1 * o.beta1 / o.beta2;
  const double sum = std::abs(r - 1.0) < 1e-12 ? t : (1.0 - std::pow(r, t)) / (1.0 - r);
  const double ratio = (1.0 - o.beta1) / std::sqrt(1.0 - o.beta2) * std::sqrt(sum);
  return o.lr * std::sqrt(bc2) / bc1 * ratio;
}

int64_t ComposeHaloSlices(double bound_voxels) {
  // Float rounding of the moments and of the step can exceed the exact bound
  // by a few ulps: a relative margin keeps the halo safe.
  return static_cast<int64_t>(std::floor(bound_voxels * 1.001 + 1e-6)) + 1;
}

int64_t ComposeSlabDepth(Dims3 dims, double bound_voxels) {
  const int64_t halo = ComposeHaloSlices(bound_voxels);
  const int64_t plane = std::max<int64_t>(1, dims.nx * dims.ny);
  const int64_t for_size =
      std::max((int64_t{1} << 21) / plane, std::min((int64_t{1} << 23) / plane, dims.nz / 16));
  return std::max<int64_t>(1, std::min<int64_t>(dims.nz, std::max(halo, for_size)));
}

int64_t ComposeSlabBuffersBytes(Dims3 dims, int64_t depth) {
  return 2 * 3 * depth * dims.nx * dims.ny * static_cast<int64_t>(sizeof(float));
}

namespace {

template <typename GradT>
absl::Status ComposeImpl(const Stream& stream, float* u, const GradT* grad, Dims3 dims, const GreedyStep& step,
                         Workspace* workspace) {
  if (dims.nx <= 0 || dims.ny <= 0 || dims.nz <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("ComposeGreedyStepInPlace: dims must be positive, got ",
                                                   DimsToString(dims)));
  }
  if (u == nullptr || grad == nullptr) {
    return absl::InvalidArgumentError("ComposeGreedyStepInPlace: u or grad is null");
  }
  if (step.rule == GreedyStep::Rule::kAdam && (step.m == nullptr || step.v == nullptr || step.t < 1)) {
    return absl::InvalidArgumentError("ComposeGreedyStepInPlace: the Adam rule needs moments m, v and t >= 1");
  }
  const double bound = GreedyStepBoundVoxels(step);
  if (!std::isfinite(bound)) {
    return absl::InvalidArgumentError(absl::StrCat("ComposeGreedyStepInPlace: step bound is not finite (scale ",
                                                   step.scale, ", max |g| ", step.max_abs_grad, ")"));
  }
  lean_internal::ComposeParams p;
  p.dims = dims;
  p.rule = step.rule == GreedyStep::Rule::kScaled ? 0 : 1;
  p.scale = step.scale;
  if (p.rule == 1) {
    const AdamOptions& o = step.adam;
    const double t = static_cast<double>(step.t);
    const double bc1 = 1.0 - std::pow(o.beta1, t), bc2 = 1.0 - std::pow(o.beta2, t);
    p.beta1 = float(o.beta1);
    p.one_minus_beta1 = float(1.0 - o.beta1);
    p.beta2 = float(o.beta2);
    p.one_minus_beta2 = float(1.0 - o.beta2);
    p.adam_step = float(o.lr / bc1);
    p.inv_sqrt_bc2 = float(1.0 / std::sqrt(bc2));
    p.eps = float(o.eps);
    p.m = step.m;
    p.v = step.v;
  }
  const double lo[3] = {-1, -1, -1}, hi[3] = {1, 1, 1};
  Dims3 geometry_dims = dims;  // a slab samples in its whole grid's normalised units
  if (step.grid_nz > 0) geometry_dims.nz = step.grid_nz;
  const SamplerGeometry<float> g = MakeSamplerGeometry<float>(geometry_dims, geometry_dims, lo, hi, Padding::kBorder);
  for (int c = 0; c < 3; ++c) {
    p.to_normalized[c] = step.to_normalized[c];
    p.out_lo[c] = g.out_lo[c];
    p.out_step[c] = g.out_step[c];
    p.in_half[c] = g.in_half[c];
  }
  p.grid_nz = geometry_dims.nz;
  p.grid_z0 = step.grid_nz > 0 ? step.grid_z0 : 0;
  p.cuda_grid_3d = step.cuda_grid_3d;
  p.cuda_index32 = step.cuda_index32;

  int64_t depth = ComposeSlabDepth(dims, bound);
  if (step.slab_depth != 0) {
    if (step.slab_depth < ComposeHaloSlices(bound)) {
      return absl::InvalidArgumentError(absl::StrCat("ComposeGreedyStepInPlace: slab_depth ", step.slab_depth,
                                                     " is below the halo of ", ComposeHaloSlices(bound),
                                                     " slices for a step bound of ", bound, " voxels"));
    }
    depth = std::min(step.slab_depth, dims.nz);
  }
  const int64_t plane = dims.nx * dims.ny;
  const int64_t slab_floats = 3 * depth * plane;
  Workspace local;
  TESSERA_ASSIGN_OR_RETURN(void* base, ReserveScratch(stream, static_cast<size_t>(ComposeSlabBuffersBytes(dims, depth)),
                                                      workspace, local));
  float* buffers[2] = {static_cast<float*>(base), static_cast<float*>(base) + slab_floats};
  const MemoryKind kind = MemoryKindFor(stream);
  const int64_t n = dims.size();

  // Writes slab [z0, z1) from its buffer back into u (three planes).
  auto write_back = [&](const float* buffer, int64_t z0, int64_t z1) -> absl::Status {
    const int64_t count = (z1 - z0) * plane;
    if (stream.backend() == Backend::kCpu) {
      // On every CPU thread (issue 38: one serial memcpy of the three planes
      // per slab was 1.3 % of a 1 mm run, twice that share on two threads).
      ParallelFor(3 * count, [&](int64_t b, int64_t e, int) {
        for (int c = 0; c < 3; ++c) {
          const int64_t lo = std::max(b, c * count), hi = std::min(e, (c + 1) * count);
          if (lo < hi) {
            std::memcpy(u + c * n + z0 * plane + (lo - c * count), buffer + lo, static_cast<size_t>(hi - lo) * sizeof(float));
          }
        }
      });
      return absl::OkStatus();
    }
    for (int c = 0; c < 3; ++c) {
      TESSERA_RETURN_IF_ERROR(CopyBytes(u + c * n + z0 * plane, kind, buffer + c * count, kind,
                                        static_cast<size_t>(count) * sizeof(float), stream));
    }
    return absl::OkStatus();
  };
  int64_t pending_z0 = -1, pending_z1 = -1;
  int pending = 0;
  int slab = 0;
  for (int64_t z0 = 0; z0 < dims.nz; z0 += depth, ++slab) {
    const int64_t z1 = std::min(dims.nz, z0 + depth);
    float* out = buffers[slab % 2];
    if (stream.backend() == Backend::kCpu) {
      lean_internal::ComposeSlabCpu(p, u, grad, z0, z1, out);
    } else {
#if TESSERA_WITH_CUDA
      TESSERA_RETURN_IF_ERROR(lean_internal::ComposeSlabCuda(p, u, grad, z0, z1, out, stream));
#else
      return absl::FailedPreconditionError("ComposeGreedyStepInPlace: CUDA stream in a build without CUDA");
#endif
    }
    // The previous slab is no longer read by any later one (depth >= halo).
    if (pending_z0 >= 0) TESSERA_RETURN_IF_ERROR(write_back(buffers[pending], pending_z0, pending_z1));
    pending_z0 = z0;
    pending_z1 = z1;
    pending = slab % 2;
  }
  if (pending_z0 >= 0) TESSERA_RETURN_IF_ERROR(write_back(buffers[pending], pending_z0, pending_z1));
  if (workspace == nullptr) TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return absl::OkStatus();
}

}  // namespace

absl::Status ComposeGreedyStepInPlace(const Stream& stream, float* u, const float* grad, Dims3 dims,
                                      const GreedyStep& step, Workspace* workspace) {
  return ComposeImpl(stream, u, grad, dims, step, workspace);
}

absl::Status ComposeGreedyStepInPlace(const Stream& stream, float* u, const BFloat16* grad, Dims3 dims,
                                      const GreedyStep& step, Workspace* workspace) {
  return ComposeImpl(stream, u, grad, dims, step, workspace);
}

}  // namespace registration
}  // namespace tessera
