// The back projection of the distance-driven projector (the exact transpose
// of dd_gather.h's forward) as a gather per voxel and view, written once for
// the CUDA kernels and for their host run (cpu::GatherBack).
//
// Per call the sinogram is first weighted by the forward's ray lengths L into
// per-view scratch (BackScratch; the Prepare* functions):
//   2-D:          per column c, {S_c, y_c L_c} with S_c = sum_{c' < c} y L (double);
//   3-D:          per cell, y L (float);
//   row-coupled:  also the cells' b lines per row (TB) and z lines per column
//                 (TC), the numbers the forward makes per cell in double.
//
// Views with row_coupled == 0 (2-D, circular cone). On slab i the forward's
// column boundaries t_q = a[q] + i b[q] (BackTable, the ColumnTable's floats)
// partition the detector's footprint along b. A point t has a locus: the cell
// q containing it and the fraction f of the way from t_q to t_{q+1} (Locate:
// one float division inverts the projective column map as an estimate, then
// the table's own boundaries decide). The overlap of voxel [j, j + 1] with
// cell c divided by the cell's width, the forward's weight, is the part of
// [locus(j), locus(j + 1)] inside cell c. So
//   2-D:  voxel += P(locus(j + 1)) - P(locus(j)),  P = S_q + y_q L_q f,
//         the whole sum over cells in O(1) (double, so that differences of
//         nearby prefix values keep float accuracy);
//   3-D:  voxel += sum over the columns c between the b loci of
//         wb_c sum over the rows r between the z loci (of k, k + 1 in column
//         c) of wz_r y L[c, r]. The z boundaries of a cone beam depend on the
//         column, so a 2-D prefix does not factor into rows and columns; the
//         loops visit only cells that overlap the voxel (about 1 + 1/width
//         per axis).
// Row-coupled views (tilted detectors): the candidate cells around the
// voxel's preimage quadrilateral on the detector (CoupledBox: 2 x 2 solves in
// float, shared along a z run, and a margin that provably covers the
// distance-driven cells), their lines read from TB/TC (no root per cell).
// Each view's contribution is a float sum (2-D: a double difference) that the
// caller adds in view order in double: deterministic.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_CT_DD_BACK_GATHER_H_
#define TESSERA_KERNELS_RECONSTRUCTION_CT_DD_BACK_GATHER_H_

#include <cmath>
#include <cstdint>

#include "kernels/reconstruction/ct/dd_gather.h"
#include "kernels/reconstruction/ct/dd_view.h"

#if defined(__CUDA_ARCH__)
#define TESSERA_DD_UNROLL _Pragma("unroll")
#else
#define TESSERA_DD_UNROLL
#endif

namespace tessera {
namespace recon {
namespace ct {
namespace gather {

// Voxels along z per thread in 3-D (they share the b loci and z boundaries;
// the result does not depend on the run length). The host uses kRunZ, the
// GPU DdProjectorOptions::back_z_run.
constexpr int kRunZ = 4;

// Per-view scratch of one call, in bytes (multiples of 16).
struct BackScratch {
  int64_t view_bytes = 0;
  int64_t tb_offset = 0, tc_offset = 0;  // 3-D systems with row-coupled views
};

TESSERA_RECON_HD inline int64_t RoundUp16(int64_t bytes) { return (bytes + 15) / 16 * 16; }

TESSERA_RECON_HD inline BackScratch BackScratchLayout(const DdShape& s, bool any_row_coupled) {
  BackScratch l;
  if (s.is_2d) {
    l.view_bytes = static_cast<int64_t>(sizeof(Double2)) * s.cols;
    return l;
  }
  l.view_bytes = RoundUp16(4 * s.cols * s.rows);
  if (any_row_coupled) {
    l.tb_offset = l.view_bytes;
    l.view_bytes += RoundUp16(static_cast<int64_t>(sizeof(Float2)) * s.rows * (s.cols + 1));
    l.tc_offset = l.view_bytes;
    l.view_bytes += RoundUp16(static_cast<int64_t>(sizeof(Float2)) * s.cols * (s.rows + 1));
  }
  return l;
}

// Views per chunk for a scratch budget (at least one, at most `views`).
inline int64_t BackChunkViews(const BackScratch& l, int64_t budget_bytes, int64_t views) {
  const int64_t n = budget_bytes / l.view_bytes;
  return n < 1 ? 1 : (n > views ? (views < 1 ? 1 : views) : n);
}

// ---- Preparation (per call) ----

// 2-D: the view's {S_c, y_c L_c}, L the forward's float ray length
// (TableCLines). The columns are summed in kPrefixLanes contiguous segments
// (one GPU lane each: coalescing aside, a sequential sum over all columns
// would take a warp's latency per column), then the segment totals in order;
// the host runs the same steps, so both give the same bits.
constexpr int kPrefixLanes = 32;

TESSERA_RECON_HD inline void PrefixSegment(int64_t cols, int lane, int64_t* c0, int64_t* c1) {
  const int64_t seg = (cols + kPrefixLanes - 1) / kPrefixLanes;
  *c0 = lane * seg < cols ? lane * seg : cols;
  *c1 = *c0 + seg < cols ? *c0 + seg : cols;
}

// Pass 1 of lane `lane`: out[c].y = y_c L_c over its segment; returns their sum.
TESSERA_RECON_HD inline double PrefixPass1(const DdView& w, const float* column_table, int64_t cols, const float* y,
                                           int lane, Double2* out) {
  const ColumnTable t = TableAt(column_table, cols);
  int64_t c0, c1;
  PrefixSegment(cols, lane, &c0, &c1);
  double sum = 0;
  for (int64_t c = c0; c < c1; ++c) {
    CellLines cl;
    TableCLines(w, t, true, c, 0.f, &cl);
    const double v = static_cast<double>(y[c]) * static_cast<double>(cl.scale);
    out[c].y = v;
    sum += v;
  }
  return sum;
}

// Pass 2: out[c].x = the prefix, from the lane's offset (the totals of the
// lanes before it, added in lane order).
TESSERA_RECON_HD inline void PrefixPass2(int64_t cols, int lane, double offset, Double2* out) {
  int64_t c0, c1;
  PrefixSegment(cols, lane, &c0, &c1);
  for (int64_t c = c0; c < c1; ++c) {
    out[c].x = offset;
    offset += out[c].y;
  }
}

// Both passes for one view on the host.
inline void PrepareColumnPrefix(const DdView& w, const float* column_table, int64_t cols, const float* y,
                                Double2* out) {
  double totals[kPrefixLanes];
  for (int lane = 0; lane < kPrefixLanes; ++lane) totals[lane] = PrefixPass1(w, column_table, cols, y, lane, out);
  double offset = 0;
  for (int lane = 0; lane < kPrefixLanes; ++lane) {
    PrefixPass2(cols, lane, offset, out);
    offset += totals[lane];
  }
}

// 3-D: y L of cell (c, r), L as the forward computes it for the view.
TESSERA_RECON_HD inline float CellWeight(const DdView& w, const float* column_table, const DdShape& s, int64_t c,
                                         int64_t r, float y) {
  const double rr = static_cast<double>(r) - 0.5 * static_cast<double>(s.rows - 1);
  if (w.row_coupled) {
    const double g = static_cast<double>(c) - 0.5 * static_cast<double>(s.cols - 1);
    return y * static_cast<float>(RayLengthPerSlab(w, g, rr));
  }
  CellLines cl;
  TableCLines(w, TableAt(column_table, s.cols), false, c, static_cast<float>(rr), &cl);
  return y * cl.scale;
}

// Row-coupled views: b line of column boundary q at row r's centre, and z line
// of row boundary rb at column c's centre (value on slab 0, slope per slab),
// rounded from double as MakeCellEnds rounds them (the same arguments: q -
// cols/2 is the g -/+ 1/2 of the cells on either side, exactly).
TESSERA_RECON_HD inline Float2 CoupledBLine(const DdView& w, const DdShape& s, int64_t r, int64_t q) {
  const double g = static_cast<double>(q) - 0.5 * static_cast<double>(s.cols);
  const double rr = static_cast<double>(r) - 0.5 * static_cast<double>(s.rows - 1);
  const double d = Affine(w.den, g, rr);
  Float2 f;
  f.x = static_cast<float>(Affine(w.nb, g, rr) / d);
  f.y = static_cast<float>(Affine(w.mb, g, rr) / d);
  return f;
}

TESSERA_RECON_HD inline Float2 CoupledCLine(const DdView& w, const DdShape& s, int64_t c, int64_t rb) {
  const double g = static_cast<double>(c) - 0.5 * static_cast<double>(s.cols - 1);
  const double ro = static_cast<double>(rb) - 0.5 * static_cast<double>(s.rows);
  const double e = Affine(w.den, g, ro);
  Float2 f;
  f.x = static_cast<float>(Affine(w.nc, g, ro) / e);
  f.y = static_cast<float>(Affine(w.mc, g, ro) / e);
  return f;
}

TESSERA_RECON_HD inline int64_t CoupledBCount(const DdShape& s) { return s.rows * (s.cols + 1); }
TESSERA_RECON_HD inline int64_t CoupledCCount(const DdShape& s) { return s.cols * (s.rows + 1); }

// Entry m of a view's TB then TC (m < CoupledBCount + CoupledCCount).
TESSERA_RECON_HD inline void PrepareCoupledLine(const DdView& w, const DdShape& s, int64_t m, Float2* tb,
                                                Float2* tc) {
  const int64_t nb = CoupledBCount(s);
  if (m < nb) {
    tb[m] = CoupledBLine(w, s, m / (s.cols + 1), m % (s.cols + 1));
  } else {
    m -= nb;
    tc[m] = CoupledCLine(w, s, m / (s.rows + 1), m % (s.rows + 1));
  }
}

// ---- Loci ----

// The estimate needs no exactness (the boundaries decide), so a fast division.
TESSERA_RECON_HD inline float FastDiv(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdividef(a, b);
#else
  return a / b;
#endif
}

struct Locus {
  int q;
  float f;
};

// Cell q's b boundaries on slab fi (table views): the forward's expressions.
struct BCells {
  const Float4* cells;
  float fi;
  TESSERA_RECON_HD void operator()(int q, float* lo, float* hi) const {
    const Float4 c = cells[q];
    *lo = c.x + fi * c.y;
    *hi = c.z + fi * c.w;
  }
};

// Row q's z boundaries in one column on slab fi (table views), as TableCLines
// and ForwardCell make them (row offsets q - rows/2 and one more).
struct ZCells {
  Float4 l;  // {p, q, rr, s}
  float fi, half_rows;
  TESSERA_RECON_HD void operator()(int q, float* lo, float* hi) const {
    const float r0 = static_cast<float>(q) - half_rows, r1 = r0 + 1.f;
    *lo = (l.x + r0 * l.z) + fi * (l.y + r0 * l.w);
    *hi = (l.x + r1 * l.z) + fi * (l.y + r1 * l.w);
  }
};

// The locus of t among n cells whose boundaries increase (inc) or decrease
// with q, from a guess of the cell index; t beyond the ends clamps to {0, 0}
// or {n - 1, 1}. A guess off by k cells costs k extra steps.
template <class Cells>
TESSERA_RECON_HD inline Locus LocateIn(const Cells& cells, float t, bool inc, int n, float guess) {
  int q = guess >= 0.f ? (guess < static_cast<float>(n) ? static_cast<int>(guess) : n - 1) : 0;  // NaN -> 0
  float lo, hi;
  cells(q, &lo, &hi);
  while (q > 0 && (inc ? t < lo : t > lo)) {
    --q;
    cells(q, &lo, &hi);
  }
  while (q < n - 1 && (inc ? t > hi : t < hi)) {
    ++q;
    cells(q, &lo, &hi);
  }
  const float f = FastDiv(t - lo, hi - lo);
  Locus l;
  l.q = q;
  l.f = f > 0.f ? (f < 1.f ? f : 1.f) : 0.f;
  return l;
}

// A table view's b map on one slab.
struct BSlab {
  BCells cells;
  float t0, tn;        // b of boundaries 0 and cols
  bool inc;            // b grows with the column
  float n0, n1, d0, d1, half;
  int n;
};

TESSERA_RECON_HD inline BSlab MakeBSlab(const BackTable& t, int cols, float fi) {
  const Float4 h0 = t.head[0], h1 = t.head[1], ends = t.head[2];
  BSlab v;
  v.cells.cells = t.cells;
  v.cells.fi = fi;
  v.t0 = ends.x + fi * ends.y;  // the expressions of BCells
  v.tn = ends.z + fi * ends.w;
  v.inc = v.tn > v.t0;
  v.n0 = h0.x + fi * h0.y;
  v.n1 = h0.z + fi * h0.w;
  v.d0 = h1.x;
  v.d1 = h1.y;
  v.half = 0.5f * static_cast<float>(cols);
  v.n = cols;
  return v;
}

// Inside the footprint the projective map is monotone and its inverse
// (the guess) well defined; outside it the locus is an end.
TESSERA_RECON_HD inline Locus LocateB(const BSlab& v, float t) {
  Locus l;
  if (v.inc ? t <= v.t0 : t >= v.t0) {
    l.q = 0, l.f = 0.f;
    return l;
  }
  if (v.inc ? t >= v.tn : t <= v.tn) {
    l.q = v.n - 1, l.f = 1.f;
    return l;
  }
  const float g = FastDiv(t * v.d0 - v.n0, v.n1 - t * v.d1);
  return LocateIn(v.cells, t, v.inc, v.n, g + v.half);
}

// Weight of cell q between loci lo <= hi: the part of [lo, hi] inside it.
TESSERA_RECON_HD inline float Between(const Locus& lo, const Locus& hi, int q) {
  return (q == hi.q ? hi.f : 1.f) - (q == lo.q ? lo.f : 0.f);
}

TESSERA_RECON_HD inline void Order(bool inc, Locus* a, Locus* b) {
  if (!inc) {
    const Locus t = *a;
    *a = *b;
    *b = t;
  }
}

// ---- One view's contribution to one voxel ----

// 2-D: P(locus(j + 1)) - P(locus(j)), signed by the column direction.
TESSERA_RECON_HD inline double BackPixel2D(const BackTable& t, int cols, const Double2* __restrict__ prefix, float fi,
                                           float fj) {
  const BSlab v = MakeBSlab(t, cols, fi);
  const Locus l0 = LocateB(v, fj), l1 = LocateB(v, fj + 1.f);
  const Double2 s0 = prefix[l0.q], s1 = prefix[l1.q];
  const double p0 = s0.x + s0.y * static_cast<double>(l0.f);
  const double p1 = s1.x + s1.y * static_cast<double>(l1.f);
  return v.inc ? p1 - p0 : p0 - p1;
}

// 3-D table views: voxels (i, j, k0 + m), m < nk <= K, which share their b
// loci (the b map ignores z) and, per column, their z boundaries (K + 1
// loci for K voxels). out[m] += each voxel's sum.
template <int K>
TESSERA_RECON_HD inline void BackRun3D(const BackTable& t, const DdShape& s, const float* __restrict__ yl, float fi,
                                       float fj, float fk0, int nk, float* out) {
  const int cols = static_cast<int>(s.cols), rows = static_cast<int>(s.rows);
  const BSlab v = MakeBSlab(t, cols, fi);
  Locus b0 = LocateB(v, fj), b1 = LocateB(v, fj + 1.f);
  Order(v.inc, &b0, &b1);
  const float half_rows = 0.5f * static_cast<float>(rows);
  for (int c = b0.q; c <= b1.q; ++c) {
    const float wb = Between(b0, b1, c);
    if (!(wb > 0.f)) continue;
    ZCells z;
    z.l = t.rows[c];
    z.fi = fi;
    z.half_rows = half_rows;
    // z is affine in the row offset on this slab (base + ro step): the guess.
    const float base = z.l.x + fi * z.l.y, step = z.l.z + fi * z.l.w;
    const float inv = FastDiv(1.f, step);
    const bool inc = step > 0.f;
    const float* column = yl + c;
    Locus prev = LocateIn(z, fk0, inc, rows, (fk0 - base) * inv + half_rows);
    TESSERA_DD_UNROLL
    for (int m = 0; m < K; ++m) {
      if (m >= nk) break;
      const float top = fk0 + static_cast<float>(m + 1);
      const Locus next = LocateIn(z, top, inc, rows, (top - base) * inv + half_rows);
      Locus r0 = prev, r1 = next;
      Order(inc, &r0, &r1);
      float h = 0.f;
      for (int r = r0.q; r <= r1.q; ++r) h += Between(r0, r1, r) * column[static_cast<int64_t>(cols) * r];
      out[m] += wb * h;
      prev = next;
    }
  }
}

// Row-coupled views. On slab i the ray of detector offsets (g, r) meets
//   b = (A0 + A1 g + A2 r) / D,  z = (C0 + C1 g + C2 r) / D,  D = D0 + D1 g + D2 r,
// A = nb + i mb, C = nc + i mc (floats in the view's back table storage,
// dd_system.cc). So b = t and z = t are straight
// lines in (g, r), and the voxel's preimage P (b in [j, j + 1], z in
// [k, k + 1]) is the quadrilateral between them.
struct CoupledSlab {
  float a[3], c[3], d[3];
};

TESSERA_RECON_HD inline CoupledSlab MakeCoupledSlab(const float* back_table, float fi) {
  const Float4* h = reinterpret_cast<const Float4*>(back_table);
  const Float4 nb = h[0], mb = h[1], nc = h[2], mc = h[3], den = h[4];
  CoupledSlab s;
  s.a[0] = nb.x + fi * mb.x, s.a[1] = nb.y + fi * mb.y, s.a[2] = nb.z + fi * mb.z;
  s.c[0] = nc.x + fi * mc.x, s.c[1] = nc.y + fi * mc.y, s.c[2] = nc.z + fi * mc.z;
  s.d[0] = den.x, s.d[1] = den.y, s.d[2] = den.z;
  return s;
}

// The detector offsets of the ray through (b, z) on the slab (a 2 x 2 solve;
// fast division: the box has a margin).
TESSERA_RECON_HD inline void CoupledPreimage(const CoupledSlab& s, float b, float z, float* g, float* r) {
  const float a11 = s.a[1] - b * s.d[1], a12 = s.a[2] - b * s.d[2], r1 = b * s.d[0] - s.a[0];
  const float a21 = s.c[1] - z * s.d[1], a22 = s.c[2] - z * s.d[2], r2 = z * s.d[0] - s.c[0];
  const float inv = FastDiv(1.f, a11 * a22 - a12 * a21);
  *g = (r1 * a22 - a12 * r2) * inv;
  *r = (a11 * r2 - r1 * a21) * inv;
}

TESSERA_RECON_HD inline float MinF(float a, float b) { return a < b ? a : b; }
TESSERA_RECON_HD inline float MaxF(float a, float b) { return a > b ? a : b; }
TESSERA_RECON_HD inline bool Finite(float v) { return v - v == 0.f; }  // false for inf and NaN

// Index range [lo, hi] of cells (centres at offset + centre) within `margin`
// of the offsets [pmin, pmax]; empty (lo > hi) when they miss the detector.
TESSERA_RECON_HD inline void MarginRange(float pmin, float pmax, float margin, float centre, int n, int* lo, int* hi) {
  const float a = pmin - margin + centre, b = pmax + margin + centre;
  if (!(a <= b) || a > static_cast<float>(n - 1) || b < 0.f) {  // NaN: no information, take all
    *lo = 0, *hi = (a <= b) ? -1 : n - 1;
    return;
  }
  *lo = a < 0.f ? 0 : static_cast<int>(ceilf(a));
  *hi = b > static_cast<float>(n - 1) ? n - 1 : static_cast<int>(floorf(b));
}

// A z boundary t of a run: the preimages of (j, t) and (j + 1, t) and the
// slope |dr/dg| of the z = t line.
struct CoupledEdge {
  float g0, r0, g1, r1, slope;
  bool finite;
};

TESSERA_RECON_HD inline CoupledEdge MakeCoupledEdge(const CoupledSlab& s, float fj, float tz) {
  CoupledEdge e;
  CoupledPreimage(s, fj, tz, &e.g0, &e.r0);
  CoupledPreimage(s, fj + 1.f, tz, &e.g1, &e.r1);
  e.slope = fabsf(FastDiv(s.c[1] - tz * s.d[1], s.c[2] - tz * s.d[2]));
  e.finite = Finite(e.g0) && Finite(e.r0) && Finite(e.g1) && Finite(e.r1);
  return e;
}

// The larger |dg/dr| of the b = j and b = j + 1 lines.
TESSERA_RECON_HD inline float CoupledSlopeB(const CoupledSlab& s, float fj) {
  const float s0 = fabsf(FastDiv(s.a[2] - fj * s.d[2], s.a[1] - fj * s.d[1]));
  const float s1 = fabsf(FastDiv(s.a[2] - (fj + 1.f) * s.d[2], s.a[1] - (fj + 1.f) * s.d[1]));
  return MaxF(s0, s1);
}

// Candidate cells of the voxel between z boundaries lo and hi: cell (c, r)
// weighs in when its b interval (row r's centre segment) meets [j, j + 1]
// and its z interval (column c's centre segment) meets [k, k + 1]. With sb,
// sc the largest |dg/dr| of the b lines and |dr/dg| of the z lines,
// following the strips from those two points shows such a cell lies within
// (1/2 + s/2) / (1 - sb sc) of the preimage's extent along each axis (+0.01
// for float rounding); beyond sb sc >= 0.95, the whole detector.
TESSERA_RECON_HD inline void CoupledBox(const CoupledEdge& lo, const CoupledEdge& hi, float sb, const DdShape& shape,
                                        int* c_lo, int* c_hi, int* r_lo, int* r_hi) {
  const int cols = static_cast<int>(shape.cols), rows = static_cast<int>(shape.rows);
  const float sc = MaxF(lo.slope, hi.slope), shrink = 1.f - sb * sc;
  if (!(shrink > 0.05f) || !lo.finite || !hi.finite) {  // steep or degenerate: everything
    *c_lo = 0, *c_hi = cols - 1, *r_lo = 0, *r_hi = rows - 1;
    return;
  }
  const float gmin = MinF(MinF(lo.g0, lo.g1), MinF(hi.g0, hi.g1)), gmax = MaxF(MaxF(lo.g0, lo.g1), MaxF(hi.g0, hi.g1));
  const float rmin = MinF(MinF(lo.r0, lo.r1), MinF(hi.r0, hi.r1)), rmax = MaxF(MaxF(lo.r0, lo.r1), MaxF(hi.r0, hi.r1));
  MarginRange(gmin, gmax, (0.5f + 0.5f * sb) / shrink + 0.01f, 0.5f * static_cast<float>(cols - 1), cols, c_lo, c_hi);
  MarginRange(rmin, rmax, (0.5f + 0.5f * sc) / shrink + 0.01f, 0.5f * static_cast<float>(rows - 1), rows, r_lo, r_hi);
}

// The candidates of one voxel weighed with the forward's lines (TB, TC) and y L.
TESSERA_RECON_HD inline float CoupledCells(int c_lo, int c_hi, int r_lo, int r_hi, const DdShape& s, float fi,
                                           float fj, float fk, const float* __restrict__ yl,
                                           const Float2* __restrict__ tb, const Float2* __restrict__ tc) {
  const int64_t cols1 = s.cols + 1, rows1 = s.rows + 1;
  float acc = 0.f;
  for (int64_t r = r_lo; r <= r_hi; ++r) {
    for (int64_t c = c_lo; c <= c_hi; ++c) {
      const Float2 e0 = tb[r * cols1 + c], e1 = tb[r * cols1 + c + 1];
      const float u0 = e0.x + fi * e0.y, u1 = e1.x + fi * e1.y;
      const float lb = u0 < u1 ? u0 : u1, hb = u0 < u1 ? u1 : u0;
      const float ob = Overlap(lb, hb, fj);
      if (ob <= 0.f) continue;
      const Float2 z0 = tc[c * rows1 + r], z1 = tc[c * rows1 + r + 1];
      const float v0 = z0.x + fi * z0.y, v1 = z1.x + fi * z1.y;
      const float lc = v0 < v1 ? v0 : v1, hc = v0 < v1 ? v1 : v0;
      const float oc = Overlap(lc, hc, fk);
      if (oc <= 0.f) continue;
      acc += FastDiv(ob * oc, (hb - lb) * (hc - lc)) * yl[c + s.cols * r];
    }
  }
  return acc;
}

// Row-coupled views: voxels (i, j, k0 + m), m < nk <= K, sharing the b
// slopes and each z boundary's preimages. acc[m] += each voxel's float sum.
template <int K>
TESSERA_RECON_HD inline void BackRunCoupled(const CoupledSlab& slab, const DdShape& s, float fi, float fj, float fk0,
                                            int nk, const float* __restrict__ yl, const Float2* __restrict__ tb,
                                            const Float2* __restrict__ tc, double* acc) {
  const float sb = CoupledSlopeB(slab, fj);
  CoupledEdge lo = MakeCoupledEdge(slab, fj, fk0);
  TESSERA_DD_UNROLL
  for (int m = 0; m < K; ++m) {
    if (m >= nk) break;
    const float fk = fk0 + static_cast<float>(m);
    const CoupledEdge hi = MakeCoupledEdge(slab, fj, fk + 1.f);
    int c_lo, c_hi, r_lo, r_hi;
    CoupledBox(lo, hi, sb, s, &c_lo, &c_hi, &r_lo, &r_hi);
    acc[m] += CoupledCells(c_lo, c_hi, r_lo, r_hi, s, fi, fj, fk, yl, tb, tc);
    lo = hi;
  }
}

// 2-D: view `w`'s contribution to pixel (x, y); `view_scratch` is the view's
// part of the call's scratch, `back_table` its BackTable storage.
TESSERA_RECON_HD inline double BackPixelView(const DdView& w, const float* back_table, const DdShape& s,
                                             const unsigned char* view_scratch, int64_t x, int64_t y) {
  const int64_t i = w.axis == 0 ? x : y, j = w.axis == 0 ? y : x;
  return BackPixel2D(BackTableAt(back_table, s.cols, true), static_cast<int>(s.cols),
                     reinterpret_cast<const Double2*>(view_scratch), static_cast<float>(i), static_cast<float>(j));
}

// 3-D: view `w`'s contributions to voxels (x, y, z0 + m), m < nk <= K, added
// to acc[m] (each view's float sum added in double).
// kMayCouple = false compiles only the table path (the caller knows no view
// is row-coupled), which needs fewer registers on the GPU.
template <int K, bool kMayCouple = true>
TESSERA_RECON_HD inline void BackRunView(const DdView& w, const float* back_table, const DdShape& s,
                                         const BackScratch& layout, const unsigned char* view_scratch, int64_t x,
                                         int64_t y, int64_t z0, int nk, double* acc) {
  const int64_t i = w.axis == 0 ? x : y, j = w.axis == 0 ? y : x;
  const float* yl = reinterpret_cast<const float*>(view_scratch);
  if (!kMayCouple || !w.row_coupled) {
    float out[K];
    TESSERA_DD_UNROLL
    for (int m = 0; m < K; ++m) out[m] = 0.f;
    BackRun3D<K>(BackTableAt(back_table, s.cols, false), s, yl, static_cast<float>(i), static_cast<float>(j),
                 static_cast<float>(z0), nk, out);
    TESSERA_DD_UNROLL
    for (int m = 0; m < K; ++m) acc[m] += out[m];
    return;
  }
  const Float2* tb = reinterpret_cast<const Float2*>(view_scratch + layout.tb_offset);
  const Float2* tc = reinterpret_cast<const Float2*>(view_scratch + layout.tc_offset);
  const float fi = static_cast<float>(i);
  BackRunCoupled<K>(MakeCoupledSlab(back_table, fi), s, fi, static_cast<float>(j), static_cast<float>(z0), nk, yl, tb,
                    tc, acc);
}

}  // namespace gather
}  // namespace ct
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_CT_DD_BACK_GATHER_H_
