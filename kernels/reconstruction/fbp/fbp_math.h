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

// Derivative short-scan filtering (short_scan_derivative.h), per view p of a
// circular orbit about z; views prev and next are its neighbours along the
// orbit (p itself at a short scan's ends). Vectors in world mm.
struct DerivativeView {
  float r0[3];  // source -> detector pixel (col 0, row 0): det_center - source - oc u - orow v
  float u[3];
  float v[3];
  float uh[3];  // dual basis in the detector plane: uh . u = 1, uh . v = 0, uh . n = 0
  float vh[3];
  float n[3];   // unit normal, source -> detector
  float dsd;    // r . n for every pixel ray r
  float inv_span;  // 1 / (lambda_next - lambda_prev)
  // The view's share of the lambda integral / (2 pi dsd), times the
  // orientation's sign (+1 when u points along the source's motion).
  float scale;
  int32_t view_prev, view_next;
};

static_assert(sizeof(DerivativeView) == 23 * sizeof(float), "DerivativeView is 23 words");

// How the pixel (a, b) (column, row indices) that sees a fixed world
// direction moves as the orbit turns (pixels per radian: du, dv), and the
// pixel's cosine weight DSD / |ray|. Turning the orbit by dlambda turns a
// fixed direction by -dlambda in the detector's frame, dray = -(e_z x ray) =
// (y, -x, 0), and the pixel moves by dray projected onto the detector plane
// from the source. For a detector facing the source these are the
// (u^2 + D^2) / D and u v / D of Noo, Pack & Heuscher (Phys. Med. Biol.
// 48:3787, 2003), in pixels.
TESSERA_RECON_HD inline void PixelMotion(const DerivativeView& w, float a, float b, float* du, float* dv,
                                         float* cosine) {
  const float x = w.r0[0] + a * w.u[0] + b * w.v[0];
  const float y = w.r0[1] + a * w.u[1] + b * w.v[1];
  const float z = w.r0[2] + a * w.u[2] + b * w.v[2];
  const float qn = (y * w.n[0] - x * w.n[1]) / w.dsd;
  *du = (y * w.uh[0] - x * w.uh[1]) - (x * w.uh[0] + y * w.uh[1] + z * w.uh[2]) * qn;
  *dv = (y * w.vh[0] - x * w.vh[1]) - (x * w.vh[0] + y * w.vh[1] + z * w.vh[2]) * qn;
#if defined(__CUDA_ARCH__)
  *cosine = w.dsd * rsqrtf(x * x + y * y + z * z);
#else
  *cosine = w.dsd / std::sqrt(x * x + y * y + z * z);
#endif
}

// The two rows the derivative method filters, at column k and row r of view
// `w` from the rows x cols data of the view (g) and its neighbours (gp, gn).
// With C = DSD / |ray| and g_D = dg/dlambda + du dg/du + dv dg/dv the
// derivative along the orbit at a fixed ray direction (Noo, Pack & Heuscher
// 2003), the filtered row is H[C g_D] (H the Hilbert filter along u,
// filter.h HilbertSpectrum). Its du dg/du part is computed as
//   H[c dg/du] = 2 pi Ramp[c g] - H[c' g],   c = C du,  c' = dc/du,
// (the Hilbert transform of a derivative is 2 pi the ramp filter, in
// pixels), so the sharp part of the data meets the same ramp filter as FDK
// instead of a finite difference: the row is H[x] + Ramp[y] with
//   x = scale (C (dg/dlambda + dv dg/dv) - c' g),   y = scale 2 pi c g.
// dg/dlambda: centred difference of the neighbours; dg/dv: centred over
// rows (one-sided at the edges, 0 in 2-D); c': centred over +-1/2 pixel.
TESSERA_RECON_HD inline void DerivativeTerms(const DerivativeView& w, const float* gp, const float* g, const float* gn,
                                             int64_t cols, int64_t rows, int64_t k, int64_t r, float* x_out,
                                             float* y_out) {
  const int64_t at = r * cols + k;
  const float d_lambda = (gn[at] - gp[at]) * w.inv_span;
  float d_v = 0.0f;
  if (rows > 1) {
    const int64_t rp = r + 1 < rows ? r + 1 : r, rm = r > 0 ? r - 1 : r;
    d_v = (g[rp * cols + k] - g[rm * cols + k]) / static_cast<float>(rp - rm);
  }
  const float a = static_cast<float>(k), b = static_cast<float>(r);
  float du, dv, cosine, du_lo, du_hi, dv_unused, c_lo, c_hi;
  PixelMotion(w, a, b, &du, &dv, &cosine);
  PixelMotion(w, a - 0.5f, b, &du_lo, &dv_unused, &c_lo);
  PixelMotion(w, a + 0.5f, b, &du_hi, &dv_unused, &c_hi);
  const float c_slope = c_hi * du_hi - c_lo * du_lo;
  const float value = g[at];
  *x_out = w.scale * (cosine * (d_lambda + dv * d_v) - c_slope * value);
  *y_out = w.scale * 6.28318530717958647692f * cosine * du * value;
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
