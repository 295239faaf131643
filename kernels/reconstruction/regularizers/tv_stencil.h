// The per-voxel TV stencils, one definition compiled for the CPU backend
// (tv_cpu.cc) and for CUDA (tv.cu), so both do the same float arithmetic in
// the same order. Internal to regularizers/.
//
// Dual fields (FGP's p and r) hold, per active axis a (extent > 1, in x, y, z
// order), an image of the input's layout: q[(a * voxels + v) * channels + c].
// Entries on an axis's last plane are kept at 0 (D is 0 there).
#ifndef TESSERA_KERNELS_RECONSTRUCTION_REGULARIZERS_TV_STENCIL_H_
#define TESSERA_KERNELS_RECONSTRUCTION_REGULARIZERS_TV_STENCIL_H_

#include <cmath>
#include <cstdint>

#include "kernels/reconstruction/regularizers/tv.h"

#ifdef __CUDACC__
#define TESSERA_TV_HD __host__ __device__ __forceinline__
#else
#define TESSERA_TV_HD inline
#endif

namespace tessera {
namespace recon {
namespace regularizers {
namespace internal {

// The shape as the stencils see it: the active axes' extents and voxel strides.
struct TvGrid {
  int64_t voxels = 0;
  int channels = 1;
  int ndim = 0;                   // active axes
  int64_t extent[3] = {1, 1, 1};  // of active axis a
  int64_t stride[3] = {0, 0, 0};  // voxel stride of active axis a
  int64_t period[3] = {1, 1, 1};  // voxel index / period % extent = coordinate on axis a
};

inline TvGrid MakeTvGrid(const TvShape& shape) {
  TvGrid g;
  g.voxels = shape.voxels();
  g.channels = shape.channels;
  const int64_t n[3] = {shape.nx, shape.ny, shape.nz};
  int64_t stride = 1;
  for (int axis = 0; axis < 3; ++axis) {
    if (n[axis] > 1) {
      g.extent[g.ndim] = n[axis];
      g.stride[g.ndim] = stride;
      g.period[g.ndim] = stride;
      ++g.ndim;
    }
    stride *= n[axis];
  }
  return g;
}

TESSERA_TV_HD int64_t AxisCoordinate(const TvGrid& g, int64_t v, int a) { return (v / g.period[a]) % g.extent[a]; }

// sum_{a,c} (D_a x_c)(v)^2
TESSERA_TV_HD float GradientSquared(const TvGrid& g, const float* x, int64_t v) {
  float sum = 0;
  for (int a = 0; a < g.ndim; ++a) {
    if (AxisCoordinate(g, v, a) + 1 >= g.extent[a]) continue;
    const float* here = x + v * g.channels;
    const float* next = x + (v + g.stride[a]) * g.channels;
    for (int c = 0; c < g.channels; ++c) {
      const float d = next[c] - here[c];
      sum += d * d;
    }
  }
  return sum;
}

// x(v) = b(v) - weight (D^T q)(v), clamped at 0 when non_negative.
// (D^T q)(v) = sum_a q_a(v - e_a) [v_a > 0] - q_a(v) [v_a < n_a - 1].
TESSERA_TV_HD void PrimalFromDualAt(const TvGrid& g, float weight, bool non_negative, const float* b, const float* q,
                                    float* x, int64_t v) {
  const int64_t plane = g.voxels * g.channels;
  for (int c = 0; c < g.channels; ++c) {
    float dtq = 0;
    for (int a = 0; a < g.ndim; ++a) {
      const int64_t coord = AxisCoordinate(g, v, a);
      const float* qa = q + a * plane;
      if (coord > 0) dtq += qa[(v - g.stride[a]) * g.channels + c];
      if (coord + 1 < g.extent[a]) dtq -= qa[v * g.channels + c];
    }
    float value = b[v * g.channels + c] - weight * dtq;
    if (non_negative && value < 0) value = 0;
    x[v * g.channels + c] = value;
  }
}

// FGP's projected dual step at v with momentum:
//   p' = P(r + tau D x),  r = p' + beta (p' - p),  p = p'
// P scales the voxel's (axes x channels) vector into the unit ball.
TESSERA_TV_HD void DualStepAt(const TvGrid& g, float tau, float beta, const float* x, float* p, float* r, int64_t v) {
  const int64_t plane = g.voxels * g.channels;
  const float* here = x + v * g.channels;
  float norm2 = 0;
  for (int a = 0; a < g.ndim; ++a) {
    if (AxisCoordinate(g, v, a) + 1 >= g.extent[a]) continue;
    const float* next = x + (v + g.stride[a]) * g.channels;
    const float* ra = r + a * plane + v * g.channels;
    for (int c = 0; c < g.channels; ++c) {
      const float q = ra[c] + tau * (next[c] - here[c]);
      norm2 += q * q;
    }
  }
  const float scale = norm2 > 1 ? 1 / sqrtf(norm2) : 1.0f;
  for (int a = 0; a < g.ndim; ++a) {
    const bool inside = AxisCoordinate(g, v, a) + 1 < g.extent[a];
    const float* next = x + (v + (inside ? g.stride[a] : 0)) * g.channels;
    float* pa = p + a * plane + v * g.channels;
    float* ra = r + a * plane + v * g.channels;
    for (int c = 0; c < g.channels; ++c) {
      const float q = inside ? (ra[c] + tau * (next[c] - here[c])) * scale : 0.0f;
      const float old = pa[c];
      pa[c] = q;
      ra[c] = q + beta * (q - old);
    }
  }
}

// out(v) = sqrt(|D x(v)|^2 + epsilon^2)
TESSERA_TV_HD float SmoothedMagnitudeAt(const TvGrid& g, float epsilon, const float* x, int64_t v) {
  return sqrtf(GradientSquared(g, x, v) + epsilon * epsilon);
}

// g(v) = d/dx(v) sum_u sqrt(|D x(u)|^2 + epsilon^2)
//      = sum_a [v_a > 0] (D_a x)(v - e_a) / m(v - e_a) - [v_a < n_a - 1] (D_a x)(v) / m(v)
TESSERA_TV_HD void SmoothedGradientAt(const TvGrid& g, float epsilon, const float* x, float* out, int64_t v) {
  const float m_here = SmoothedMagnitudeAt(g, epsilon, x, v);
  float m_prev[3] = {1, 1, 1};
  bool has_prev[3] = {false, false, false};
  bool has_next[3] = {false, false, false};
  for (int a = 0; a < g.ndim; ++a) {
    const int64_t coord = AxisCoordinate(g, v, a);
    has_prev[a] = coord > 0;
    has_next[a] = coord + 1 < g.extent[a];
    if (has_prev[a]) m_prev[a] = SmoothedMagnitudeAt(g, epsilon, x, v - g.stride[a]);
  }
  for (int c = 0; c < g.channels; ++c) {
    const float here = x[v * g.channels + c];
    float sum = 0;
    for (int a = 0; a < g.ndim; ++a) {
      if (has_prev[a]) sum += (here - x[(v - g.stride[a]) * g.channels + c]) / m_prev[a];
      if (has_next[a]) sum -= (x[(v + g.stride[a]) * g.channels + c] - here) / m_here;
    }
    out[v * g.channels + c] = sum;
  }
}

}  // namespace internal
}  // namespace regularizers
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_REGULARIZERS_TV_STENCIL_H_
