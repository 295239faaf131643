// The gather formulations of the distance-driven projector, written once for
// the CUDA kernels and for their host run (cpu::GatherForward/GatherBack,
// which the CPU tests check against the reference):
//   forward: per detector cell, walk the slabs and add the overlapped voxels;
//   back:    per voxel, per view, find the detector cells whose mapped
//            intervals can overlap it and add their weighted values.
// Both sum in a fixed order, so they are deterministic. A cell's interval
// ends are lines in the slab index (lo + i * slope, float), made by one
// function for both directions, so forward and back use the same weights.
// Views whose b map ignores the row (2-D, circular cone) read their lines
// from the plan's per-column float tables (ColumnTable, no division per cell);
// row-coupled views (tilted detectors) compute them per cell in double.
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

// Orders two lines by their value on slab 0 (then by slope).
TESSERA_RECON_HD inline void SetOrdered(float a0, float s0, float a1, float s1, float* lo, float* dlo, float* hi,
                                        float* dhi) {
  if (a0 > a1 || (a0 == a1 && s0 > s1)) {
    *lo = a1, *dlo = s1, *hi = a0, *dhi = s0;
  } else {
    *lo = a0, *dlo = s0, *hi = a1, *dhi = s1;
  }
}

// Row-coupled views: the cell's lines from the view's maps, in double.
TESSERA_RECON_HD inline CellLines MakeCellEnds(const DdView& w, bool is_2d, double g, double r) {
  CellLines cl;
  const double d0 = Affine(w.den, g - 0.5, r), d1 = Affine(w.den, g + 0.5, r);
  SetOrdered(static_cast<float>(Affine(w.nb, g - 0.5, r) / d0), static_cast<float>(Affine(w.mb, g - 0.5, r) / d0),
             static_cast<float>(Affine(w.nb, g + 0.5, r) / d1), static_cast<float>(Affine(w.mb, g + 0.5, r) / d1),
             &cl.lo_b, &cl.dlo_b, &cl.hi_b, &cl.dhi_b);
  if (is_2d) {
    cl.lo_c = 0, cl.dlo_c = 0, cl.hi_c = 1, cl.dhi_c = 0;
  } else {
    const double e0 = Affine(w.den, g, r - 0.5), e1 = Affine(w.den, g, r + 0.5);
    SetOrdered(static_cast<float>(Affine(w.nc, g, r - 0.5) / e0), static_cast<float>(Affine(w.mc, g, r - 0.5) / e0),
               static_cast<float>(Affine(w.nc, g, r + 0.5) / e1), static_cast<float>(Affine(w.mc, g, r + 0.5) / e1),
               &cl.lo_c, &cl.dlo_c, &cl.hi_c, &cl.dhi_c);
  }
  cl.scale = static_cast<float>(RayLengthPerSlab(w, g, r));
  cl.i_begin = 0, cl.i_end = 0;
  return cl;
}

// Table views: the b lines of column c.
TESSERA_RECON_HD inline void TableBLines(const ColumnTable& t, int64_t c, CellLines* cl) {
  SetOrdered(t.a[c], t.b[c], t.a[c + 1], t.b[c + 1], &cl->lo_b, &cl->dlo_b, &cl->hi_b, &cl->dhi_b);
}

// Table views: the c lines and ray length of cell (c, row offset r).
TESSERA_RECON_HD inline void TableCLines(const DdView& w, const ColumnTable& t, bool is_2d, int64_t c, float r,
                                         CellLines* cl) {
  float wc = t.wc[c];
  if (is_2d) {
    cl->lo_c = 0, cl->dlo_c = 0, cl->hi_c = 1, cl->dhi_c = 0;
  } else {
    const float r0 = r - 0.5f, r1 = r + 0.5f;
    SetOrdered(t.p[c] + r0 * t.rr[c], t.q[c] + r0 * t.s[c], t.p[c] + r1 * t.rr[c], t.q[c] + r1 * t.s[c], &cl->lo_c,
               &cl->dlo_c, &cl->hi_c, &cl->dhi_c);
    wc += r * static_cast<float>(w.ev[2]);
  }
  cl->scale = t.len[c] * sqrtf(t.wa[c] * t.wa[c] + t.wb[c] * t.wb[c] + wc * wc);
}

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

// The slabs whose intervals can meet the volume, padded by one slab (the
// walk in float decides the rest; extra slabs add exact zeros).
TESSERA_RECON_HD inline void ClipToVolume(const DdShape& s, int axis, CellLines* cl) {
  const int64_t na = SlabCount(s, axis);
  double lo = 0, hi = static_cast<double>(na - 1);
  ClipSlabs(cl->hi_b, cl->dhi_b, 0.0, true, &lo, &hi);
  ClipSlabs(cl->lo_b, cl->dlo_b, static_cast<double>(InPlaneCount(s, axis)), false, &lo, &hi);
  if (!s.is_2d) {
    ClipSlabs(cl->hi_c, cl->dhi_c, 0.0, true, &lo, &hi);
    ClipSlabs(cl->lo_c, cl->dlo_c, static_cast<double>(s.nz), false, &lo, &hi);
  }
  if (lo > hi) {
    cl->i_begin = cl->i_end = 0;
    return;
  }
  cl->i_begin = static_cast<int>(MaxD(0.0, floor(lo) - 1.0));
  cl->i_end = static_cast<int>(MinD(static_cast<double>(na), floor(hi) + 2.0));
}

// Lines and slab range of detector cell (c, r); `view_table` is the view's
// ColumnTable storage (read only when the view is not row-coupled).
TESSERA_RECON_HD inline CellLines CellLinesFor(const DdView& w, const float* view_table, const DdShape& s, int64_t c,
                                               int64_t r) {
  const double g = static_cast<double>(c) - 0.5 * static_cast<double>(s.cols - 1);
  const double rr = static_cast<double>(r) - 0.5 * static_cast<double>(s.rows - 1);
  CellLines cl;
  if (w.row_coupled) {
    cl = MakeCellEnds(w, s.is_2d, g, rr);
  } else {
    const ColumnTable t = TableAt(view_table, s.cols);
    TableBLines(t, c, &cl);
    TableCLines(w, t, s.is_2d, c, static_cast<float>(rr), &cl);
  }
  ClipToVolume(s, w.axis, &cl);
  return cl;
}

TESSERA_RECON_HD inline int ClampIndex(float t, int n, bool up) {
  // Clamped to [0, n] before the cast so far-away ends cannot overflow.
  const float c = t < 0.f ? 0.f : (t > static_cast<float>(n) ? static_cast<float>(n) : t);
  return static_cast<int>(up ? ceilf(c) : floorf(c));
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
    const int j0 = ClampIndex(lb, nb, false), j1 = ClampIndex(hb, nb, true);
    if (k2d) {
      const float* row = volume + static_cast<int64_t>(nb) * i;
      float acc = 0.f;
      for (int j = j0; j < j1; ++j) acc += Overlap(lb, hb, static_cast<float>(j)) * row[j];
      sum += acc / (hb - lb);
    } else {
      const float lc = cl.lo_c + fi * cl.dlo_c, hc = cl.hi_c + fi * cl.dhi_c;
      const int k0 = ClampIndex(lc, nc, false), k1 = ClampIndex(hc, nc, true);
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

// Solves (n0 + n1 g) / (d0 + d1 g) = t for g, clipped to [-half, half]. On
// the detector d0 + d1 g keeps d0's sign; a solution on the other branch of
// the hyperbola means t lies beyond the asymptote, i.e. past the detector's
// end away from the pole -d0/d1. Clipping keeps preimages of intervals exact
// because the map is monotone on the detector.
TESSERA_RECON_HD inline double SolveProjective(double n0, double n1, double d0, double d1, double t, double half) {
  const double q = n1 - t * d1;
  double g;
  if ((d0 * n1 - d1 * n0) * q * d0 > 0) {
    g = (t * d0 - n0) / q;
  } else {
    g = -d0 / d1 < 0 ? half : -half;
  }
  return g >= -half ? (g <= half ? g : half) : -half;  // NaN -> -half
}

// Column offset where the ray of row offset r meets b = t on slab i.
TESSERA_RECON_HD inline double PreimageCol(const DdView& w, double half_cols, double i, double t, double r) {
  return SolveProjective(w.nb[0] + w.nb[2] * r + i * (w.mb[0] + w.mb[2] * r), w.nb[1] + i * w.mb[1],
                         w.den[0] + w.den[2] * r, w.den[1], t, half_cols);
}

// Row offset where the ray of column offset g meets c = t on slab i.
TESSERA_RECON_HD inline double PreimageRow(const DdView& w, double half_rows, double i, double t, double g) {
  return SolveProjective(w.nc[0] + w.nc[1] * g + i * (w.mc[0] + w.mc[1] * g), w.nc[2] + i * w.mc[2],
                         w.den[0] + w.den[1] * g, w.den[2], t, half_rows);
}

// Cells whose segment [x - 1/2, x + 1/2] (offsets; index = offset + centre)
// can meet the preimage [pmin, pmax], with slack for float rounding of the
// weights' lines (extra cells get exact zero weights).
TESSERA_RECON_HD inline void CellRange(double pmin, double pmax, double centre, int64_t n, int64_t* lo, int64_t* hi) {
  const double top = static_cast<double>(n);
  const double a = floor(MinD(MaxD(pmin + centre - 0.5 - 1e-3, -1.0), top));
  const double b = ceil(MinD(MaxD(pmax + centre + 0.5 + 1e-3, -1.0), top));
  *lo = a < 0 ? 0 : static_cast<int64_t>(a);
  *hi = b > top - 1 ? n - 1 : static_cast<int64_t>(b);
}

// Columns whose cells (at any row centre in [r_lo, r_hi]) can overlap b in
// [j, j + 1] on slab i: the strip's preimage is bounded by two lines in
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

// Table views: one preimage pair for the columns (the b map ignores the row),
// then per column the rows, from its c lines (linear in the row offset).
template <bool k2d>
TESSERA_RECON_HD inline float BackVoxelTable(const DdView& w, const ColumnTable& t, const DdShape& s, int64_t i,
                                             int64_t j, int64_t k, const float* __restrict__ view_sino) {
  int64_t c_lo, c_hi;
  ColumnRange(w, s, static_cast<double>(i), static_cast<double>(j), 0, 0, &c_lo, &c_hi);
  const float fi = static_cast<float>(i), fj = static_cast<float>(j), fk = static_cast<float>(k);
  const double rc = 0.5 * static_cast<double>(s.rows - 1);
  float acc = 0.f;
  for (int64_t c = c_lo; c <= c_hi; ++c) {
    CellLines cl;
    TableBLines(t, c, &cl);
    const float lb = cl.lo_b + fi * cl.dlo_b, hb = cl.hi_b + fi * cl.dhi_b;
    const float ob = Overlap(lb, hb, fj);
    if (ob <= 0.f) continue;
    const float wb = ob / (hb - lb);
    if (k2d) {
      TableCLines(w, t, true, c, 0.f, &cl);
      acc += wb * cl.scale * view_sino[c];
      continue;
    }
    // c on slab i is base + r step in the row offset r.
    const float base = t.p[c] + fi * t.q[c], step = t.rr[c] + fi * t.s[c];
    int64_t r_lo = 0, r_hi = s.rows - 1;
    if (step != 0.f) {
      const float inv = 1.f / step, r0 = (fk - base) * inv, r1 = (fk + 1.f - base) * inv;
      CellRange(r0 < r1 ? r0 : r1, r0 < r1 ? r1 : r0, rc, s.rows, &r_lo, &r_hi);
    }
    for (int64_t r = r_lo; r <= r_hi; ++r) {
      TableCLines(w, t, false, c, static_cast<float>(static_cast<double>(r) - rc), &cl);
      const float lc = cl.lo_c + fi * cl.dlo_c, hc = cl.hi_c + fi * cl.dhi_c;
      const float oc = Overlap(lc, hc, fk);
      if (oc <= 0.f) continue;
      acc += wb * (oc / (hc - lc)) * cl.scale * view_sino[c + s.cols * r];
    }
  }
  return acc;
}

// Row-coupled views: columns over all rows, the rows those columns reach,
// then both again over the narrowed ranges (each pass keeps a superset).
template <bool k2d>
TESSERA_RECON_HD inline float BackVoxelCoupled(const DdView& w, const DdShape& s, int64_t i, int64_t j, int64_t k,
                                               const float* __restrict__ view_sino) {
  const double di = static_cast<double>(i), dj = static_cast<double>(j), dk = static_cast<double>(k);
  int64_t c_lo, c_hi, r_lo = 0, r_hi = s.rows - 1;
  ColumnRange(w, s, di, dj, r_lo, r_hi, &c_lo, &c_hi);
  if (c_lo > c_hi) return 0.f;
  if (!k2d) {
    RowRange(w, s, di, dk, c_lo, c_hi, &r_lo, &r_hi);
    if (r_lo > r_hi) return 0.f;
    ColumnRange(w, s, di, dj, r_lo, r_hi, &c_lo, &c_hi);
    if (c_lo > c_hi) return 0.f;
    RowRange(w, s, di, dk, c_lo, c_hi, &r_lo, &r_hi);
  }
  const double gc = 0.5 * static_cast<double>(s.cols - 1), rc = 0.5 * static_cast<double>(s.rows - 1);
  const float fi = static_cast<float>(i), fj = static_cast<float>(j), fk = static_cast<float>(k);
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

// Back projection of one view into voxel (x, y, z): sum over the cells that
// overlap it of y * L * ov_b ov_c / (w_b w_c), the weights made as the
// forward makes them. `view_sino` is the view's cols x rows block.
template <bool k2d>
TESSERA_RECON_HD inline float BackVoxelView(const DdView& w, const float* view_table, const DdShape& s, int64_t x,
                                            int64_t y, int64_t z, const float* __restrict__ view_sino) {
  const int64_t i = w.axis == 0 ? x : y, j = w.axis == 0 ? y : x;
  if (!w.row_coupled) return BackVoxelTable<k2d>(w, TableAt(view_table, s.cols), s, i, j, z, view_sino);
  return BackVoxelCoupled<k2d>(w, s, i, j, z, view_sino);
}

}  // namespace gather
}  // namespace ct
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_CT_DD_GATHER_H_
