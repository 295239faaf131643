// The per-voxel work of ComposeGreedyStepInPlace (lean_compose.h), shared
// verbatim by the CPU reference and the CUDA kernel.
#ifndef TESSERA_KERNELS_REGISTRATION_LEAN_COMPOSE_MATH_H_
#define TESSERA_KERNELS_REGISTRATION_LEAN_COMPOSE_MATH_H_

#include <cmath>
#include <cstdint>

#include "kernels/registration/lean_compose.h"
#include "kernels/registration/sampler_math.h"
#include "kernels/registration/storage16.h"

namespace tessera {
namespace registration {
namespace lean_internal {

TESSERA_HD inline float LeanSqrt(float v) {
#if defined(__CUDA_ARCH__)
  return sqrtf(v);
#else
  return std::sqrt(v);
#endif
}

// ComposeVoxel's output coordinate along axis c: the whole grid's voxel v
// (z: a slab's k + grid_z0) in the sampler's normalised frame (its
// arithmetic, identity affine). The CPU row kernel takes its rows' y and z
// from here.
TESSERA_HD inline float ComposeOutCoord(const ComposeParams& p, int c, float v) {
  return RnAdd(p.out_lo[c], RnMul(p.out_step[c], v));
}

// The whole grid's voxels along axis c, which ComposeVoxel clamps positions to.
TESSERA_HD inline int64_t ComposeGridExtent(const ComposeParams& p, int c) {
  return c == 0 ? p.dims.nx : (c == 1 ? p.dims.ny : p.grid_nz);
}

// ComposeVoxel's second half, also the CPU row paths' edge cells: u sampled
// trilinearly at ix (u's own grid, border-clamped, the whole grid's z) plus
// the step s, written to out[0], out[n_out], out[2 n_out].
// Index: int64_t, or int32_t where 3 * dims.size() < 2^31 (the CUDA kernel's
// option, GreedyStep::cuda_index32): the same floats, cheaper index math.
template <typename Index = int64_t>
TESSERA_HD inline void ComposeFromStep(const ComposeParams& p, const float* u, const float s[3], const float ix[3],
                                       float* out, Index n_out) {
  const Index n = static_cast<Index>(p.dims.size());
  const Index nx = static_cast<Index>(p.dims.nx), ny = static_cast<Index>(p.dims.ny),
              nz = static_cast<Index>(p.dims.nz);
  Index i0[3];
  float frac[3];
  for (int c = 0; c < 3; ++c) {
    const float f = FloorT(ix[c]);
    i0[c] = static_cast<Index>(f);
    frac[c] = ix[c] - f;
  }
  i0[2] -= static_cast<Index>(p.grid_z0);  // the slab's index
  const float wx[2] = {1.f - frac[0], frac[0]};
  const float wy[2] = {1.f - frac[1], frac[1]};
  const float wz[2] = {1.f - frac[2], frac[2]};
  float acc[3] = {0.f, 0.f, 0.f};
  for (int cz = 0; cz < 2; ++cz) {
    const Index kk = i0[2] + cz;
    // Beyond the grid's last slice: weight 0 (clamped there). Beyond a slab's
    // ends: only from halo voxels (the step bound keeps own voxels' corners
    // within the halo), whose values are refreshed before they are read.
    if (kk < 0 || kk >= nz) continue;
    for (int cy = 0; cy < 2; ++cy) {
      const Index jj = i0[1] + cy;
      if (jj >= ny) continue;
      for (int cx = 0; cx < 2; ++cx) {
        const Index ii = i0[0] + cx;
        if (ii >= nx) continue;
        const float w = wx[cx] * wy[cy] * wz[cz];
        const Index at = ii + nx * (jj + ny * kk);
        for (int c = 0; c < 3; ++c) acc[c] += w * u[c * n + at];
      }
    }
  }
  for (int c = 0; c < 3; ++c) out[c * n_out] = RnAdd(acc[c], s[c]);
}

// Voxel (i, j, k) at flat index idx (component stride n): writes the composed
// displacement of its three components to out[0], out[n_out], out[2 n_out].
// GradT: float, or bf16 (the mixed-precision stage's G), loaded as float.
// Index: as ComposeFromStep.
template <typename GradT, typename Index = int64_t>
TESSERA_HD inline void ComposeVoxel(const ComposeParams& p, const float* u, const GradT* grad, Index i, Index j,
                                    Index k, Index idx, float* out, Index n_out) {
  const Index n = static_cast<Index>(p.dims.size());
  float s[3];
  for (int c = 0; c < 3; ++c) {
    const float g = ToFloat(grad[c * n + idx]);
    float step;
    if (p.rule == 0) {
      step = RnMul(p.scale, g);
    } else {
      // AdamStep's update on a zero parameter (adam_internal.h's AdamUpdate).
      float m = p.m[c * n + idx], v = p.v[c * n + idx];
      m = p.beta1 * m + p.one_minus_beta1 * g;
      v = p.beta2 * v + p.one_minus_beta2 * (g * g);
      p.m[c * n + idx] = m;
      p.v[c * n + idx] = v;
      step = 0.f - p.adam_step * m / (LeanSqrt(v) * p.inv_sqrt_bc2 + p.eps);
    }
    s[c] = RnMul(step, p.to_normalized[c]);
  }
  // Sampling position in u's own grid (the sampler's arithmetic, identity
  // affine): ix = (x + s_n + 1) * half, clamped (border padding).
  // In the whole grid's coordinates (a slab's k is global k - grid_z0).
  const Index vox[3] = {i, j, k + static_cast<Index>(p.grid_z0)};
  float ix[3];
  for (int c = 0; c < 3; ++c) {
    const float x = ComposeOutCoord(p, c, static_cast<float>(vox[c]));
    float dclamp;
    ix[c] = ClampCoord(RnMul(RnAdd(RnAdd(x, s[c]), 1.f), p.in_half[c]), ComposeGridExtent(p, c), &dclamp);
  }
  ComposeFromStep<Index>(p, u, s, ix, out, n_out);
}

}  // namespace lean_internal
}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_LEAN_COMPOSE_MATH_H_
