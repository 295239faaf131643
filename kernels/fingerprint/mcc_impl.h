// MCC cell geometry and contributions shared by mcc_cpu.cc and mcc.cu
// (internal). Everything here is deterministic (fp_math.h), so the CPU
// reference and the CUDA kernel produce the same bits.
#ifndef TESSERA_KERNELS_FINGERPRINT_MCC_IMPL_H_
#define TESSERA_KERNELS_FINGERPRINT_MCC_IMPL_H_

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "kernels/fingerprint/fp_math.h"
#include "kernels/fingerprint/mcc.h"

namespace tessera {
namespace fingerprint {
namespace mcc_internal {

// Derived constants, computed once on the host and passed to the device.
struct MccConstants {
  double delta_s;           // 2R / NS
  double delta_d;           // 2 pi / ND
  double radius2;           // R^2
  double neighbour2;        // (3 sigmaS)^2: minutiae contributing to a cell
  double neighbourhood2;    // (R + 3 sigmaS)^2: minutiae counted for minM
  double gs_norm;           // 1 / (sigmaS sqrt(2 pi))
  double inv_two_sigma_s2;  // 1 / (2 sigmaS^2)
  double inv_sigma_d_sqrt2; // 1 / (sigmaD sqrt 2)
  double mu_psi;
  double omega;
  double omega2;
  int min_valid_cells;      // ceil(minVC * cells in circle)
  int min_neighbours;
};

inline MccConstants MakeMccConstants(const MccParams& p) {
  MccConstants c;
  c.delta_s = 2.0 * p.radius / kMccNs;
  c.delta_d = 2.0 * fpmath::kPi / kMccNd;
  c.radius2 = p.radius * p.radius;
  c.neighbour2 = 9.0 * p.sigma_s * p.sigma_s;
  c.neighbourhood2 = (p.radius + 3.0 * p.sigma_s) * (p.radius + 3.0 * p.sigma_s);
  c.gs_norm = 1.0 / (p.sigma_s * std::sqrt(2.0 * fpmath::kPi));
  c.inv_two_sigma_s2 = 1.0 / (2.0 * p.sigma_s * p.sigma_s);
  c.inv_sigma_d_sqrt2 = 1.0 / (p.sigma_d * std::sqrt(2.0));
  c.mu_psi = p.mu_psi;
  c.omega = p.omega;
  c.omega2 = p.omega * p.omega;
  c.min_valid_cells = static_cast<int>(std::ceil(p.min_valid_cells * MccCellsInCircle(p) - 1e-9));
  c.min_neighbours = p.min_neighbours;
  return c;
}

// Offsets of cell index i (0-based) from the cylinder centre, in cells.
TESSERA_FP_HD double CellOffset(int i) { return i - 0.5 * (kMccNs - 1); }

// Whether cell (i, j)'s centre lies within R of the centre (exact: the
// offsets are half-integers).
TESSERA_FP_HD bool CellInCircle(int i, int j, const MccConstants& c) {
  using fpmath::Mul;
  const double di = CellOffset(i), dj = CellOffset(j);
  return Mul(Mul(c.delta_s, c.delta_s), Mul(di, di) + Mul(dj, dj)) <= c.radius2;
}

// Centre of cell (i, j) of a cylinder at (x, y) with direction cosine/sine
// (cs, sn): (x, y) + DeltaS [[cs, sn], [-sn, cs]] (di, dj).
TESSERA_FP_HD void CellCenter(double x, double y, double cs, double sn, int i, int j, const MccConstants& c,
                              double* px, double* py) {
  using fpmath::Mul;
  const double di = CellOffset(i), dj = CellOffset(j);
  *px = x + Mul(c.delta_s, Mul(cs, di) + Mul(sn, dj));
  *py = y + Mul(c.delta_s, Mul(-sn, di) + Mul(cs, dj));
}

// Squared distance from p to segment [a, b].
TESSERA_FP_HD double SegmentDistance2(double px, double py, double ax, double ay, double bx, double by) {
  using fpmath::Mul;
  const double ex = bx - ax, ey = by - ay;
  const double wx = px - ax, wy = py - ay;
  const double len2 = Mul(ex, ex) + Mul(ey, ey);
  double t = 0.0;
  if (len2 > 0.0) {
    t = (Mul(wx, ex) + Mul(wy, ey)) / len2;
    if (t < 0.0) t = 0.0;
    if (t > 1.0) t = 1.0;
  }
  const double dx = wx - Mul(t, ex), dy = wy - Mul(t, ey);
  return Mul(dx, dx) + Mul(dy, dy);
}

// Whether p lies in the convex hull (counterclockwise in a y-up sense: left
// turns positive, see ConvexHull) enlarged by omega.
TESSERA_FP_HD bool InsideEnlargedHull(double px, double py, const double* hx, const double* hy, int n,
                                      const MccConstants& c) {
  using fpmath::Mul;
  if (n <= 0) return false;
  if (n >= 3) {
    bool inside = true;
    for (int e = 0; e < n && inside; ++e) {
      const int f = e + 1 == n ? 0 : e + 1;
      const double cross = Mul(hx[f] - hx[e], py - hy[e]) - Mul(hy[f] - hy[e], px - hx[e]);
      inside = cross >= 0.0;
    }
    if (inside) return true;
  }
  if (n == 1) {
    const double dx = px - hx[0], dy = py - hy[0];
    return Mul(dx, dx) + Mul(dy, dy) <= c.omega2;
  }
  const int edges = n == 2 ? 1 : n;
  for (int e = 0; e < edges; ++e) {
    const int f = e + 1 == n ? 0 : e + 1;
    if (SegmentDistance2(px, py, hx[e], hy[e], hx[f], hy[f]) <= c.omega2) return true;
  }
  return false;
}

// G_S of a squared distance.
TESSERA_FP_HD double SpatialTerm(double d2, const MccConstants& c) {
  using fpmath::Mul;
  return Mul(c.gs_norm, fpmath::Exp(-Mul(d2, c.inv_two_sigma_s2)));
}

// G_D(alpha): the N(0, sigmaD) mass over [alpha - DeltaD/2, alpha + DeltaD/2].
TESSERA_FP_HD double DirectionalTerm(double alpha, const MccConstants& c) {
  using fpmath::Mul;
  const double half = Mul(0.5, c.delta_d);
  return Mul(0.5, fpmath::Erf(Mul(alpha + half, c.inv_sigma_d_sqrt2)) -
                      fpmath::Erf(Mul(alpha - half, c.inv_sigma_d_sqrt2)));
}

// Direction of layer k (0-based): -pi + (k + 1/2) DeltaD.
TESSERA_FP_HD double LayerAngle(int k, const MccConstants& c) { return -fpmath::kPi + fpmath::Mul(k + 0.5, c.delta_d); }

// The minutiae with angles wrapped into [0, 2 pi) (as floats), which the
// matchers rely on. Both backends build cylinders from this copy.
inline std::vector<MinutiaPoint> NormalizedMinutiae(const std::vector<MinutiaPoint>& in) {
  std::vector<MinutiaPoint> out(in);
  for (MinutiaPoint& m : out) {
    double t = std::fmod(static_cast<double>(m.theta), fpmath::kTwoPi);
    if (t < 0) t += fpmath::kTwoPi;
    t = t + 0.0;  // -0 -> +0
    float f = static_cast<float>(t);
    if (!(f < fpmath::kTwoPiF)) f = 0.0f;
    m.theta = f;
  }
  return out;
}

// Convex hull of the points (Andrew's monotone chain), vertices ordered so
// that the interior is on the left of each edge in (x, y) coordinates;
// collinear points dropped. Degenerate inputs give 1 or 2 vertices.
inline void ConvexHull(const std::vector<MinutiaPoint>& pts, std::vector<double>* hx, std::vector<double>* hy) {
  std::vector<std::pair<double, double>> p;
  p.reserve(pts.size());
  for (const MinutiaPoint& m : pts) p.emplace_back(m.x, m.y);
  std::sort(p.begin(), p.end());
  p.erase(std::unique(p.begin(), p.end()), p.end());
  hx->clear();
  hy->clear();
  if (p.size() <= 2) {
    for (const auto& q : p) {
      hx->push_back(q.first);
      hy->push_back(q.second);
    }
    return;
  }
  auto cross = [](const std::pair<double, double>& o, const std::pair<double, double>& a,
                  const std::pair<double, double>& b) {
    return (a.first - o.first) * (b.second - o.second) - (a.second - o.second) * (b.first - o.first);
  };
  std::vector<std::pair<double, double>> h(2 * p.size());
  size_t k = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    while (k >= 2 && cross(h[k - 2], h[k - 1], p[i]) <= 0) --k;
    h[k++] = p[i];
  }
  for (size_t i = p.size() - 1, t = k + 1; i > 0; --i) {
    while (k >= t && cross(h[k - 2], h[k - 1], p[i - 1]) <= 0) --k;
    h[k++] = p[i - 1];
  }
  h.resize(k - 1);
  for (const auto& q : h) {
    hx->push_back(q.first);
    hy->push_back(q.second);
  }
}

}  // namespace mcc_internal
}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_KERNELS_FINGERPRINT_MCC_IMPL_H_
