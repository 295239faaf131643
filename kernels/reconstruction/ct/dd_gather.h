// The gather formulations of the distance-driven projector, written once for
// the CUDA kernels and for their host run (cpu::GatherForward/GatherBack,
// which the CPU tests check against the reference):
//   forward: per detector cell, walk the slabs and add the overlapped voxels;
//   back:    per voxel, per view, find the detector cells whose mapped
//            intervals can overlap it and add their weighted values.
// Both sum in a fixed order, so they are deterministic. Each cell's interval
// ends are computed in double once per cell and walked in float along the
// slabs (lo + i * slope), in both directions, so the two agree weight by weight.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_CT_DD_GATHER_H_
#define TESSERA_KERNELS_RECONSTRUCTION_CT_DD_GATHER_H_

#include <cmath>
#include <cstdint>

#include "kernels/reconstruction/ct/dd_view.h"

namespace tessera {
namespace recon {
namespace ct {
namespace gather {

// A cell's interval ends on slab i: b in [lo_b + i dlo_b, hi_b + i dhi_b]
// (ordered on every slab: both lines meet only at the source), likewise c
// (fixed [0, 1] in 2-D); scale is the ray length per slab. Slabs outside
// [i_begin, i_end) miss the volume.
struct CellLines {
  float lo_b, dlo_b, hi_b, dhi_b;
  float lo_c, dlo_c, hi_c, dhi_c;
  float scale;
  int i_begin, i_end;
};

TESSERA_RECON_HD inline double MinD(double a, double b) { return a < b ? a : b; }
TESSERA_RECON_HD inline double MaxD(double a, double b) { return a > b ? a : b; }

// Keeps the slabs where a + b i > bound (keep_above) or < bound.
TESSERA_RECON_HD inline void ClipSlabs(double a, double b, double bound, bool keep_above, double* lo, double* hi) {
  if (b == 0) {
    if (keep_above ? !(a > bound) : !(a < bound)) *hi = -1e30;
    return;
  }
  const double t = (bound - a) / b;
  if ((b > 0) == keep_above) {
    *lo = MaxD(*lo, t);
  } else {
    *hi = MinD(*hi, t);
  }
}

// Interval ends of cell (g, r), without the slab range.
TESSERA_RECON_HD inline CellLines MakeCellEnds(const DdView& w, bool is_2d, double g, double r) {
  CellLines cl;
  const double d0 = Affine(w.den, g - 0.5, r), d1 = Affine(w.den, g + 0.5, r);
  double a0 = Affine(w.nb, g - 0.5, r) / d0, s0 = Affine(w.mb, g - 0.5, r) / d0;
  double a1 = Affine(w.nb, g + 0.5, r) / d1, s1 = Affine(w.mb, g + 0.5, r) / d1;
  // The order is the same on every slab, so slab 0 decides it (ties: width 0
  // is impossible on a validated geometry).
  if (a0 > a1 || (a0 == a1 && s0 > s1)) {
    double t = a0; a0 = a1; a1 = t;
    t = s0; s0 = s1; s1 = t;
  }
  cl.lo_b = static_cast<float>(a0), cl.dlo_b = static_cast<float>(s0);
  cl.hi_b = static_cast<float>(a1), cl.dhi_b = static_cast<float>(s1);
  if (is_2d) {
    cl.lo_c = 0, cl.dlo_c = 0, cl.hi_c = 1, cl.dhi_c = 0;
  } else {
    const double e0 = Affine(w.den, g, r - 0.5), e1 = Affine(w.den, g, r + 0.5);
    double c0 = Affine(w.nc, g, r - 0.5) / e0, t0 = Affine(w.mc, g, r - 0.5) / e0;
    double c1 = Affine(w.nc, g, r + 0.5) / e1, t1 = Affine(w.mc, g, r + 0.5) / e1;
    if (c0 > c1 || (c0 == c1 && t0 > t1)) {
      double t = c0; c0 = c1; c1 = t;
      t = t0; t0 = t1; t1 = t;
    }
    cl.lo_c = static_cast<float>(c0), cl.dlo_c = static_cast<float>(t0);
    cl.hi_c = static_cast<float>(c1), cl.dhi_c = static_cast<float>(t1);
  }
  cl.scale = static_cast<float>(RayLengthPerSlab(w, g, r));
  cl.i_begin = 0, cl.i_end = 0;
  return cl;
}

// Interval ends plus the slabs whose intervals can meet the volume (padded by
// one slab: the walk in float decides the rest; extra slabs add zeros).
TESSERA_RECON_HD inline CellLines MakeCellLines(const DdView& w, const DdShape& s, double g, double r) {
  CellLines cl = MakeCellEnds(w, s.is_2d, g, r);
  const int64_t na = SlabCount(s, w.axis);
  const double nb = static_cast<double>(InPlaneCount(s, w.axis)), nc = static_cast<double>(s.nz);
  double lo = 0, hi = static_cast<double>(na - 1);
  ClipSlabs(cl.hi_b, cl.dhi_b, 0.0, true, &lo, &hi);
  ClipSlabs(cl.lo_b, cl.dlo_b, nb, false, &lo, &hi);
  if (!s.is_2d) {
    ClipSlabs(cl.hi_c, cl.dhi_c, 0.0, true, &lo, &hi);
    ClipSlabs(cl.lo_c, cl.dlo_c, nc, false, &lo, &hi);
  }
  if (lo > hi) return cl;
  lo = MaxD(0.0, floor(lo) - 1.0);
  hi = MinD(static_cast<double>(na), floor(hi) + 2.0);
  cl.i_begin = static_cast<int>(lo);
  cl.i_end = static_cast<int>(hi);
  return cl;
}

TESSERA_RECON_HD inline int FloorIndex(float t, int n) {
  // Clamped to [0, n] before the cast so far-away ends cannot overflow.
  const float c = t < 0.f ? 0.f : (t > static_cast<float>(n) ? static_cast<float>(n) : t);
  return static_cast<int>(floorf(c));
}
TESSERA_RECON_HD inline int CeilIndex(float t, int n) {
  const float c = t < 0.f ? 0.f : (t > static_cast<float>(n) ? static_cast<float>(n) : t);
  return static_cast<int>(ceilf(c));
}

// One detector cell: sum over slabs of L * sum_jk x ov_b ov_c / (w_b w_c).
// `volume` is laid out b fastest, then a, then c: x index + nx (y + ny z) for
// y-slab views, its x<->y transpose for x-slab views.
template <bool k2d>
TESSERA_RECON_HD inline float ForwardCell(const CellLines& cl, const float* __restrict__ volume, int nb, int na,
                                          int nc) {
  float sum = 0.f;
  for (int i = cl.i_begin; i < cl.i_end; ++i) {
    const float fi = static_cast<float>(i);
    const float lb = cl.lo_b + fi * cl.dlo_b, hb = cl.hi_b + fi * cl.dhi_b;
    const int j0 = FloorIndex(lb, nb), j1 = CeilIndex(hb, nb);
    if (k2d) {
      const float* row = volume + static_cast<int64_t>(nb) * i;
      float acc = 0.f;
      for (int j = j0; j < j1; ++j) acc += Overlap(lb, hb, static_cast<float>(j)) * row[j];
      sum += acc / (hb - lb);
    } else {
      const float lc = cl.lo_c + fi * cl.dlo_c, hc = cl.hi_c + fi * cl.dhi_c;
      const int k0 = FloorIndex(lc, nc), k1 = CeilIndex(hc, nc);
      float acc = 0.f;
      for (int k = k0; k < k1; ++k) {
        const float* row = volume + static_cast<int64_t>(nb) * (i + static_cast<int64_t>(na) * k);
        float part = 0.f;
        for (int j = j0; j < j1; ++j) part += Overlap(lb, hb, static_cast<float>(j)) * row[j];
        acc += Overlap(lc, hc, static_cast<float>(k)) * part;
      }
      sum += acc / ((hb - lb) * (hc - lc));
    }
  }
  return sum * cl.scale;
}

// Detector column (g offset) where the ray of row r on slab i meets b = t,
// clipped to the detector's extent [-cols/2, cols/2] (the map is monotone
// there, so clipping keeps the preimage of an interval exact).
TESSERA_RECON_HD inline double PreimageCol(const DdView& w, double half_cols, double i, double t, double r) {
  const double ga = -half_cols, gb = half_cols;
  const double ma = MapB(w, ga, r, i), mb = MapB(w, gb, r, i);
  const bool increasing = mb >= ma;
  if (increasing ? t <= ma : t >= ma) return ga;
  if (increasing ? t >= mb : t <= mb) return gb;
  const double n0 = w.nb[0] + w.nb[2] * r + i * (w.mb[0] + w.mb[2] * r), n1 = w.nb[1] + i * w.mb[1];
  const double d0 = w.den[0] + w.den[2] * r, d1 = w.den[1];
  const double g = (t * d0 - n0) / (n1 - t * d1);
  return g >= ga ? (g <= gb ? g : gb) : ga;  // NaN (impossible inside the image) -> ga
}

// Detector row (r offset) where the ray of column g on slab i meets c = t,
// clipped to [-rows/2, rows/2].
TESSERA_RECON_HD inline double PreimageRow(const DdView& w, double half_rows, double i, double t, double g) {
  const double ra = -half_rows, rb = half_rows;
  const double ma = MapC(w, g, ra, i), mb = MapC(w, g, rb, i);
  const bool increasing = mb >= ma;
  if (increasing ? t <= ma : t >= ma) return ra;
  if (increasing ? t >= mb : t <= mb) return rb;
  const double n0 = w.nc[0] + w.nc[1] * g + i * (w.mc[0] + w.mc[1] * g), n2 = w.nc[2] + i * w.mc[2];
  const double d0 = w.den[0] + w.den[1] * g, d2 = w.den[2];
  const double r = (t * d0 - n0) / (n2 - t * d2);
  return r >= ra ? (r <= rb ? r : rb) : ra;
}

// Cells whose segment [x - 1/2, x + 1/2] can meet the preimage [pmin, pmax]
// (offset coordinates, centre offset `half`): index range, with a hair of
// slack (the weights of extra cells are exact zeros).
TESSERA_RECON_HD inline void CellRange(double pmin, double pmax, double centre, int64_t n, int64_t* lo, int64_t* hi) {
  const double a = floor(pmin + centre - 0.5 - 1e-6), b = ceil(pmax + centre + 0.5 + 1e-6);
  *lo = a < 0 ? 0 : static_cast<int64_t>(a);
  *hi = b > static_cast<double>(n - 1) ? n - 1 : static_cast<int64_t>(b);
}

// Columns whose cells (at any row centre in [r_lo, r_hi]) can overlap b in
// [j, j + 1] on slab i: the preimage of the strip is bounded by two lines in
// (g, r), so its extent over a row range is reached at the range's ends.
TESSERA_RECON_HD inline void ColumnRange(const DdView& w, const DdShape& s, double i, double j, int64_t r_lo,
                                         int64_t r_hi, int64_t* c_lo, int64_t* c_hi) {
  const double half_cols = 0.5 * static_cast<double>(s.cols), rc = 0.5 * static_cast<double>(s.rows - 1);
  double pmin = 1e300, pmax = -1e300;
  const double rs[2] = {static_cast<double>(r_lo) - rc, static_cast<double>(r_hi) - rc};
  for (int e = 0; e < (r_lo == r_hi ? 1 : 2); ++e) {
    for (int side = 0; side < 2; ++side) {
      const double p = PreimageCol(w, half_cols, i, j + side, rs[e]);
      pmin = MinD(pmin, p), pmax = MaxD(pmax, p);
    }
  }
  if (pmax <= -half_cols || pmin >= half_cols) {  // the strip misses the detector
    *c_lo = 1, *c_hi = 0;
    return;
  }
  CellRange(pmin, pmax, 0.5 * static_cast<double>(s.cols - 1), s.cols, c_lo, c_hi);
}

TESSERA_RECON_HD inline void RowRange(const DdView& w, const DdShape& s, double i, double k, int64_t c_lo,
                                      int64_t c_hi, int64_t* r_lo, int64_t* r_hi) {
  const double half_rows = 0.5 * static_cast<double>(s.rows), gc = 0.5 * static_cast<double>(s.cols - 1);
  double pmin = 1e300, pmax = -1e300;
  const double gs[2] = {static_cast<double>(c_lo) - gc, static_cast<double>(c_hi) - gc};
  for (int e = 0; e < (c_lo == c_hi ? 1 : 2); ++e) {
    for (int side = 0; side < 2; ++side) {
      const double p = PreimageRow(w, half_rows, i, k + side, gs[e]);
      pmin = MinD(pmin, p), pmax = MaxD(pmax, p);
    }
  }
  if (pmax <= -half_rows || pmin >= half_rows) {
    *r_lo = 1, *r_hi = 0;
    return;
  }
  CellRange(pmin, pmax, 0.5 * static_cast<double>(s.rows - 1), s.rows, r_lo, r_hi);
}

// Back projection of one view into voxel (x, y, z): sum over the cells that
// overlap it of y * L * ov_b ov_c / (w_b w_c), with the weights computed as
// ForwardCell computes them. `view_sino` is the view's cols x rows block.
template <bool k2d>
TESSERA_RECON_HD inline float BackVoxelView(const DdView& w, const DdShape& s, int64_t x, int64_t y, int64_t z,
                                            const float* __restrict__ view_sino) {
  const int64_t i = w.axis == 0 ? x : y, j = w.axis == 0 ? y : x;
  const double di = static_cast<double>(i), dj = static_cast<double>(j);
  int64_t c_lo, c_hi, r_lo = 0, r_hi = s.rows - 1;
  ColumnRange(w, s, di, dj, r_lo, r_hi, &c_lo, &c_hi);
  if (c_lo > c_hi) return 0.f;
  if (!k2d) {
    const double dk = static_cast<double>(z);
    RowRange(w, s, di, dk, c_lo, c_hi, &r_lo, &r_hi);
    if (r_lo > r_hi) return 0.f;
    if (w.row_coupled) {  // tilted detector: narrow the columns to those rows, then the rows again
      ColumnRange(w, s, di, dj, r_lo, r_hi, &c_lo, &c_hi);
      if (c_lo > c_hi) return 0.f;
      RowRange(w, s, di, dk, c_lo, c_hi, &r_lo, &r_hi);
      if (r_lo > r_hi) return 0.f;
    }
  }
  const double gc = 0.5 * static_cast<double>(s.cols - 1), rc = 0.5 * static_cast<double>(s.rows - 1);
  const float fi = static_cast<float>(i), fj = static_cast<float>(j), fk = static_cast<float>(z);
  float acc = 0.f;
  for (int64_t r = r_lo; r <= r_hi; ++r) {
    for (int64_t c = c_lo; c <= c_hi; ++c) {
      const CellLines cl = MakeCellEnds(w, k2d, static_cast<double>(c) - gc, static_cast<double>(r) - rc);
      const float lb = cl.lo_b + fi * cl.dlo_b, hb = cl.hi_b + fi * cl.dhi_b;
      const float ob = Overlap(lb, hb, fj);
      if (ob <= 0.f) continue;
      float weight = ob / (hb - lb);
      if (!k2d) {
        const float lc = cl.lo_c + fi * cl.dlo_c, hc = cl.hi_c + fi * cl.dhi_c;
        const float oc = Overlap(lc, hc, fk);
        if (oc <= 0.f) continue;
        weight *= oc / (hc - lc);
      }
      acc += weight * cl.scale * view_sino[c + s.cols * r];
    }
  }
  return acc;
}

}  // namespace gather
}  // namespace ct
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_CT_DD_GATHER_H_
