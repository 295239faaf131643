// The PET projector's arithmetic, shared word for word by the CPU reference
// and the CUDA kernels (host/device inline functions, float).
//
// Joseph's method: an LOR is sampled once per voxel plane of its dominant
// axis a (the axis along which it advances fastest), at the plane's voxel
// centres; each sample interpolates the volume bilinearly in the two other
// axes (linearly in 2-D, where lines lie in z = 0), with zero outside the
// grid, and weighs h_a / |d_a| (mm of line per plane). With TOF, each sample
// is further weighted by the TOF kernel of the bin (pet_geometry.h) at its
// TOF coordinate t = lambda - t_ref, lambda being the distance along the
// unit direction from the line's origin point.
//
// The back projection exists in two orders with the same weights:
//   - scatter (ray-driven): walk each LOR and add into the voxels it touches;
//   - gather (voxel-driven, deterministic): for each voxel and view, find the
//     detector pixels whose rays' samples in the voxel's plane fall within
//     one voxel of it (the voxel's 2x2 neighbourhood projected onto the
//     detector bounds them), recompute those rays with MakeLor and SampleAt
//     exactly as the forward does, and sum in a fixed order.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_PET_LOR_MATH_H_
#define TESSERA_KERNELS_RECONSTRUCTION_PET_LOR_MATH_H_

#include <math.h>

#include <cstdint>

#include "kernels/reconstruction/geometry.h"

namespace tessera {
namespace recon {
namespace pet {

constexpr float kTofCutoffSigmas = 3.0f;
// A window that never clips (non-TOF lines).
constexpr float kNoWindow = 1e30f;

// The volume grid in float.
struct GridParams {
  int n[3];
  float lo[3];      // min edge per axis (mm)
  float h[3];       // voxel size per axis (mm)
  float inv_h[3];
  float centre[3];  // volume centre (z = 0 in 2-D)
  int is_2d;        // lines lie in z = 0 and are interpolated in x, y only
};

struct TofParams {
  int bins;        // K >= 1; 1: no TOF
  float bin_mm;    // w
  float cut_mm;    // kTofCutoffSigmas * sigma
  float inv_sqrt2_sigma;
  float reach_mm;  // w / 2 + cut: bin k sees samples with |t - centre_k| < reach
  float erf_cut;   // erf(cut / (sqrt(2) sigma)) = erf(3 / sqrt 2)
};

// Everything a projector kernel needs; pointers are in the backend's memory.
struct ProjectorParams {
  GridParams grid;
  TofParams tof;
  int beam;  // 0 parallel, 1 fan, 2 cone (recon::BeamKind order)
  int cols, rows, views;
  const float* view_vectors;        // kFloatsPerView per view (PackViews)
  const unsigned char* axis_masks;  // per view: bit a set when some ray of the view is a-dominant
  const float* atten;               // per LOR c + cols * (r + rows * p); null: none
};

// The views of one call: p = first + q * stride, q in [0, count). The range is
// compact: view q's block starts at q * cols * rows * K.
struct ViewRange {
  int first;
  int stride;
  int count;
};

// Index of LOR (view, col, row) in per-LOR arrays (attenuation factors).
TESSERA_RECON_HD inline int64_t LorIndex(const ProjectorParams& p, int64_t view, int64_t col, int64_t row) {
  return col + static_cast<int64_t>(p.cols) * (row + static_cast<int64_t>(p.rows) * view);
}

struct Lor {
  float p[3];     // origin point (source, or the pixel centre for parallel beams)
  float d[3];     // unit direction, towards the pixel
  int axis;       // dominant axis a
  int b, c;       // the other two axes (c unused in 2-D)
  float inv_da;   // 1 / d[a]
  float step;     // h_a / |d_a|: mm of line per plane
  float t_ref;    // lambda of the point closest to the volume centre
};

struct Sample {
  float lambda;  // distance from the origin point (mm)
  float u[2];    // continuous voxel indices along axes b and c (voxel centres are integers)
};

TESSERA_RECON_HD inline Lor MakeLor(const ProjectorParams& P, int view, int col, int row) {
  const float* v = P.view_vectors + kFloatsPerView * view;
  const float a = static_cast<float>(col) - 0.5f * static_cast<float>(P.cols - 1);
  const float b = static_cast<float>(row) - 0.5f * static_cast<float>(P.rows - 1);
  float pix[3], d[3];
  Lor L;
  for (int i = 0; i < 3; ++i) pix[i] = v[3 + i] + a * v[6 + i] + b * v[9 + i];
  for (int i = 0; i < 3; ++i) {
    if (P.beam == 0) {
      L.p[i] = pix[i];
      d[i] = v[i];
    } else {
      L.p[i] = v[i];
      d[i] = pix[i] - v[i];
    }
  }
  if (P.grid.is_2d) {
    L.p[2] = 0.0f;
    d[2] = 0.0f;
  }
  const float inv_norm = 1.0f / sqrtf(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
  for (int i = 0; i < 3; ++i) L.d[i] = d[i] * inv_norm;
  const float ax = fabsf(L.d[0]), ay = fabsf(L.d[1]), az = fabsf(L.d[2]);
  L.axis = 0;
  float best = ax;
  if (ay > best) {
    L.axis = 1;
    best = ay;
  }
  if (!P.grid.is_2d && az > best) L.axis = 2;
  L.b = L.axis == 0 ? 1 : 0;
  L.c = L.axis == 2 ? 1 : 2;
  L.inv_da = 1.0f / L.d[L.axis];
  L.step = P.grid.h[L.axis] * fabsf(L.inv_da);
  L.t_ref = (P.grid.centre[0] - L.p[0]) * L.d[0] + (P.grid.centre[1] - L.p[1]) * L.d[1] +
            (P.grid.centre[2] - L.p[2]) * L.d[2];
  return L;
}

// The sample of L in plane i of its dominant axis.
TESSERA_RECON_HD inline Sample SampleAt(const Lor& L, const GridParams& g, int i) {
  Sample s;
  const float q = g.lo[L.axis] + (static_cast<float>(i) + 0.5f) * g.h[L.axis];
  s.lambda = (q - L.p[L.axis]) * L.inv_da;
  s.u[0] = (L.p[L.b] + s.lambda * L.d[L.b] - g.lo[L.b]) * g.inv_h[L.b] - 0.5f;
  s.u[1] = g.is_2d ? 0.0f : (L.p[L.c] + s.lambda * L.d[L.c] - g.lo[L.c]) * g.inv_h[L.c] - 0.5f;
  return s;
}

// erf at TOF bin edge j, (j - K/2) w, relative to t, the edge clamped to
// t +- cut (the truncated kernel). Bin k's weight is half the difference of
// edges k + 1 and k, so a run of bins shares its edges and a bin beyond the
// cutoff weighs exactly 0.
TESSERA_RECON_HD inline float TofEdgeErf(const TofParams& T, int j, float t) {
  const float x = (static_cast<float>(j) - 0.5f * static_cast<float>(T.bins)) * T.bin_mm - t;
  if (x <= -T.cut_mm) return -T.erf_cut;  // clamped edges: no erf to evaluate
  if (x >= T.cut_mm) return T.erf_cut;
  return erff(x * T.inv_sqrt2_sigma);
}

TESSERA_RECON_HD inline float TofWeight(const TofParams& T, int k, float t) {
  if (T.bins <= 1) return 1.0f;
  return 0.5f * (TofEdgeErf(T, k + 1, t) - TofEdgeErf(T, k, t));
}

// Bins that may weigh a sample at t: [*k0, *k1] (empty when *k0 > *k1).
TESSERA_RECON_HD inline void TofBinsAt(const TofParams& T, float t, int* k0, int* k1) {
  if (T.bins <= 1) {
    *k0 = 0;
    *k1 = 0;
    return;
  }
  const float half = 0.5f * static_cast<float>(T.bins);
  const float top = static_cast<float>(T.bins);
  const float lo = fminf(fmaxf((t - T.cut_mm) / T.bin_mm + half, -1.0f), top + 1.0f);
  const float hi = fminf(fmaxf((t + T.cut_mm) / T.bin_mm + half, -2.0f), top);
  *k0 = static_cast<int>(floorf(lo)) - 1;
  *k1 = static_cast<int>(floorf(hi)) + 1;
  if (*k0 < 0) *k0 = 0;
  if (*k1 > T.bins - 1) *k1 = T.bins - 1;
}

// The TOF-coordinate window [t_lo, t_hi] outside which bins [k0, k1] weigh 0.
TESSERA_RECON_HD inline void TofWindow(const TofParams& T, int k0, int k1, float* t_lo, float* t_hi) {
  if (T.bins <= 1) {
    *t_lo = -kNoWindow;
    *t_hi = kNoWindow;
    return;
  }
  const float half = 0.5f * static_cast<float>(T.bins);
  *t_lo = (static_cast<float>(k0) - half) * T.bin_mm - T.cut_mm;
  *t_hi = (static_cast<float>(k1) + 1.0f - half) * T.bin_mm + T.cut_mm;
}

// Planes [*i0, *i1] of L's dominant axis whose samples may touch the grid
// within TOF window [t_lo, t_hi] (a plane of margin each side; samples beyond
// weigh exactly 0 anyway). False when none.
TESSERA_RECON_HD inline bool PlaneRange(const Lor& L, const GridParams& g, float t_lo, float t_hi, int* i0, int* i1) {
  float lam_lo = L.t_ref + t_lo, lam_hi = L.t_ref + t_hi;
  const int others[2] = {L.b, L.c};
  for (int o = 0; o < (g.is_2d ? 1 : 2); ++o) {
    const int x = others[o];
    // Samples interpolate voxels of this axis while their centre coordinate is within one voxel of the grid's.
    const float slab_lo = g.lo[x] - 0.5f * g.h[x];
    const float slab_hi = g.lo[x] + (static_cast<float>(g.n[x]) + 0.5f) * g.h[x];
    if (fabsf(L.d[x]) < 1e-12f) {
      if (L.p[x] <= slab_lo || L.p[x] >= slab_hi) return false;
      continue;
    }
    float l1 = (slab_lo - L.p[x]) / L.d[x], l2 = (slab_hi - L.p[x]) / L.d[x];
    if (l1 > l2) {
      const float tmp = l1;
      l1 = l2;
      l2 = tmp;
    }
    lam_lo = fmaxf(lam_lo, l1);
    lam_hi = fminf(lam_hi, l2);
  }
  if (!(lam_lo <= lam_hi)) return false;
  const int a = L.axis;
  float f1 = (L.p[a] + lam_lo * L.d[a] - g.lo[a]) * g.inv_h[a] - 0.5f;
  float f2 = (L.p[a] + lam_hi * L.d[a] - g.lo[a]) * g.inv_h[a] - 0.5f;
  if (f1 > f2) {
    const float tmp = f1;
    f1 = f2;
    f2 = tmp;
  }
  f1 = fmaxf(f1, -4.0f);
  f2 = fminf(f2, static_cast<float>(g.n[a]) + 4.0f);
  int lo = static_cast<int>(floorf(f1)) - 1, hi = static_cast<int>(ceilf(f2)) + 1;
  if (lo < 0) lo = 0;
  if (hi > g.n[a] - 1) hi = g.n[a] - 1;
  *i0 = lo;
  *i1 = hi;
  return lo <= hi;
}

// Linear interpolation weight of integer index j for continuous index u
// (voxel centres at integers): 1 - frac at floor(u), frac at floor(u) + 1.
// The forward and both back projections use this one expression.
TESSERA_RECON_HD inline float TapWeight(float u, int j) {
  const float f0 = floorf(u);
  const float frac = u - f0;
  const int j0 = static_cast<int>(f0);
  if (j == j0) return 1.0f - frac;
  if (j == j0 + 1) return frac;
  return 0.0f;
}

// True when u is close enough to the grid [0, n) for its taps to matter
// (also keeps floorf's result a safe int).
TESSERA_RECON_HD inline bool Near(float u, int n) { return u > -1.0f && u < static_cast<float>(n); }

TESSERA_RECON_HD inline int64_t VoxelIndex(const GridParams& g, const int (&idx)[3]) {
  return idx[0] + static_cast<int64_t>(g.n[0]) * (idx[1] + static_cast<int64_t>(g.n[1]) * idx[2]);
}

// Interpolated volume value at sample s of plane i.
TESSERA_RECON_HD inline float Interpolate(const GridParams& g, const float* image, const Lor& L, int i,
                                          const Sample& s) {
  if (!Near(s.u[0], g.n[L.b]) || (!g.is_2d && !Near(s.u[1], g.n[L.c]))) return 0.0f;
  const int jb = static_cast<int>(floorf(s.u[0]));
  const int jc = g.is_2d ? 0 : static_cast<int>(floorf(s.u[1]));
  float value = 0.0f;
  int idx[3];
  idx[L.axis] = i;
  for (int db = 0; db < 2; ++db) {
    const int j = jb + db;
    if (j < 0 || j >= g.n[L.b]) continue;
    const float wb = TapWeight(s.u[0], j);
    idx[L.b] = j;
    for (int dc = 0; dc < (g.is_2d ? 1 : 2); ++dc) {
      const int k = jc + dc;
      if (k < 0 || k >= g.n[L.c]) continue;
      const float w = g.is_2d ? wb : wb * TapWeight(s.u[1], k);
      idx[L.c] = k;
      value += w * image[VoxelIndex(g, idx)];
    }
  }
  return value;
}

// Adds value * (interpolation weight) into the voxels sample s touches;
// add(float* where, float what) does the addition (plain or atomic).
template <typename Add>
TESSERA_RECON_HD inline void Spread(const GridParams& g, float* image, const Lor& L, int i, const Sample& s,
                                    float value, const Add& add) {
  if (!Near(s.u[0], g.n[L.b]) || (!g.is_2d && !Near(s.u[1], g.n[L.c]))) return;
  const int jb = static_cast<int>(floorf(s.u[0]));
  const int jc = g.is_2d ? 0 : static_cast<int>(floorf(s.u[1]));
  int idx[3];
  idx[L.axis] = i;
  for (int db = 0; db < 2; ++db) {
    const int j = jb + db;
    if (j < 0 || j >= g.n[L.b]) continue;
    const float wb = TapWeight(s.u[0], j);
    idx[L.b] = j;
    for (int dc = 0; dc < (g.is_2d ? 1 : 2); ++dc) {
      const int k = jc + dc;
      if (k < 0 || k >= g.n[L.c]) continue;
      const float w = g.is_2d ? wb : wb * TapWeight(s.u[1], k);
      idx[L.c] = k;
      add(image + VoxelIndex(g, idx), w * value);
    }
  }
}

// (A x) at TOF bin k of L, without attenuation.
TESSERA_RECON_HD inline float ForwardBin(const ProjectorParams& P, const float* image, const Lor& L, int k) {
  float t_lo, t_hi;
  TofWindow(P.tof, k, k, &t_lo, &t_hi);
  int i0, i1;
  if (!PlaneRange(L, P.grid, t_lo, t_hi, &i0, &i1)) return 0.0f;
  float sum = 0.0f;
  for (int i = i0; i <= i1; ++i) {
    const Sample s = SampleAt(L, P.grid, i);
    const float tw = TofWeight(P.tof, k, s.lambda - L.t_ref);
    if (tw == 0.0f) continue;
    sum += tw * Interpolate(P.grid, image, L, i, s);
  }
  return sum * L.step;
}

// Back projection of one TOF bin: image += value * (row k of A for L), value
// including any attenuation factor.
template <typename Add>
TESSERA_RECON_HD inline void BackBin(const ProjectorParams& P, const Lor& L, int k, float value, float* image,
                                     const Add& add) {
  if (value == 0.0f) return;
  float t_lo, t_hi;
  TofWindow(P.tof, k, k, &t_lo, &t_hi);
  int i0, i1;
  if (!PlaneRange(L, P.grid, t_lo, t_hi, &i0, &i1)) return;
  const float scaled = value * L.step;
  for (int i = i0; i <= i1; ++i) {
    const Sample s = SampleAt(L, P.grid, i);
    const float tw = TofWeight(P.tof, k, s.lambda - L.t_ref);
    if (tw == 0.0f) continue;
    Spread(P.grid, image, L, i, s, tw * scaled, add);
  }
}

// Sum over bins of TofWeight(k, t) * y[k * stride], bins [k0, k1] of the
// ones that may weigh t, sharing erf edges.
TESSERA_RECON_HD inline float TofWeightedSum(const TofParams& T, float t, const float* y, int64_t stride) {
  if (T.bins <= 1) return y[0];
  int k0, k1;
  TofBinsAt(T, t, &k0, &k1);
  float sum = 0.0f;
  float e_lo = TofEdgeErf(T, k0, t);
  for (int k = k0; k <= k1; ++k) {
    const float e_hi = TofEdgeErf(T, k + 1, t);
    const float yk = y[k * stride];
    if (yk != 0.0f) sum += 0.5f * (e_hi - e_lo) * yk;
    e_lo = e_hi;
  }
  return sum;
}

// Back projection of all TOF bins of one LOR: image += A_L^T y, with y[k] at
// y[k * stride] and `scale` the LOR's attenuation factor.
template <typename Add>
TESSERA_RECON_HD inline void BackLor(const ProjectorParams& P, const Lor& L, const float* y, int64_t stride,
                                     float scale, float* image, const Add& add) {
  int k0 = P.tof.bins, k1 = -1;
  for (int k = 0; k < P.tof.bins; ++k) {
    if (y[k * stride] != 0.0f) {
      if (k < k0) k0 = k;
      k1 = k;
    }
  }
  if (k1 < 0 || scale == 0.0f) return;
  float t_lo, t_hi;
  TofWindow(P.tof, k0, k1, &t_lo, &t_hi);
  int i0, i1;
  if (!PlaneRange(L, P.grid, t_lo, t_hi, &i0, &i1)) return;
  const float scaled = scale * L.step;
  for (int i = i0; i <= i1; ++i) {
    const Sample s = SampleAt(L, P.grid, i);
    const float value = TofWeightedSum(P.tof, s.lambda - L.t_ref, y, stride);
    if (value == 0.0f) continue;
    Spread(P.grid, image, L, i, s, value * scaled, add);
  }
}

// Detector position (alpha, beta in steps of u and v from det_center) where
// the view's line through point x meets the detector plane. The line's
// direction is x - source (fan, cone) or the ray (parallel). `side` gets the
// sign of the solve's determinant (corners on both sides of the source's
// plane parallel to the detector cannot be bounded). False when degenerate.
TESSERA_RECON_HD inline bool ProjectToDetector(const ProjectorParams& P, int view, const float (&x)[3], float* alpha,
                                               float* beta, int* side) {
  const float* v = P.view_vectors + kFloatsPerView * view;
  float e[3], w[3];
  for (int i = 0; i < 3; ++i) {
    e[i] = P.beam == 0 ? v[i] : x[i] - v[i];
    w[i] = x[i] - v[3 + i];
  }
  const float* u = v + 6;
  const float* vv = v + 9;
  if (P.grid.is_2d) {
    // alpha u - mu e = w in the plane.
    const float det = -u[0] * e[1] + u[1] * e[0];
    const float scale = fabsf(u[0]) + fabsf(u[1]);
    if (!(fabsf(det) > 1e-7f * scale * (fabsf(e[0]) + fabsf(e[1])))) return false;
    *alpha = (-w[0] * e[1] + w[1] * e[0]) / det;
    *beta = 0.0f;
    *side = det > 0 ? 1 : -1;
    return true;
  }
  // [u v -e] (alpha beta mu)^T = w, by Cramer's rule.
  const float m[3] = {-e[0], -e[1], -e[2]};
  const float vxm[3] = {vv[1] * m[2] - vv[2] * m[1], vv[2] * m[0] - vv[0] * m[2], vv[0] * m[1] - vv[1] * m[0]};
  const float wxm[3] = {w[1] * m[2] - w[2] * m[1], w[2] * m[0] - w[0] * m[2], w[0] * m[1] - w[1] * m[0]};
  const float det = u[0] * vxm[0] + u[1] * vxm[1] + u[2] * vxm[2];
  const float uu = u[0] * u[0] + u[1] * u[1] + u[2] * u[2];
  const float vv2 = vv[0] * vv[0] + vv[1] * vv[1] + vv[2] * vv[2];
  const float ee = e[0] * e[0] + e[1] * e[1] + e[2] * e[2];
  const float scale = sqrtf(uu * vv2 * ee);
  if (!(fabsf(det) > 1e-7f * scale)) return false;
  *alpha = (w[0] * vxm[0] + w[1] * vxm[1] + w[2] * vxm[2]) / det;
  *beta = (u[0] * wxm[0] + u[1] * wxm[1] + u[2] * wxm[2]) / det;
  *side = det > 0 ? 1 : -1;
  return true;
}

// Detector pixels [c0, c1] x [r0, r1] whose a-dominant rays may touch voxel
// idx: those whose centres lie in the projection of the voxel's open
// neighbourhood (+- one voxel in the two other axes) in its a-plane, where a
// ray's sample has a non-zero tap weight for the voxel. False when empty.
constexpr float kBoxSlack = 0.05f;  // pixels; float rounding is ~1e-4

TESSERA_RECON_HD inline bool DetectorBox(const ProjectorParams& P, int view, const int (&idx)[3], int a, int* c0,
                                         int* c1, int* r0, int* r1) {
  const GridParams& g = P.grid;
  const int b = a == 0 ? 1 : 0;
  const int c = a == 2 ? 1 : 2;
  float centre[3];
  for (int i = 0; i < 3; ++i) centre[i] = g.lo[i] + (static_cast<float>(idx[i]) + 0.5f) * g.h[i];
  if (g.is_2d) centre[2] = 0.0f;
  float amin = 3e38f, amax = -3e38f, bmin = 3e38f, bmax = -3e38f;
  int first_side = 0;
  bool full = false;
  for (int corner = 0; corner < (g.is_2d ? 2 : 4) && !full; ++corner) {
    float x[3] = {centre[0], centre[1], centre[2]};
    x[b] += (corner & 1) ? g.h[b] : -g.h[b];
    if (!g.is_2d) x[c] += (corner & 2) ? g.h[c] : -g.h[c];
    float alpha, beta;
    int side;
    if (!ProjectToDetector(P, view, x, &alpha, &beta, &side) || (first_side != 0 && side != first_side)) {
      full = true;
      break;
    }
    first_side = side;
    amin = fminf(amin, alpha);
    amax = fmaxf(amax, alpha);
    bmin = fminf(bmin, beta);
    bmax = fmaxf(bmax, beta);
  }
  if (full) {
    *c0 = 0;
    *c1 = P.cols - 1;
    *r0 = 0;
    *r1 = P.rows - 1;
    return true;
  }
  const float oc = 0.5f * static_cast<float>(P.cols - 1), orow = 0.5f * static_cast<float>(P.rows - 1);
  const float lo_c = fmaxf(amin + oc, -2.0f), hi_c = fminf(amax + oc, static_cast<float>(P.cols) + 1.0f);
  const float lo_r = fmaxf(bmin + orow, -2.0f), hi_r = fminf(bmax + orow, static_cast<float>(P.rows) + 1.0f);
  // Pixel centres (integers) strictly inside the projected rectangle, with
  // kBoxSlack of room for rounding (the ones on its edge weigh 0).
  *c0 = static_cast<int>(ceilf(lo_c - kBoxSlack));
  *c1 = static_cast<int>(floorf(hi_c + kBoxSlack));
  *r0 = static_cast<int>(ceilf(lo_r - kBoxSlack));
  *r1 = static_cast<int>(floorf(hi_r + kBoxSlack));
  if (*c0 < 0) *c0 = 0;
  if (*r0 < 0) *r0 = 0;
  if (*c1 > P.cols - 1) *c1 = P.cols - 1;
  if (*r1 > P.rows - 1) *r1 = P.rows - 1;
  return *c0 <= *c1 && *r0 <= *r1;
}

// (A^T y)[voxel idx] over the views of `range`, y in the compact layout;
// every term in a fixed order (views, axes, rows, cols, TOF bins).
TESSERA_RECON_HD inline float GatherVoxel(const ProjectorParams& P, const ViewRange& range, const float* y,
                                          const int (&idx)[3]) {
  const GridParams& g = P.grid;
  const int64_t det = static_cast<int64_t>(P.cols) * P.rows;
  const int64_t per_view = det * P.tof.bins;
  float acc = 0.0f;
  for (int q = 0; q < range.count; ++q) {
    const int p = range.first + q * range.stride;
    const unsigned mask = P.axis_masks[p];
    for (int a = 0; a < (g.is_2d ? 2 : 3); ++a) {
      if (!(mask & (1u << a))) continue;
      int c0, c1, r0, r1;
      if (!DetectorBox(P, p, idx, a, &c0, &c1, &r0, &r1)) continue;
      for (int r = r0; r <= r1; ++r) {
        for (int col = c0; col <= c1; ++col) {
          const Lor L = MakeLor(P, p, col, r);
          if (L.axis != a) continue;
          const Sample s = SampleAt(L, g, idx[a]);
          if (!Near(s.u[0], g.n[L.b]) || (!g.is_2d && !Near(s.u[1], g.n[L.c]))) continue;
          float w = TapWeight(s.u[0], idx[L.b]);
          if (!g.is_2d) w *= TapWeight(s.u[1], idx[L.c]);
          if (w == 0.0f) continue;
          const int64_t lor = col + static_cast<int64_t>(P.cols) * r;
          const float value = TofWeightedSum(P.tof, s.lambda - L.t_ref, y + q * per_view + lor, det);
          if (value == 0.0f) continue;
          const float att = P.atten != nullptr ? P.atten[lor + det * p] : 1.0f;
          acc += (w * value) * (L.step * att);
        }
      }
    }
  }
  return acc;
}

}  // namespace pet
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_PET_LOR_MATH_H_
