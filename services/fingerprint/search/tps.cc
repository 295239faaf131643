#include "services/fingerprint/search/tps.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tessera {
namespace fingerprint {
namespace {

double U(double r2) { return r2 > 0 ? r2 * std::log(r2) : 0.0; }

bool Finite(const std::vector<Point2>& v) {
  for (const Point2& p : v) {
    if (!std::isfinite(p.x) || !std::isfinite(p.y)) return false;
  }
  return true;
}

}  // namespace

absl::Status SolveDense(std::vector<double>& m, int n, std::vector<double>& b, int k, double tiny) {
  if (n < 0 || k < 0 || m.size() != static_cast<size_t>(n) * n || b.size() != static_cast<size_t>(n) * k) {
    return absl::InvalidArgumentError("SolveDense: sizes do not match");
  }
  double scale = 0;
  for (double v : m) scale = std::max(scale, std::fabs(v));
  const double floor = tiny * (scale > 0 ? scale : 1.0);
  for (int c = 0; c < n; ++c) {
    int pivot = c;
    for (int r = c + 1; r < n; ++r) {
      if (std::fabs(m[static_cast<size_t>(r) * n + c]) > std::fabs(m[static_cast<size_t>(pivot) * n + c])) pivot = r;
    }
    if (!(std::fabs(m[static_cast<size_t>(pivot) * n + c]) > floor)) {
      return absl::FailedPreconditionError(absl::StrCat("SolveDense: singular system (column ", c, ")"));
    }
    if (pivot != c) {
      for (int q = 0; q < n; ++q) std::swap(m[static_cast<size_t>(c) * n + q], m[static_cast<size_t>(pivot) * n + q]);
      for (int q = 0; q < k; ++q) std::swap(b[static_cast<size_t>(c) * k + q], b[static_cast<size_t>(pivot) * k + q]);
    }
    const double d = m[static_cast<size_t>(c) * n + c];
    for (int r = c + 1; r < n; ++r) {
      const double f = m[static_cast<size_t>(r) * n + c] / d;
      if (f == 0) continue;
      for (int q = c; q < n; ++q) m[static_cast<size_t>(r) * n + q] -= f * m[static_cast<size_t>(c) * n + q];
      for (int q = 0; q < k; ++q) b[static_cast<size_t>(r) * k + q] -= f * b[static_cast<size_t>(c) * k + q];
    }
  }
  for (int c = n - 1; c >= 0; --c) {
    for (int q = 0; q < k; ++q) {
      double v = b[static_cast<size_t>(c) * k + q];
      for (int r = c + 1; r < n; ++r) v -= m[static_cast<size_t>(c) * n + r] * b[static_cast<size_t>(r) * k + q];
      b[static_cast<size_t>(c) * k + q] = v / m[static_cast<size_t>(c) * n + c];
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ThinPlateSpline> ThinPlateSpline::Fit(const std::vector<Point2>& from, const std::vector<Point2>& to,
                                                     double lambda) {
  const int n = static_cast<int>(from.size());
  if (n < 3 || to.size() != from.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("thin-plate spline needs >= 3 point pairs of equal count (got ", from.size(), " and ", to.size(), ")"));
  }
  if (!Finite(from) || !Finite(to) || !std::isfinite(lambda) || lambda < 0) {
    return absl::InvalidArgumentError("thin-plate spline: non-finite points or negative lambda");
  }
  // Centre the control points: the same spline, better-conditioned P.
  double cx = 0, cy = 0;
  for (const Point2& p : from) {
    cx += p.x;
    cy += p.y;
  }
  cx /= n;
  cy /= n;
  const int size = n + 3;
  std::vector<double> m(static_cast<size_t>(size) * size, 0.0), b(static_cast<size_t>(size) * 2, 0.0);
  double mean_k = 0;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      const double dx = from[i].x - from[j].x, dy = from[i].y - from[j].y;
      const double u = U(dx * dx + dy * dy);
      m[static_cast<size_t>(i) * size + j] = u;
      if (i != j) mean_k += std::fabs(u);
    }
  }
  mean_k = n > 1 ? mean_k / (static_cast<double>(n) * (n - 1)) : 0.0;
  const double reg = lambda * mean_k;
  for (int i = 0; i < n; ++i) {
    m[static_cast<size_t>(i) * size + i] += reg;
    const double p[3] = {1.0, from[i].x - cx, from[i].y - cy};
    for (int q = 0; q < 3; ++q) {
      m[static_cast<size_t>(i) * size + n + q] = p[q];
      m[static_cast<size_t>(n + q) * size + i] = p[q];
    }
    b[static_cast<size_t>(i) * 2] = to[i].x;
    b[static_cast<size_t>(i) * 2 + 1] = to[i].y;
  }
  absl::Status solved = SolveDense(m, size, b, 2);
  if (!solved.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("thin-plate spline: degenerate control points (", solved.message(), ")"));
  }
  ThinPlateSpline t;
  t.centres_ = from;
  t.wx_.resize(n);
  t.wy_.resize(n);
  for (int i = 0; i < n; ++i) {
    t.wx_[i] = b[static_cast<size_t>(i) * 2];
    t.wy_[i] = b[static_cast<size_t>(i) * 2 + 1];
  }
  // Undo the centring: a_0 + a_x (x - cx) + a_y (y - cy).
  for (int c = 0; c < 2; ++c) {
    double* a = c == 0 ? t.ax_ : t.ay_;
    a[0] = b[static_cast<size_t>(n) * 2 + c];
    a[1] = b[static_cast<size_t>(n + 1) * 2 + c];
    a[2] = b[static_cast<size_t>(n + 2) * 2 + c];
    a[0] -= a[1] * cx + a[2] * cy;
  }
  return t;
}

Point2 ThinPlateSpline::Apply(const Point2& p) const {
  double x = ax_[0] + ax_[1] * p.x + ax_[2] * p.y;
  double y = ay_[0] + ay_[1] * p.x + ay_[2] * p.y;
  for (size_t i = 0; i < centres_.size(); ++i) {
    const double dx = p.x - centres_[i].x, dy = p.y - centres_[i].y;
    const double u = U(dx * dx + dy * dy);
    x += wx_[i] * u;
    y += wy_[i] * u;
  }
  return {x, y};
}

// The map's value costs two products more than the Jacobian alone: one loop serves both.
void ThinPlateSpline::Jacobian(const Point2& p, double j[2][2]) const { ApplyWithJacobian(p, j); }

Point2 ThinPlateSpline::ApplyWithJacobian(const Point2& p, double j[2][2]) const {
  double x = ax_[0] + ax_[1] * p.x + ax_[2] * p.y;
  double y = ay_[0] + ay_[1] * p.x + ay_[2] * p.y;
  j[0][0] = ax_[1];
  j[0][1] = ax_[2];
  j[1][0] = ay_[1];
  j[1][1] = ay_[2];
  for (size_t i = 0; i < centres_.size(); ++i) {
    const double dx = p.x - centres_[i].x, dy = p.y - centres_[i].y;
    const double r2 = dx * dx + dy * dy;
    if (r2 <= 0) continue;  // U(0) = 0 and grad U -> 0 at the centre
    const double lg = std::log(r2);
    x += wx_[i] * r2 * lg;
    y += wy_[i] * r2 * lg;
    const double g = 2.0 * (lg + 1.0);
    j[0][0] += wx_[i] * g * dx;
    j[0][1] += wx_[i] * g * dy;
    j[1][0] += wy_[i] * g * dx;
    j[1][1] += wy_[i] * g * dy;
  }
  return {x, y};
}

double ThinPlateSpline::BendingEnergy() const {
  double e = 0;
  for (size_t i = 0; i < centres_.size(); ++i) {
    for (size_t k = 0; k < centres_.size(); ++k) {
      const double dx = centres_[i].x - centres_[k].x, dy = centres_[i].y - centres_[k].y;
      e += U(dx * dx + dy * dy) * (wx_[i] * wx_[k] + wy_[i] * wy_[k]);
    }
  }
  return e;
}

Point2 RigidTransform::Apply(const Point2& p) const {
  const double c = std::cos(angle), s = std::sin(angle);
  return {p.x * c + p.y * s + tx, -p.x * s + p.y * c + ty};
}

absl::StatusOr<RigidTransform> FitRigid(const std::vector<Point2>& from, const std::vector<Point2>& to) {
  if (from.empty() || from.size() != to.size()) {
    return absl::InvalidArgumentError("FitRigid needs the same non-zero number of points on both sides");
  }
  const double n = static_cast<double>(from.size());
  double fx = 0, fy = 0, gx = 0, gy = 0;
  for (size_t i = 0; i < from.size(); ++i) {
    fx += from[i].x;
    fy += from[i].y;
    gx += to[i].x;
    gy += to[i].y;
  }
  fx /= n;
  fy /= n;
  gx /= n;
  gy /= n;
  // Maximise sum q . R p over a: R p = (c px + s py, -s px + c py), so
  // sum = c * sum(px qx + py qy) + s * sum(py qx - px qy).
  double sc = 0, ss = 0;
  for (size_t i = 0; i < from.size(); ++i) {
    const double px = from[i].x - fx, py = from[i].y - fy, qx = to[i].x - gx, qy = to[i].y - gy;
    sc += px * qx + py * qy;
    ss += py * qx - px * qy;
  }
  RigidTransform r;
  r.angle = (sc == 0 && ss == 0) ? 0.0 : std::atan2(ss, sc);
  const double c = std::cos(r.angle), s = std::sin(r.angle);
  r.tx = gx - (fx * c + fy * s);
  r.ty = gy - (-fx * s + fy * c);
  return r;
}

}  // namespace fingerprint
}  // namespace tessera
