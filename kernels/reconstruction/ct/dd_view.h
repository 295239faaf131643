// Per-view constants of the distance-driven (DD) CT projector, shared by the
// CPU reference, the CUDA kernels and the host run of those kernels' code.
//
// Each view slices the volume into slabs perpendicular to the dominant axis a
// of its central ray (x or y); b is the other in-plane axis and c is z. Slab i
// is the plane a = min_a + (i + 1/2) da through the voxel centres. Detector
// points are named by offsets from the detector centre in cells:
//   g = col - (cols - 1) / 2,  r = row - (rows - 1) / 2,
// and the ray through detector point (g, r) crosses slab i at
//   b index = (nb(g, r) + i mb(g, r)) / den(g, r),   c index likewise with nc, mc,
// where nb, mb, nc, mc, den are affine in (g, r) and the indices are in voxel
// units from the volume's min edge (voxel j spans [j, j + 1]). This one
// projective form covers parallel beams (den = 1) and fan/cone beams (den is
// the ray's a component), so the kernels never branch on the beam kind.
// Plain doubles and ints: the struct is copied to the device as is.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_CT_DD_VIEW_H_
#define TESSERA_KERNELS_RECONSTRUCTION_CT_DD_VIEW_H_

#include <cmath>
#include <cstdint>

#include "kernels/reconstruction/geometry.h"  // TESSERA_RECON_HD

namespace tessera {
namespace recon {
namespace ct {

struct DdView {
  int axis = 0;             // 0: slabs x = const (b = y); 1: slabs y = const (b = x)
  int row_coupled = 0;      // 1 when the b map depends on r (detector v has an a or b component)
  double nb[3] = {0, 0, 0};  // affine coefficients: [constant, g, r]
  double mb[3] = {0, 0, 0};
  double nc[3] = {0, 0, 0};
  double mc[3] = {0, 0, 0};
  double den[3] = {1, 0, 0};
  // World ray direction of (g, r) in (a, b, c) components: e0 + g eu + r ev.
  double e0[3] = {0, 0, 0};
  double eu[3] = {0, 0, 0};
  double ev[3] = {0, 0, 0};
  double slab = 1;  // slab spacing da (mm)
};

// Sizes the kernels need (volume and detector).
struct DdShape {
  int64_t nx = 0, ny = 0, nz = 1;
  int64_t cols = 0, rows = 1;
  bool is_2d = true;
};

TESSERA_RECON_HD inline int64_t SlabCount(const DdShape& s, int axis) { return axis == 0 ? s.nx : s.ny; }
TESSERA_RECON_HD inline int64_t InPlaneCount(const DdShape& s, int axis) { return axis == 0 ? s.ny : s.nx; }

TESSERA_RECON_HD inline double Affine(const double* k, double g, double r) { return k[0] + k[1] * g + k[2] * r; }

// b and c voxel-index coordinates where the ray of detector point (g, r)
// crosses slab i.
TESSERA_RECON_HD inline double MapB(const DdView& w, double g, double r, double i) {
  return (Affine(w.nb, g, r) + i * Affine(w.mb, g, r)) / Affine(w.den, g, r);
}
TESSERA_RECON_HD inline double MapC(const DdView& w, double g, double r, double i) {
  return (Affine(w.nc, g, r) + i * Affine(w.mc, g, r)) / Affine(w.den, g, r);
}

// Ray length per slab of the ray through (g, r): da |e| / |e_a| (mm).
TESSERA_RECON_HD inline double RayLengthPerSlab(const DdView& w, double g, double r) {
  const double ea = w.e0[0] + g * w.eu[0] + r * w.ev[0];
  const double eb = w.e0[1] + g * w.eu[1] + r * w.ev[1];
  const double ec = w.e0[2] + g * w.eu[2] + r * w.ev[2];
  return w.slab * sqrt(ea * ea + eb * eb + ec * ec) / fabs(ea);
}

// Per-column float tables of a view whose b map does not depend on the row
// (row_coupled == 0: every 2-D view and circular cone scans), built once per
// plan in double and rounded once, so the forward and back kernels read the
// same numbers. Column boundary q sits at g = q - cols/2, column c at
// g = c - (cols - 1)/2, and with r the row offset:
//   b of boundary q on slab i    = a[q] + i b[q]
//   c of row offset r on slab i  = p[c] + r rr[c] + i (q[c] + r s[c])     (3-D)
//   ray length per slab of (c, r) = len[c] |(wa[c], wb[c], wc[c] + r ev_c)|
struct ColumnTable {
  const float *a, *b, *p, *q, *rr, *s, *wa, *wb, *wc, *len;
};

// Floats per view in the tables (padded to 16 bytes).
TESSERA_RECON_HD inline int64_t TableStride(int64_t cols) { return (10 * cols + 2 + 3) / 4 * 4; }

TESSERA_RECON_HD inline ColumnTable TableAt(const float* view_table, int64_t cols) {
  ColumnTable t;
  t.a = view_table;
  t.b = t.a + cols + 1;
  t.p = t.b + cols + 1;
  t.q = t.p + cols;
  t.rr = t.q + cols;
  t.s = t.rr + cols;
  t.wa = t.s + cols;
  t.wb = t.wa + cols;
  t.wc = t.wb + cols;
  t.len = t.wc + cols;
  return t;
}

// Plain aligned vectors shared by host and device (16-byte loads on the GPU).
struct alignas(16) Float4 {
  float x, y, z, w;
};
struct alignas(8) Float2 {
  float x, y;
};
struct alignas(16) Double2 {
  double x, y;
};

// Per-view float data of the back projection of views with row_coupled == 0
// (dd_back_gather.h), the ColumnTable's numbers regrouped so that one 16-byte
// load gives what a step needs:
//   head[0], head[1] = {nb0, mb0, nb1, mb1}, {den0, den1, 0, 0}: on slab i
//           the column boundary offset g where b = t is
//           (t den0 - n0) / (n1 - t den1), n0 = nb0 + i mb0, n1 = nb1 + i mb1
//           (in float: an estimate);
//   head[2] = {a[0], b[0], a[cols], b[cols]}: the detector's two ends;
//   cells[c] = {a[c], b[c], a[c + 1], b[c + 1]}: b of column boundaries c and
//           c + 1 on slab i is a + i b, as ColumnTable;
//   rows[c]  = {p[c], q[c], rr[c], s[c]} (3-D only): z of row boundary
//           offset ro on slab i is (p + ro rr) + i (q + ro s), as TableCLines.
struct BackTable {
  const Float4* head;
  const Float4* cells;
  const Float4* rows;
};

// Floats per view (a multiple of 4, so every view starts 16-byte aligned).
TESSERA_RECON_HD inline int64_t BackTableStride(int64_t cols, bool is_2d) { return 12 + 4 * cols * (is_2d ? 1 : 2); }

TESSERA_RECON_HD inline BackTable BackTableAt(const float* view_table, int64_t cols, bool is_2d) {
  BackTable t;
  t.head = reinterpret_cast<const Float4*>(view_table);
  t.cells = t.head + 3;
  t.rows = is_2d ? nullptr : t.cells + cols;
  return t;
}

// Overlap length of [lo, hi] with voxel [j, j + 1] (0 when disjoint).
template <typename T>
TESSERA_RECON_HD inline T Overlap(T lo, T hi, T j) {
  const T o = (hi < j + 1 ? hi : j + 1) - (lo > j ? lo : j);
  return o > 0 ? o : T(0);
}

}  // namespace ct
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_CT_DD_VIEW_H_
