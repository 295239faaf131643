// The forward gather of the distance-driven projector, written once for the
// CUDA kernel and its host run (cpu::GatherForward, which the CPU tests check
// against the reference): per detector cell, walk the slabs and add the
// overlapped voxels, in a fixed order (deterministic). A cell's interval ends
// are lines in the slab index (lo + i * slope, float). Views whose b map
// ignores the row (2-D, circular cone) read their lines from the plan's
// per-column float tables (ColumnTable, no division per cell); row-coupled
// views (tilted detectors) compute them per cell in double. The back
// projection is in dd_back_gather.h.
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

}  // namespace gather
}  // namespace ct
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_CT_DD_GATHER_H_
