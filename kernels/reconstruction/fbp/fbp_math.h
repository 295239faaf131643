// Per-view constants of FBP/FDK and the per-sample math shared by the CPU
// reference and the CUDA kernels (host and device inline functions on plain
// float structs, so both backends compute the same expressions).
#ifndef TESSERA_KERNELS_RECONSTRUCTION_FBP_FBP_MATH_H_
#define TESSERA_KERNELS_RECONSTRUCTION_FBP_FBP_MATH_H_

#include <cmath>
#include <cstdint>

#include "kernels/reconstruction/geometry.h"  // TESSERA_RECON_HD

namespace tessera {
namespace recon {
namespace fbp {

// Pre-weight of detector pixel (col c, row r), with ca = c - (cols - 1) / 2 and
// rb = r - (rows - 1) / 2:
//   parallel:   scale
//   fan, cone:  scale * dsd / |to_center + ca u + rb v|   (FDK's cosine weight)
// `scale` carries the view's share of the angular integral, 1 / tau and, for
// divergent beams, DSO / (2 DSD) (see fbp_setup.h).
struct PreWeightView {
  float to_center[3];  // detector centre minus source (fan, cone)
  float u[3];
  float v[3];
  float dsd;        // perpendicular source-to-detector distance (fan, cone)
  float scale;
  float divergent;  // 1 for fan and cone, 0 for parallel
};

// Back projection of view p at voxel (i, j, k) (indices, not mm):
//   D = d . (i, j, k, 1),  column a = (a . (i, j, k, 1)) / D,  row b = (b . (i, j, k, 1)) / D,
//   contribution = Q(a, b) / D^2.
// D is the voxel's distance from the source along the detector normal
// divided by DSD (FDK's magnification weight); parallel beams have D == 1.
struct BackprojectView {
  float a[4];
  float b[4];
  float d[4];
};

static_assert(sizeof(PreWeightView) == 12 * sizeof(float), "PreWeightView is 12 floats");
static_assert(sizeof(BackprojectView) == 12 * sizeof(float), "BackprojectView is 12 floats");

TESSERA_RECON_HD inline float PreWeight(const PreWeightView& w, float ca, float rb) {
  if (w.divergent == 0.0f) return w.scale;
  const float x = w.to_center[0] + ca * w.u[0] + rb * w.v[0];
  const float y = w.to_center[1] + ca * w.u[1] + rb * w.v[1];
  const float z = w.to_center[2] + ca * w.u[2] + rb * w.v[2];
#if defined(__CUDA_ARCH__)
  return w.scale * w.dsd * rsqrtf(x * x + y * y + z * z);
#else
  return w.scale * w.dsd / std::sqrt(x * x + y * y + z * z);
#endif
}

// Filtered projections are stored padded: (rows + 2) x (cols + 2) per view
// with a border of zeros, so a bilinear sample anywhere in
// (-1, cols) x (-1, rows) reads inside the view and blends with zeros at the
// edges (what a texture with a zero border does). Outside that box: 0.
TESSERA_RECON_HD inline int64_t PaddedViewSize(int64_t cols, int64_t rows) { return (cols + 2) * (rows + 2); }

TESSERA_RECON_HD inline float SamplePadded(const float* view, int64_t pitch, float a, float b, float cols,
                                           float rows) {
  if (!(a > -1.0f && a < cols && b > -1.0f && b < rows)) return 0.0f;
  const float fa = floorf(a), fb = floorf(b);
  const float wa = a - fa, wb = b - fb;
  const float* p = view + (static_cast<int64_t>(fb) + 1) * pitch + (static_cast<int64_t>(fa) + 1);
  const float top = p[0] + wa * (p[1] - p[0]);
  const float bottom = p[pitch] + wa * (p[pitch + 1] - p[pitch]);
  return top + wb * (bottom - top);
}

}  // namespace fbp
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_FBP_FBP_MATH_H_
