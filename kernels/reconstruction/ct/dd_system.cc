#include "kernels/reconstruction/ct/dd_system.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"

namespace tessera {
namespace recon {
namespace ct {
namespace {

// World vectors in the view's (a, b, c) frame.
struct Frame {
  int axis;
  double A(const Vec3& v) const { return axis == 0 ? v.x : v.y; }
  double B(const Vec3& v) const { return axis == 0 ? v.y : v.x; }
  double C(const Vec3& v) const { return v.z; }
};

const char* AxisName(int axis) { return axis == 0 ? "x" : "y"; }

absl::StatusOr<DdView> MakeView(const CtGeometry& g, int64_t p) {
  const VolumeGeometry& vol = g.volume;
  const ProjectionGeometry& proj = g.projection;
  const ProjectionVectors& pv = proj.views[p];
  const std::string where = absl::StrCat("proj_geom.Vectors row ", p, ": ");
  const bool parallel = proj.beam == BeamKind::kParallel;
  const Vec3 s = pv.source_or_ray, d = pv.det_center, u = pv.u, v = pv.v;
  const Vec3 dir = parallel ? s : Vec3{d.x - s.x, d.y - s.y, d.z - s.z};
  if (!proj.is_2d && std::fabs(dir.z) > std::max(std::fabs(dir.x), std::fabs(dir.y))) {
    return absl::InvalidArgumentError(
        where + "the central ray runs mainly along z; the distance-driven projector needs x- or y-dominant views");
  }
  DdView w;
  w.axis = std::fabs(dir.x) >= std::fabs(dir.y) ? 0 : 1;
  const Frame f{w.axis};
  const double min_a = w.axis == 0 ? vol.min_x : vol.min_y, max_a = w.axis == 0 ? vol.max_x : vol.max_y;
  const double da = w.axis == 0 ? vol.dx() : vol.dy();
  const double min_b = w.axis == 0 ? vol.min_y : vol.min_x;
  const double db = w.axis == 0 ? vol.dy() : vol.dx();
  const double min_c = vol.min_z, dc = vol.dz();
  const double a0 = min_a + 0.5 * da;  // slab 0
  w.slab = da;
  const Vec3 basis[3] = {d, u, v};  // detector point = d + g u + r v
  if (parallel) {
    // Ray through P(g, r) with direction s: b(t) = P_b + (t - P_a) s_b / s_a.
    const double kb = f.B(s) / f.A(s), kc = f.C(s) / f.A(s);
    for (int m = 0; m < 3; ++m) {
      const double origin = m == 0 ? 1.0 : 0.0;
      w.nb[m] = (f.B(basis[m]) - origin * min_b + (origin * a0 - f.A(basis[m])) * kb) / db;
      w.nc[m] = (f.C(basis[m]) - origin * min_c + (origin * a0 - f.A(basis[m])) * kc) / dc;
      w.mb[m] = origin * da * kb / db;
      w.mc[m] = origin * da * kc / dc;
      w.den[m] = origin;
    }
    w.e0[0] = f.A(s), w.e0[1] = f.B(s), w.e0[2] = f.C(s);
  } else {
    const double sa = f.A(s);
    if (sa > min_a && sa < max_a) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%sthe source (%s = %.6g mm) lies within the volume's %s range [%.6g, %.6g]; distance-driven slabs along "
          "%s would pass through it",
          where, AxisName(w.axis), sa, AxisName(w.axis), min_a, max_a, AxisName(w.axis)));
    }
    // Ray from S through P(g, r): e = (d - s) + g u + r v;
    // b(t) = S_b + (t - S_a) e_b / e_a.
    const Vec3 e[3] = {{d.x - s.x, d.y - s.y, d.z - s.z}, u, v};
    const double q = a0 - sa;
    for (int m = 0; m < 3; ++m) {
      w.nb[m] = ((f.B(s) - min_b) * f.A(e[m]) + q * f.B(e[m])) / db;
      w.nc[m] = ((f.C(s) - min_c) * f.A(e[m]) + q * f.C(e[m])) / dc;
      w.mb[m] = da * f.B(e[m]) / db;
      w.mc[m] = da * f.C(e[m]) / dc;
      w.den[m] = f.A(e[m]);
    }
    w.e0[0] = f.A(e[0]), w.e0[1] = f.B(e[0]), w.e0[2] = f.C(e[0]);
    w.eu[0] = f.A(u), w.eu[1] = f.B(u), w.eu[2] = f.C(u);
    w.ev[0] = f.A(v), w.ev[1] = f.B(v), w.ev[2] = f.C(v);
  }
  if (proj.is_2d) {
    for (int m = 0; m < 3; ++m) w.nc[m] = w.mc[m] = 0;
  }
  // 2-D rays all sit at row offset 0, so the b map never depends on the row.
  w.row_coupled = (!proj.is_2d && (w.nb[2] != 0 || w.mb[2] != 0 || w.den[2] != 0)) ? 1 : 0;

  // Rays at the detector corners: on the central ray's side of the slabs and
  // not grazing them (den and e_a are affine, so the corners bound them).
  const double gh = 0.5 * static_cast<double>(proj.det_cols), rh = 0.5 * static_cast<double>(proj.det_rows);
  const double central_a = w.e0[0];
  for (double gs : {-gh, gh}) {
    for (double rs : {-rh, rh}) {
      const double ea = w.e0[0] + gs * w.eu[0] + rs * w.ev[0];
      const double eb = w.e0[1] + gs * w.eu[1] + rs * w.ev[1];
      const double ec = w.e0[2] + gs * w.eu[2] + rs * w.ev[2];
      const double norm = std::sqrt(ea * ea + eb * eb + ec * ec);
      if (ea * central_a <= 0 || std::fabs(ea) < 0.01 * norm) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%sthe ray to the detector corner (col offset %g, row offset %g) runs (almost) parallel to the %s = const "
            "slabs of the distance-driven projector (fan or cone angle too wide)",
            where, gs, rs, AxisName(w.axis)));
      }
    }
  }
  // Non-degenerate footprint of the central cell on the middle slab.
  const double mid = 0.5 * static_cast<double>((w.axis == 0 ? vol.nx : vol.ny) - 1);
  if (std::fabs(MapB(w, 0.5, 0, mid) - MapB(w, -0.5, 0, mid)) < 1e-6) {
    return absl::InvalidArgumentError(absl::StrCat(where, "detector u maps to a zero-width interval along ",
                                                   AxisName(1 - w.axis), " on the slabs"));
  }
  if (!proj.is_2d && std::fabs(MapC(w, 0, 0.5, mid) - MapC(w, 0, -0.5, mid)) < 1e-6) {
    return absl::InvalidArgumentError(where + "detector v maps to a zero-width interval along z on the slabs");
  }
  return w;
}

void FillTable(const DdView& w, int64_t cols, float* out) {
  float* a = out;  // laid out as TableAt reads them
  float* b = a + cols + 1;
  float* p = b + cols + 1;
  float *q = p + cols, *rr = q + cols, *s = rr + cols, *wa = s + cols, *wb = wa + cols, *wc = wb + cols;
  float* len = wc + cols;
  for (int64_t k = 0; k <= cols; ++k) {
    const double g = static_cast<double>(k) - 0.5 * static_cast<double>(cols);
    const double den = Affine(w.den, g, 0);
    a[k] = static_cast<float>(Affine(w.nb, g, 0) / den);
    b[k] = static_cast<float>(Affine(w.mb, g, 0) / den);
  }
  for (int64_t c = 0; c < cols; ++c) {
    const double g = static_cast<double>(c) - 0.5 * static_cast<double>(cols - 1);
    const double den = Affine(w.den, g, 0);
    p[c] = static_cast<float>(Affine(w.nc, g, 0) / den);
    q[c] = static_cast<float>(Affine(w.mc, g, 0) / den);
    rr[c] = static_cast<float>(w.nc[2] / den);
    s[c] = static_cast<float>(w.mc[2] / den);
    const double ea = w.e0[0] + g * w.eu[0], eb = w.e0[1] + g * w.eu[1], ec = w.e0[2] + g * w.eu[2];
    wa[c] = static_cast<float>(ea), wb[c] = static_cast<float>(eb), wc[c] = static_cast<float>(ec);
    len[c] = static_cast<float>(w.slab / std::fabs(ea));
  }
}

// The back projection's regrouping of a view's ColumnTable (BackTable).
void FillBackTable(const DdView& w, const float* column_table, int64_t cols, bool is_2d, float* out) {
  const ColumnTable t = TableAt(column_table, cols);
  const double head[8] = {w.nb[0], w.mb[0], w.nb[1], w.mb[1], w.den[0], w.den[1], 0, 0};
  for (int m = 0; m < 8; ++m) out[m] = static_cast<float>(head[m]);
  out[8] = t.a[0], out[9] = t.b[0], out[10] = t.a[cols], out[11] = t.b[cols];
  float* cells = out + 12;
  for (int64_t c = 0; c < cols; ++c) {
    cells[4 * c + 0] = t.a[c], cells[4 * c + 1] = t.b[c];
    cells[4 * c + 2] = t.a[c + 1], cells[4 * c + 3] = t.b[c + 1];
  }
  if (is_2d) return;
  float* rows = cells + 4 * cols;
  for (int64_t c = 0; c < cols; ++c) {
    rows[4 * c + 0] = t.p[c], rows[4 * c + 1] = t.q[c], rows[4 * c + 2] = t.rr[c], rows[4 * c + 3] = t.s[c];
  }
}

// Row-coupled views' BackTable storage holds the maps as floats instead
// (CoupledSlab): {nb}, {mb}, {nc}, {mc}, {den}, each padded to 4.
void FillCoupledBackTable(const DdView& w, float* out) {
  const double* maps[5] = {w.nb, w.mb, w.nc, w.mc, w.den};
  for (int m = 0; m < 5; ++m) {
    for (int e = 0; e < 3; ++e) out[4 * m + e] = static_cast<float>(maps[m][e]);
    out[4 * m + 3] = 0.f;
  }
}

}  // namespace

absl::StatusOr<DdSystem> BuildDdSystem(const CtGeometry& geometry) {
  TESSERA_RETURN_IF_ERROR(Validate(geometry));
  DdSystem system;
  const VolumeGeometry& v = geometry.volume;
  const ProjectionGeometry& p = geometry.projection;
  system.shape = DdShape{v.nx, v.ny, v.nz, p.det_cols, p.det_rows, p.is_2d};
  system.views.reserve(p.views.size());
  for (int64_t i = 0; i < p.num_views(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(DdView w, MakeView(geometry, i));
    system.views.push_back(w);
  }
  const int64_t stride = TableStride(p.det_cols);
  system.tables.assign(stride * p.num_views(), 0.f);
  const int64_t back_stride = BackTableStride(p.det_cols, p.is_2d);
  system.back_tables.assign(back_stride * p.num_views(), 0.f);
  for (int64_t i = 0; i < p.num_views(); ++i) {
    const DdView& w = system.views[i];
    if (w.row_coupled) {
      system.any_row_coupled = true;
      FillCoupledBackTable(w, system.back_tables.data() + i * back_stride);
      continue;
    }
    float* table = system.tables.data() + i * stride;
    FillTable(w, p.det_cols, table);
    FillBackTable(w, table, p.det_cols, p.is_2d, system.back_tables.data() + i * back_stride);
  }
  return system;
}

}  // namespace ct
}  // namespace recon
}  // namespace tessera
