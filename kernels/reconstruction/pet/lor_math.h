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
//   - scatter (ray-driven): walk each LOR and add into the voxels it touches
//     (float atomics, or fixed-point integer atomics for a deterministic
//     result: fixed_point.h);
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
  // An upper bound on the atten factors when they may exceed 1 (attenuation
  // times detection efficiencies); <= 1 (or 0, unset) means 1. Scales the
  // fixed-point back projection's weight bound (FixedPointParamsBound).
  float atten_bound;
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

// Per-LOR constants, permuted to the LOR's own axes (a: dominant; b, c: the
// other two, c = z in 2-D), so the sampling loops index nothing at run time:
// on the GPU everything stays in registers.
struct Lor {
  int axis;                   // a (0: x, 1: y, 2: z)
  float d[3];                 // unit direction in x, y, z, towards the pixel
  float pa, pb, pc;           // origin point (source, or pixel centre for parallel beams) along a, b, c
  float da, db, dc;           // direction along a, b, c
  float inv_da;               // 1 / da
  float lo_a, h_a, inv_h_a;   // grid along a
  float lo_b, h_b, inv_h_b;   // ... b
  float lo_c, h_c, inv_h_c;   // ... c
  int n_a, n_b, n_c;
  int64_t s_a, s_b, s_c;      // voxel index strides along a, b, c
  float step;                 // h_a / |da|: mm of line per plane
  float t_ref;                // lambda of the point closest to the volume centre
};

struct Sample {
  float lambda;  // distance from the origin point (mm)
  float u[2];    // continuous voxel indices along axes b and c (voxel centres are integers)
};

TESSERA_RECON_HD inline float Pick(const float (&v)[3], int i) { return i == 0 ? v[0] : (i == 1 ? v[1] : v[2]); }
TESSERA_RECON_HD inline int Pick(const int (&v)[3], int i) { return i == 0 ? v[0] : (i == 1 ? v[1] : v[2]); }

TESSERA_RECON_HD inline Lor MakeLor(const ProjectorParams& P, int view, int col, int row) {
  const GridParams& g = P.grid;
  const float* v = P.view_vectors + kFloatsPerView * view;
  const float ca = static_cast<float>(col) - 0.5f * static_cast<float>(P.cols - 1);
  const float rb = static_cast<float>(row) - 0.5f * static_cast<float>(P.rows - 1);
  float pix[3], p[3], d[3];
  Lor L;
  for (int i = 0; i < 3; ++i) pix[i] = v[3 + i] + ca * v[6 + i] + rb * v[9 + i];
  for (int i = 0; i < 3; ++i) {
    if (P.beam == 0) {
      p[i] = pix[i];
      d[i] = v[i];
    } else {
      p[i] = v[i];
      d[i] = pix[i] - v[i];
    }
  }
  if (g.is_2d) {
    p[2] = 0.0f;
    d[2] = 0.0f;
  }
  const float inv_norm = 1.0f / sqrtf(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
  for (int i = 0; i < 3; ++i) L.d[i] = d[i] * inv_norm;
  const float ax = fabsf(L.d[0]), ay = fabsf(L.d[1]), az = fabsf(L.d[2]);
  int a = 0;
  float best = ax;
  if (ay > best) {
    a = 1;
    best = ay;
  }
  if (!g.is_2d && az > best) a = 2;
  const int b = a == 0 ? 1 : 0, c = a == 2 ? 1 : 2;
  L.axis = a;
  L.pa = Pick(p, a);
  L.pb = Pick(p, b);
  L.pc = Pick(p, c);
  L.da = Pick(L.d, a);
  L.db = Pick(L.d, b);
  L.dc = Pick(L.d, c);
  L.lo_a = Pick(g.lo, a);
  L.h_a = Pick(g.h, a);
  L.inv_h_a = Pick(g.inv_h, a);
  L.lo_b = Pick(g.lo, b);
  L.h_b = Pick(g.h, b);
  L.inv_h_b = Pick(g.inv_h, b);
  L.lo_c = Pick(g.lo, c);
  L.h_c = Pick(g.h, c);
  L.inv_h_c = Pick(g.inv_h, c);
  L.n_a = Pick(g.n, a);
  L.n_b = Pick(g.n, b);
  L.n_c = Pick(g.n, c);
  const int64_t sy = g.n[0], sz = static_cast<int64_t>(g.n[0]) * g.n[1];
  L.s_a = a == 0 ? 1 : (a == 1 ? sy : sz);
  L.s_b = b == 0 ? 1 : sy;
  L.s_c = c == 1 ? sy : sz;
  L.inv_da = 1.0f / L.da;
  L.step = L.h_a * fabsf(L.inv_da);
  L.t_ref = (g.centre[0] - p[0]) * L.d[0] + (g.centre[1] - p[1]) * L.d[1] + (g.centre[2] - p[2]) * L.d[2];
  return L;
}

// The sample of L in plane i of its dominant axis.
TESSERA_RECON_HD inline Sample SampleAt(const Lor& L, const GridParams& g, int i) {
  Sample s;
  const float q = L.lo_a + (static_cast<float>(i) + 0.5f) * L.h_a;
  s.lambda = (q - L.pa) * L.inv_da;
  s.u[0] = (L.pb + s.lambda * L.db - L.lo_b) * L.inv_h_b - 0.5f;
  s.u[1] = g.is_2d ? 0.0f : (L.pc + s.lambda * L.dc - L.lo_c) * L.inv_h_c - 0.5f;
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
// Narrows [*lam_lo, *lam_hi] to where the line (origin o, direction d along
// one axis) is inside the slab [lo, hi]. False when it never is.
TESSERA_RECON_HD inline bool ClipToSlab(float o, float d, float lo, float hi, float* lam_lo, float* lam_hi) {
  if (fabsf(d) < 1e-12f) return o > lo && o < hi;
  float l1 = (lo - o) / d, l2 = (hi - o) / d;
  if (l1 > l2) {
    const float tmp = l1;
    l1 = l2;
    l2 = tmp;
  }
  *lam_lo = fmaxf(*lam_lo, l1);
  *lam_hi = fminf(*lam_hi, l2);
  return true;
}

TESSERA_RECON_HD inline bool PlaneRange(const Lor& L, const GridParams& g, float t_lo, float t_hi, int* i0, int* i1) {
  float lam_lo = L.t_ref + t_lo, lam_hi = L.t_ref + t_hi;
  // Samples interpolate voxels of an axis while their coordinate is within one voxel of the grid.
  if (!ClipToSlab(L.pb, L.db, L.lo_b - 0.5f * L.h_b, L.lo_b + (static_cast<float>(L.n_b) + 0.5f) * L.h_b, &lam_lo,
                  &lam_hi)) {
    return false;
  }
  if (!g.is_2d && !ClipToSlab(L.pc, L.dc, L.lo_c - 0.5f * L.h_c,
                              L.lo_c + (static_cast<float>(L.n_c) + 0.5f) * L.h_c, &lam_lo, &lam_hi)) {
    return false;
  }
  if (!(lam_lo <= lam_hi)) return false;
  float f1 = (L.pa + lam_lo * L.da - L.lo_a) * L.inv_h_a - 0.5f;
  float f2 = (L.pa + lam_hi * L.da - L.lo_a) * L.inv_h_a - 0.5f;
  if (f1 > f2) {
    const float tmp = f1;
    f1 = f2;
    f2 = tmp;
  }
  f1 = fmaxf(f1, -4.0f);
  f2 = fminf(f2, static_cast<float>(L.n_a) + 4.0f);
  int lo = static_cast<int>(floorf(f1)) - 1, hi = static_cast<int>(ceilf(f2)) + 1;
  if (lo < 0) lo = 0;
  if (hi > L.n_a - 1) hi = L.n_a - 1;
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

// Interpolated volume value at sample s of plane i.
TESSERA_RECON_HD inline float Interpolate(const GridParams& g, const float* image, const Lor& L, int i,
                                          const Sample& s) {
  if (!Near(s.u[0], L.n_b) || (!g.is_2d && !Near(s.u[1], L.n_c))) return 0.0f;
  const int jb = static_cast<int>(floorf(s.u[0]));
  const int jc = g.is_2d ? 0 : static_cast<int>(floorf(s.u[1]));
  const int64_t base = i * L.s_a;
  float value = 0.0f;
  for (int db = 0; db < 2; ++db) {
    const int j = jb + db;
    if (j < 0 || j >= L.n_b) continue;
    const float wb = TapWeight(s.u[0], j);
    for (int dc = 0; dc < (g.is_2d ? 1 : 2); ++dc) {
      const int k = jc + dc;
      if (k < 0 || k >= L.n_c) continue;
      const float w = g.is_2d ? wb : wb * TapWeight(s.u[1], k);
      value += w * image[base + j * L.s_b + k * L.s_c];
    }
  }
  return value;
}

// Adds value * (interpolation weight) into the voxels sample s touches;
// add(int64_t voxel, float what) does the addition into whatever accumulator
// it holds (a float volume, plainly or atomically, or fixed-point integers).
template <typename Add>
TESSERA_RECON_HD inline void Spread(const GridParams& g, const Lor& L, int i, const Sample& s, float value,
                                    const Add& add) {
  if (!Near(s.u[0], L.n_b) || (!g.is_2d && !Near(s.u[1], L.n_c))) return;
  const int jb = static_cast<int>(floorf(s.u[0]));
  const int jc = g.is_2d ? 0 : static_cast<int>(floorf(s.u[1]));
  const int64_t base = i * L.s_a;
  for (int db = 0; db < 2; ++db) {
    const int j = jb + db;
    if (j < 0 || j >= L.n_b) continue;
    const float wb = TapWeight(s.u[0], j);
    for (int dc = 0; dc < (g.is_2d ? 1 : 2); ++dc) {
      const int k = jc + dc;
      if (k < 0 || k >= L.n_c) continue;
      const float w = g.is_2d ? wb : wb * TapWeight(s.u[1], k);
      add(base + j * L.s_b + k * L.s_c, w * value);
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
TESSERA_RECON_HD inline void BackBin(const ProjectorParams& P, const Lor& L, int k, float value, const Add& add) {
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
    Spread(P.grid, L, i, s, tw * scaled, add);
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
// y[k * stride] and `scale` the LOR's attenuation factor. Each voxel gets at
// most one term per LOR (one sample per plane), of magnitude at most
// step * scale * sum_k |y_k| (tap and TOF weights are <= 1): fixed_point.h's
// bound rests on this.
template <typename Add>
TESSERA_RECON_HD inline void BackLor(const ProjectorParams& P, const Lor& L, const float* y, int64_t stride,
                                     float scale, const Add& add) {
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
    Spread(P.grid, L, i, s, value * scaled, add);
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

template <int A>
TESSERA_RECON_HD inline bool DetectorBox(const ProjectorParams& P, int view, const int (&idx)[3], int* c0, int* c1,
                                         int* r0, int* r1) {
  constexpr int B = A == 0 ? 1 : 0;
  constexpr int C = A == 2 ? 1 : 2;
  const GridParams& g = P.grid;
  float centre[3];
  for (int i = 0; i < 3; ++i) centre[i] = g.lo[i] + (static_cast<float>(idx[i]) + 0.5f) * g.h[i];
  if (g.is_2d) centre[2] = 0.0f;
  float amin = 3e38f, amax = -3e38f, bmin = 3e38f, bmax = -3e38f;
  int first_side = 0;
  bool full = false;
  for (int corner = 0; corner < (g.is_2d ? 2 : 4); ++corner) {
    float x[3] = {centre[0], centre[1], centre[2]};
    x[B] += (corner & 1) ? g.h[B] : -g.h[B];
    if (!g.is_2d) x[C] += (corner & 2) ? g.h[C] : -g.h[C];
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

// The terms of voxel idx from the A-dominant rays of view p (view block
// y_view of a compact range): rows, then cols, then TOF bins.
template <int A>
TESSERA_RECON_HD inline float GatherViewAxis(const ProjectorParams& P, int p, const float* y_view,
                                             const int (&idx)[3]) {
  constexpr int B = A == 0 ? 1 : 0;
  constexpr int C = A == 2 ? 1 : 2;
  const GridParams& g = P.grid;
  const int64_t det = static_cast<int64_t>(P.cols) * P.rows;
  int c0, c1, r0, r1;
  if (!DetectorBox<A>(P, p, idx, &c0, &c1, &r0, &r1)) return 0.0f;
  float acc = 0.0f;
  for (int r = r0; r <= r1; ++r) {
    for (int col = c0; col <= c1; ++col) {
      const Lor L = MakeLor(P, p, col, r);
      if (L.axis != A) continue;
      const Sample s = SampleAt(L, g, idx[A]);
      if (!Near(s.u[0], L.n_b) || (!g.is_2d && !Near(s.u[1], L.n_c))) continue;
      float w = TapWeight(s.u[0], idx[B]);
      if (!g.is_2d) w *= TapWeight(s.u[1], idx[C]);
      if (w == 0.0f) continue;
      const int64_t lor = col + static_cast<int64_t>(P.cols) * r;
      const float value = TofWeightedSum(P.tof, s.lambda - L.t_ref, y_view + lor, det);
      if (value == 0.0f) continue;
      const float att = P.atten != nullptr ? P.atten[lor + det * p] : 1.0f;
      acc += (w * value) * (L.step * att);
    }
  }
  return acc;
}

// (A^T y)[voxel idx] over the views of `range`, y in the compact layout;
// every term in a fixed order (views, axes, rows, cols, TOF bins).
TESSERA_RECON_HD inline float GatherVoxel(const ProjectorParams& P, const ViewRange& range, const float* y,
                                          const int (&idx)[3]) {
  const int64_t per_view = static_cast<int64_t>(P.cols) * P.rows * P.tof.bins;
  float acc = 0.0f;
  for (int q = 0; q < range.count; ++q) {
    const int p = range.first + q * range.stride;
    const unsigned mask = P.axis_masks[p];
    const float* y_view = y + q * per_view;
    if (mask & 1u) acc += GatherViewAxis<0>(P, p, y_view, idx);
    if (mask & 2u) acc += GatherViewAxis<1>(P, p, y_view, idx);
    if (!P.grid.is_2d && (mask & 4u)) acc += GatherViewAxis<2>(P, p, y_view, idx);
  }
  return acc;
}

}  // namespace pet
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_PET_LOR_MATH_H_
