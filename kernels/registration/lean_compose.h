// The greedy deformable update, fused and in place (the lean pipeline's
// replacement for "step field, then compose into a second field"):
//
//   s(x) = rule(g(x))                     step in voxels from the smoothed gradient g
//   s_n(x) = s(x) * to_normalized          the same step in normalised units
//   u(x) <- s_n(x) + u(x + s_n(x))         compositional update, border padding
//
// for every voxel x of a planar displacement u (nx, ny, nz, 3) in normalised
// units, with neither a step field nor a second copy of u. The volume is
// processed in z-slabs of `slab` slices: slab k is composed into one of two
// small slab buffers, and slab k - 1 is written back into u only after slab k
// has been computed, so every slab still reads the old u around it. That is
// exact as long as no sample reaches more than `slab` slices away along z:
// the rule's step bound (GreedyStepBoundVoxels) fixes the halo h = floor(bound)
// + 1 and the slab depth is at least h (ComposeSlabDepth).
//
// Rules:
// - kScaled: s = scale * g (the registrar's "normalized" step: scale =
//   -lr / max|g|, so |s| <= lr). The bound is |scale| * max_abs_grad.
// - kAdam: Adam on a zero parameter (AdamStep's formula, adam.h), the moments
//   m and v (planar fields like g) updated in place at x. The step of Adam
//   with bias correction is bounded for any gradient sequence by Cauchy-Schwarz:
//   |s| <= lr sqrt(bc2)/bc1 (1 - b1)/sqrt(1 - b2) sqrt(sum_{k<t} (b1^2/b2)^k)
//   (lr at t = 1; about 7.3 lr for large t at the default betas, typically
//   ~1.6 lr in practice).
//
// Memory: u and g in place plus 2 * slab * nx * ny * 3 floats of scratch
// (from `workspace`, ComposeSlabBuffersBytes; at most an eighth of u's bytes
// beyond the 2^21-voxel slabs: e.g. 201 MB at 512^3, 1.5 B per voxel; 201 MB
// at 1024^3).
// CPU reference (also the CPU backend, same slab order): lean_compose_cpu.cc;
// CUDA: lean_compose.cu. Tolerance CUDA vs CPU (lean_compose_test.cc): the
// sampling positions are computed with the sampler's round-to-nearest
// arithmetic (sampler_math.h), so results differ only by FMA contraction in the
// Adam update and the 8-term interpolation sum: <= 1e-5 * (max|u| + max|s_n|).
#ifndef TESSERA_KERNELS_REGISTRATION_LEAN_COMPOSE_H_
#define TESSERA_KERNELS_REGISTRATION_LEAN_COMPOSE_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/device.h"
#include "kernels/registration/adam.h"
#include "kernels/registration/storage16.h"
#include "kernels/registration/types.h"
#include "kernels/registration/workspace.h"

namespace tessera {
namespace registration {

struct GreedyStep {
  enum class Rule { kScaled, kAdam };
  Rule rule = Rule::kScaled;
  // kScaled.
  float scale = 0;
  float max_abs_grad = 0;  // max |g| over every component (for the step bound)
  // kAdam: options, step number t >= 1, and the moments (planar, g's shape,
  // stream memory; zero at t = 1).
  AdamOptions adam;
  int64_t t = 1;
  float* m = nullptr;
  float* v = nullptr;
  // Voxel -> normalised units per component: 2 / (n_c - 1), 0 where n_c == 1.
  std::array<float, 3> to_normalized = {0, 0, 0};
  // A z-slab of a taller grid (kernels/parallel's sharded step): to_normalized[2]
  // is that grid's 2 / (grid_nz - 1), and the slab's slice 0 is the grid's
  // slice grid_z0. Positions are computed and border-clamped in the whole
  // grid's coordinates (so a slab's voxel gets the whole grid's bits, issue
  // 39); reads stay inside the slab (corners beyond it have weight 0 or lie
  // where only halo voxels, overwritten later, reach). 0 = dims.nz (the
  // whole grid).
  int64_t grid_nz = 0;
  int64_t grid_z0 = 0;
  // Slices per slab; 0 = ComposeSlabDepth(). Tests force the smallest safe
  // depth (the halo) to exercise the lag; smaller is INVALID_ARGUMENT.
  int64_t slab_depth = 0;
  // CUDA launch shape (issue 37), same values either way: true launches the
  // slab kernel on an (x, y, slice) grid, so a thread finds its voxel without
  // the 64-bit divisions of the linear launch. Default since 2026-12-07
  // (compose 6.07 -> 4.49 ms at 512^3 on an H100, same bits).
  bool cuda_grid_3d = true;
  // The (x, y, slice) slab kernel's index arithmetic in 32 bits where
  // 3 * dims.size() < 2^31 (issue 37), same values. Default since 2026-12-07
  // (-0.3 ms per compose at 512^3 on an H100).
  bool cuda_index32 = true;
};

// Largest |s| (voxels, any component) the rule can produce this step.
double GreedyStepBoundVoxels(const GreedyStep& step);

// Slab depth used for `dims` and a step bound: at least floor(bound) + 1
// slices (the halo), deep enough that a slab holds about 2^21 voxels, and up
// to 2^23 voxels while the two slab buffers stay within an eighth of u (nz / 16
// slices; issue 37: each slab costs a launch and three copies, at 512^3 on an
// H100 the composition took 3.94 ms with slabs of 8 slices, 3.28 with 32).
int64_t ComposeSlabDepth(Dims3 dims, double bound_voxels);
// Bytes of the two slab buffers ComposeGreedyStepInPlace takes from its
// workspace with slabs of `depth` slices (2 * 3 * depth * nx * ny floats; the
// Workspace rounds them up to 256). Memory planners count the composition
// with ComposeSlabBuffersBytes(dims, ComposeSlabDepth(dims, bound)).
int64_t ComposeSlabBuffersBytes(Dims3 dims, int64_t depth);
// The halo: slices a step of at most `bound_voxels` can reach, floor(bound) + 1
// (with a relative margin of 1e-3 for float rounding).
int64_t ComposeHaloSlices(double bound_voxels);

// u (3 * dims.size() floats) <- s_n + u o (x + s_n) in place; grad: the
// smoothed gradient g, same layout, read only. Both in the stream's memory.
// `workspace` (optional) holds the two slab buffers. Errors: INVALID_ARGUMENT
// (null pointers, bad dims, a non-finite bound, Adam without moments, a
// slab_depth below the halo).
absl::Status ComposeGreedyStepInPlace(const Stream& stream, float* u, const float* grad, Dims3 dims,
                                      const GreedyStep& step, Workspace* workspace = nullptr);

// Mixed precision (issue 13's lean stage): the same with the smoothed
// gradient stored in bf16 (loaded as float; u, m, v and all math in float).
absl::Status ComposeGreedyStepInPlace(const Stream& stream, float* u, const BFloat16* grad, Dims3 dims,
                                      const GreedyStep& step, Workspace* workspace = nullptr);

namespace lean_internal {
// Per-element Adam coefficients and the sampling geometry, filled on the host.
struct ComposeParams {
  Dims3 dims;
  int rule = 0;  // 0 scaled, 1 adam
  float scale = 0;
  float beta1 = 0, one_minus_beta1 = 0, beta2 = 0, one_minus_beta2 = 0, adam_step = 0, inv_sqrt_bc2 = 0, eps = 0;
  float* m = nullptr;
  float* v = nullptr;
  float to_normalized[3] = {0, 0, 0};
  float out_lo[3] = {0, 0, 0}, out_step[3] = {0, 0, 0}, in_half[3] = {0, 0, 0};
  int64_t grid_nz = 0;  // the whole grid's slices (dims.nz unless a slab)
  int64_t grid_z0 = 0;  // global z of the slab's slice 0
  bool cuda_grid_3d = false;  // GreedyStep::cuda_grid_3d
  bool cuda_index32 = false;  // GreedyStep::cuda_index32
};
// Composes slices [z0, z1) into `slab_out` (3 planes of (z1 - z0) * nx * ny
// floats), reading u and grad (and updating m, v) only.
void ComposeSlabCpu(const ComposeParams& p, const float* u, const float* grad, int64_t z0, int64_t z1,
                    float* slab_out);
void ComposeSlabCpu(const ComposeParams& p, const float* u, const BFloat16* grad, int64_t z0, int64_t z1,
                    float* slab_out);
#if TESSERA_WITH_CUDA
absl::Status ComposeSlabCuda(const ComposeParams& p, const float* u, const float* grad, int64_t z0, int64_t z1,
                             float* slab_out, const Stream& stream);
absl::Status ComposeSlabCuda(const ComposeParams& p, const float* u, const BFloat16* grad, int64_t z0, int64_t z1,
                             float* slab_out, const Stream& stream);
#endif
}  // namespace lean_internal

}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_LEAN_COMPOSE_H_
