// CPU reference of the distance-driven projector, in double: the branchless
// forward (summed-area tables, bilinear interpolation, four-corner
// difference), its transpose, and the plain overlap formula the tests hold
// the branchless form to. Threads split cells (forward) or slabs (back), so
// every sum has a fixed order.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "common/parallel.h"
#include "kernels/reconstruction/ct/dd_projector.h"

namespace tessera {
namespace recon {
namespace ct {
namespace cpu {
namespace {

struct AxisDims {
  int64_t na, nb, nc;
};

AxisDims Dims(const DdShape& s, int axis) { return {SlabCount(s, axis), InPlaneCount(s, axis), s.nz}; }

int64_t VoxelIndex(const DdShape& s, int axis, int64_t i, int64_t j, int64_t k) {
  const int64_t x = axis == 0 ? i : j, y = axis == 0 ? j : i;
  return x + s.nx * (y + s.ny * k);
}

// A cell's interval ends on slab i, in double: lo_b + i dlo_b, ...; 2-D cells
// cover c in [0, 1] (the single slice) exactly.
struct CellMap {
  double lo_b, dlo_b, hi_b, dhi_b, lo_c, dlo_c, hi_c, dhi_c, scale;
};

void Ends(const DdView& w, const double* n, const double* m, double g0, double r0, double g1, double r1, double* lo,
          double* dlo, double* hi, double* dhi) {
  const double d0 = Affine(w.den, g0, r0), d1 = Affine(w.den, g1, r1);
  double a0 = Affine(n, g0, r0) / d0, s0 = Affine(m, g0, r0) / d0;
  double a1 = Affine(n, g1, r1) / d1, s1 = Affine(m, g1, r1) / d1;
  if (a0 > a1 || (a0 == a1 && s0 > s1)) {
    std::swap(a0, a1);
    std::swap(s0, s1);
  }
  *lo = a0, *dlo = s0, *hi = a1, *dhi = s1;
}

CellMap MakeCellMap(const DdView& w, bool is_2d, double g, double r) {
  CellMap cm;
  Ends(w, w.nb, w.mb, g - 0.5, r, g + 0.5, r, &cm.lo_b, &cm.dlo_b, &cm.hi_b, &cm.dhi_b);
  if (is_2d) {
    cm.lo_c = 0, cm.dlo_c = 0, cm.hi_c = 1, cm.dhi_c = 0;
  } else {
    Ends(w, w.nc, w.mc, g, r - 0.5, g, r + 0.5, &cm.lo_c, &cm.dlo_c, &cm.hi_c, &cm.dhi_c);
  }
  cm.scale = RayLengthPerSlab(w, g, r);
  return cm;
}

CellMap CellOf(const DdSystem& sys, const DdView& w, int64_t cell) {
  const DdShape& s = sys.shape;
  const double g = static_cast<double>(cell % s.cols) - 0.5 * static_cast<double>(s.cols - 1);
  const double r = static_cast<double>(cell / s.cols) - 0.5 * static_cast<double>(s.rows - 1);
  return MakeCellMap(w, s.is_2d, g, r);
}

// The interval ends of a cell on slab i; false when they miss the volume
// (the contribution is then exactly zero, so skipping changes nothing).
struct SlabBox {
  double lb, hb, lc, hc;
};
bool OnSlab(const CellMap& cm, const AxisDims& d, double i, SlabBox* box) {
  box->lb = cm.lo_b + i * cm.dlo_b, box->hb = cm.hi_b + i * cm.dhi_b;
  box->lc = cm.lo_c + i * cm.dlo_c, box->hc = cm.hi_c + i * cm.dhi_c;
  return box->hb > 0 && box->lb < static_cast<double>(d.nb) && box->hc > 0 && box->lc < static_cast<double>(d.nc);
}

// Summed-area tables of every slab along `axis`: table i holds
// S[l][m] = sum_{j < m, k < l} x[i, j, k] at (i (nc + 1) + l) (nb + 1) + m.
int64_t PlaneSize(const AxisDims& d) { return (d.nb + 1) * (d.nc + 1); }

std::vector<double> SlabTables(const DdShape& s, int axis, const float* volume) {
  const AxisDims d = Dims(s, axis);
  std::vector<double> t(d.na * PlaneSize(d), 0.0);
  ParallelFor(d.na, [&](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < i1; ++i) {
      double* plane = t.data() + i * PlaneSize(d);
      for (int64_t k = 0; k < d.nc; ++k) {
        const double* below = plane + k * (d.nb + 1);
        double* row = plane + (k + 1) * (d.nb + 1);
        double run = 0;
        for (int64_t j = 0; j < d.nb; ++j) {
          run += volume[VoxelIndex(s, axis, i, j, k)];
          row[j + 1] = below[j + 1] + run;
        }
      }
    }
  });
  return t;
}

// Bilinear interpolation of a table at (tb, tc), clamped to the slab: the
// integral of the slab over [0, tb] x [0, tc], exactly.
struct Corner {
  int64_t offset;
  double w00, w01, w10, w11;  // weights of S[l][m], S[l][m+1], S[l+1][m], S[l+1][m+1]
};
Corner Locate(const AxisDims& d, double tb, double tc) {
  tb = std::min(std::max(tb, 0.0), static_cast<double>(d.nb));
  tc = std::min(std::max(tc, 0.0), static_cast<double>(d.nc));
  const int64_t m = std::min(static_cast<int64_t>(tb), d.nb - 1), l = std::min(static_cast<int64_t>(tc), d.nc - 1);
  const double fb = tb - static_cast<double>(m), fc = tc - static_cast<double>(l);
  return {l * (d.nb + 1) + m, (1 - fb) * (1 - fc), fb * (1 - fc), (1 - fb) * fc, fb * fc};
}
double Interp(const double* plane, const AxisDims& d, double tb, double tc) {
  const Corner c = Locate(d, tb, tc);
  const double* p = plane + c.offset;
  return c.w00 * p[0] + c.w01 * p[1] + c.w10 * p[d.nb + 1] + c.w11 * p[d.nb + 2];
}
void InterpAdjoint(double* plane, const AxisDims& d, double tb, double tc, double value) {
  const Corner c = Locate(d, tb, tc);
  double* p = plane + c.offset;
  p[0] += c.w00 * value, p[1] += c.w01 * value, p[d.nb + 1] += c.w10 * value, p[d.nb + 2] += c.w11 * value;
}

}  // namespace

void Forward(const DdSystem& sys, const float* volume, const std::vector<int64_t>& views, float* sinogram) {
  const DdShape& s = sys.shape;
  std::vector<double> tables[2];
  for (int64_t v : views) {
    const int axis = sys.views[v].axis;
    if (tables[axis].empty()) tables[axis] = SlabTables(s, axis, volume);
  }
  const int64_t cells = s.cols * s.rows;
  const int64_t total = cells * static_cast<int64_t>(views.size());
  ParallelFor(total, [&](int64_t n0, int64_t n1, int) {
    for (int64_t n = n0; n < n1; ++n) {
      const DdView& w = sys.views[views[n / cells]];
      const AxisDims d = Dims(s, w.axis);
      const double* table = tables[w.axis].data();
      const CellMap cm = CellOf(sys, w, n % cells);
      double sum = 0;
      SlabBox b;
      for (int64_t i = 0; i < d.na; ++i) {
        if (!OnSlab(cm, d, static_cast<double>(i), &b)) continue;
        const double* plane = table + i * PlaneSize(d);
        // Integrate (the table), interpolate at the ends, differentiate.
        const double integral = Interp(plane, d, b.hb, b.hc) - Interp(plane, d, b.lb, b.hc) -
                                Interp(plane, d, b.hb, b.lc) + Interp(plane, d, b.lb, b.lc);
        sum += integral / ((b.hb - b.lb) * (b.hc - b.lc));
      }
      sinogram[n] = static_cast<float>(sum * cm.scale);
    }
  });
}

void ForwardExactOverlap(const DdSystem& sys, const float* volume, const std::vector<int64_t>& views,
                         float* sinogram) {
  const DdShape& s = sys.shape;
  const int64_t cells = s.cols * s.rows;
  const int64_t total = cells * static_cast<int64_t>(views.size());
  ParallelFor(total, [&](int64_t n0, int64_t n1, int) {
    for (int64_t n = n0; n < n1; ++n) {
      const DdView& w = sys.views[views[n / cells]];
      const AxisDims d = Dims(s, w.axis);
      const CellMap cm = CellOf(sys, w, n % cells);
      double sum = 0;
      SlabBox b;
      for (int64_t i = 0; i < d.na; ++i) {
        if (!OnSlab(cm, d, static_cast<double>(i), &b)) continue;
        const int64_t j0 = std::max<int64_t>(0, static_cast<int64_t>(std::floor(b.lb)));
        const int64_t j1 = std::min<int64_t>(d.nb, static_cast<int64_t>(std::ceil(b.hb)));
        const int64_t k0 = std::max<int64_t>(0, static_cast<int64_t>(std::floor(b.lc)));
        const int64_t k1 = std::min<int64_t>(d.nc, static_cast<int64_t>(std::ceil(b.hc)));
        double part = 0;
        for (int64_t k = k0; k < k1; ++k) {
          const double oc = Overlap(b.lc, b.hc, static_cast<double>(k));
          for (int64_t j = j0; j < j1; ++j) {
            part += volume[VoxelIndex(s, w.axis, i, j, k)] * Overlap(b.lb, b.hb, static_cast<double>(j)) * oc;
          }
        }
        sum += part / ((b.hb - b.lb) * (b.hc - b.lc));
      }
      sinogram[n] = static_cast<float>(sum * cm.scale);
    }
  });
}

void Back(const DdSystem& sys, const float* sinogram, const std::vector<int64_t>& views, float* volume) {
  const DdShape& s = sys.shape;
  const int64_t cells = s.cols * s.rows;
  std::vector<double> acc(s.nx * s.ny * s.nz, 0.0);
  for (int axis = 0; axis < 2; ++axis) {
    std::vector<int64_t> mine;  // positions in `views` (and the compact sinogram)
    for (size_t p = 0; p < views.size(); ++p) {
      if (sys.views[views[p]].axis == axis) mine.push_back(static_cast<int64_t>(p));
    }
    if (mine.empty()) continue;
    const AxisDims d = Dims(s, axis);
    std::vector<double> adjoint(d.na * PlaneSize(d), 0.0);  // d(output)/d(table)
    // Cell maps a chunk of views at a time (bounded memory), then each thread
    // scatters its own slabs: no two threads touch the same table entry.
    const int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 22) / cells);
    std::vector<CellMap> maps;
    for (size_t v0 = 0; v0 < mine.size(); v0 += chunk) {
      const size_t v1 = std::min(mine.size(), v0 + static_cast<size_t>(chunk));
      maps.resize((v1 - v0) * cells);
      ParallelFor(static_cast<int64_t>(maps.size()), [&](int64_t n0, int64_t n1, int) {
        for (int64_t n = n0; n < n1; ++n) maps[n] = CellOf(sys, sys.views[views[mine[v0 + n / cells]]], n % cells);
      });
      ParallelFor(d.na, [&](int64_t i0, int64_t i1, int) {
        SlabBox b;
        for (int64_t i = i0; i < i1; ++i) {
          double* plane = adjoint.data() + i * PlaneSize(d);
          for (size_t v = v0; v < v1; ++v) {
            const float* y = sinogram + mine[v] * cells;
            const CellMap* cm = maps.data() + (v - v0) * cells;
            for (int64_t c = 0; c < cells; ++c) {
              if (y[c] == 0.f || !OnSlab(cm[c], d, static_cast<double>(i), &b)) continue;
              const double g = y[c] * cm[c].scale / ((b.hb - b.lb) * (b.hc - b.lc));
              InterpAdjoint(plane, d, b.hb, b.hc, g);
              InterpAdjoint(plane, d, b.lb, b.hc, -g);
              InterpAdjoint(plane, d, b.hb, b.lc, -g);
              InterpAdjoint(plane, d, b.lb, b.lc, g);
            }
          }
        }
      });
    }
    // Transpose of the integration: x[j, k] = sum_{m > j, l > k} adjoint[l][m].
    ParallelFor(d.na, [&](int64_t i0, int64_t i1, int) {
      for (int64_t i = i0; i < i1; ++i) {
        double* plane = adjoint.data() + i * PlaneSize(d);
        const int64_t stride = d.nb + 1;
        for (int64_t l = d.nc; l >= 0; --l) {
          for (int64_t m = d.nb; m >= 0; --m) {
            double v = plane[l * stride + m];
            if (m < d.nb) v += plane[l * stride + m + 1];
            if (l < d.nc) v += plane[(l + 1) * stride + m];
            if (m < d.nb && l < d.nc) v -= plane[(l + 1) * stride + m + 1];
            plane[l * stride + m] = v;
          }
        }
        for (int64_t k = 0; k < d.nc; ++k) {
          for (int64_t j = 0; j < d.nb; ++j) acc[VoxelIndex(s, axis, i, j, k)] += plane[(k + 1) * stride + j + 1];
        }
      }
    });
  }
  for (size_t n = 0; n < acc.size(); ++n) volume[n] = static_cast<float>(acc[n]);
}

}  // namespace cpu
}  // namespace ct
}  // namespace recon
}  // namespace tessera
