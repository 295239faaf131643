#include "kernels/reconstruction/fbp/short_scan_derivative.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_format.h"
#include "common/status.h"
#include "kernels/reconstruction/fbp/redundancy_weights.h"
#include "kernels/reconstruction/vec3_math.h"

namespace tessera {
namespace recon {
namespace fbp {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kDeg = 180.0 / kPi;

Vec3 RotateZ(const Vec3& a, double t) {
  const double c = std::cos(t), s = std::sin(t);
  return {c * a.x - s * a.y, s * a.x + c * a.y, a.z};
}
ProjectionVectors RotateZ(const ProjectionVectors& w, double t) {
  return {RotateZ(w.source_or_ray, t), RotateZ(w.det_center, t), RotateZ(w.u, t), RotateZ(w.v, t)};
}
void Store(const Vec3& v, float out[3]) {
  out[0] = static_cast<float>(v.x);
  out[1] = static_cast<float>(v.y);
  out[2] = static_cast<float>(v.z);
}

double Fold(double a) {
  double f = std::fmod(a, 2 * kPi);
  if (f < 0) f += 2 * kPi;
  return f >= 2 * kPi ? 0.0 : f;
}

bool Close(const Vec3& a, const Vec3& b, double scale) { return Norm(Sub(a, b)) <= 1e-4 * scale + 1e-9; }

}  // namespace

double NooArcWindow(double b, double arc, double smoothing) {
  if (b <= 0 || b >= arc) return 0.0;
  const double d = std::min(smoothing, 0.25 * arc);
  if (d <= 0) return 1.0;
  const double edge = std::min(b, arc - b);
  if (edge >= d) return 1.0;
  const double s = std::sin(0.5 * kPi * edge / d);
  return s * s;
}

double NooWeight(double b, double gamma, double arc, double smoothing) {
  const double c = NooArcWindow(b, arc, smoothing);
  if (c == 0.0) return 0.0;
  const double conjugates =
      NooArcWindow(b + kPi + 2 * gamma, arc, smoothing) + NooArcWindow(b - kPi + 2 * gamma, arc, smoothing);
  return c / (c + conjugates);
}

absl::StatusOr<FbpSetup> MakeDerivativeFbpSetup(const CtGeometry& geometry, bool redundancy_weights,
                                                double smoothing_deg) {
  TESSERA_RETURN_IF_ERROR(Validate(geometry));
  const ProjectionGeometry& proj = geometry.projection;
  if (proj.beam == BeamKind::kParallel) {
    return absl::InvalidArgumentError("fbp: the derivative short-scan method is for fan and cone beams");
  }
  if (!(smoothing_deg >= 0) || !std::isfinite(smoothing_deg)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("fbp: short_scan_smoothing_deg must be finite and >= 0, got %g", smoothing_deg));
  }
  const int64_t views = proj.num_views(), cols = proj.det_cols, rows = proj.det_rows;
  if (views < 2) return absl::InvalidArgumentError("fbp: the derivative short-scan method needs >= 2 views");
  // The Parker path's limited-angle refusal, short / full classification and
  // view shares; its weights are not used.
  TESSERA_ASSIGN_OR_RETURN(RedundancyWeights redundancy, MakeRedundancyWeights(proj, /*enabled=*/true));
  if (redundancy.pad_columns > 0) {
    return absl::InvalidArgumentError(
        "fbp: the derivative short-scan method does not support an offset detector (use short_scan \"parker\")");
  }
  const bool full = redundancy.column_weights.empty();
  // The ramp path's per-view constants (back projection; `pre` is unused).
  TESSERA_ASSIGN_OR_RETURN(FbpSetup setup, MakeFbpSetup(geometry, /*redundancy_weights=*/false));

  // Arc positions counter-clockwise from the view after the largest gap.
  std::vector<double> angle(views);
  for (int64_t p = 0; p < views; ++p) {
    angle[p] = std::atan2(proj.views[p].source_or_ray.y, proj.views[p].source_or_ray.x);
  }
  std::vector<int64_t> order(views);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return Fold(angle[x]) < Fold(angle[y]); });
  int64_t first = 0;
  double largest = Fold(angle[order[0]]) + 2 * kPi - Fold(angle[order[views - 1]]);
  for (int64_t k = 1; k < views; ++k) {
    const double gap = Fold(angle[order[k]]) - Fold(angle[order[k - 1]]);
    if (gap > largest) {
      largest = gap;
      first = k;
    }
  }
  std::rotate(order.begin(), order.begin() + first, order.end());
  std::vector<double> b(views);
  for (int64_t k = 0; k < views; ++k) b[k] = Fold(angle[order[k]] - angle[order[0]]);
  // Each view the previous one turned about z.
  for (int64_t k = 0; k + 1 < views; ++k) {
    const ProjectionVectors& w0 = proj.views[order[k]];
    const ProjectionVectors& w1 = proj.views[order[k + 1]];
    const double d = b[k + 1] - b[k];
    if (!(d > 1e-9)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "fbp: views %d and %d share an angle; the derivative short-scan method needs distinct angles", order[k],
          order[k + 1]));
    }
    const ProjectionVectors turned = RotateZ(w0, d);
    const double radius = Norm(w0.source_or_ray), pixel = Norm(w0.u);
    if (!Close(turned.source_or_ray, w1.source_or_ray, radius) || !Close(turned.det_center, w1.det_center, radius) ||
        !Close(turned.u, w1.u, pixel) || !Close(turned.v, w1.v, pixel)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "fbp: proj_geom.Vectors row %d is not row %d rotated about z: the derivative short-scan method needs a "
          "circular orbit about z (use short_scan \"parker\")",
          order[k + 1], order[k]));
    }
  }
  // A short scan's views sit centred in their steps (redundancy_weights.h).
  const double step = b[views - 1] / static_cast<double>(views - 1);
  const double arc = full ? 2 * kPi : b[views - 1] + step;

  setup.derivative.resize(views);
  const double oc = 0.5 * static_cast<double>(cols - 1), orow = 0.5 * static_cast<double>(rows - 1);
  for (int64_t k = 0; k < views; ++k) {
    const int64_t p = order[k];
    int64_t kp = k - 1, kn = k + 1;
    double span;
    if (full) {
      kp = (k + views - 1) % views;
      kn = (k + 1) % views;
      span = Fold(b[kn] - b[kp]);
    } else {
      kp = std::max<int64_t>(kp, 0);
      kn = std::min<int64_t>(kn, views - 1);
      span = b[kn] - b[kp];
    }
    const ProjectionVectors& w = proj.views[p];
    const Vec3 s = w.source_or_ray, c = w.det_center, u = w.u, v = proj.is_2d ? Vec3{} : w.v;
    const DetectorFrame frame = DetectorFrameOf(u, v, proj.is_2d);
    Vec3 n = frame.n;
    const Vec3 uh = frame.u_hat, vh = frame.v_hat;
    if (Dot(Sub(c, s), n) < 0) n = Mul(-1.0, n);
    const double dsd = Dot(Sub(c, s), n);
    // The Hilbert filter runs along +u; the formula's orientation is the
    // source's motion (counter-clockwise here, e_z x s).
    const Vec3 motion{-s.y, s.x, 0};
    const double sign = Dot(u, motion) >= 0 ? 1.0 : -1.0;
    DerivativeView& dv = setup.derivative[p];
    Store(Sub(Sub(Sub(c, s), Mul(oc, u)), Mul(orow, v)), dv.r0);
    Store(u, dv.u);
    Store(v, dv.v);
    Store(uh, dv.uh);
    Store(vh, dv.vh);
    Store(n, dv.n);
    dv.dsd = static_cast<float>(dsd);
    dv.inv_span = static_cast<float>(1.0 / span);
    dv.scale = static_cast<float>(sign * redundancy.shares[p] / (2 * kPi * dsd));
    dv.view_prev = static_cast<int32_t>(order[kp]);
    dv.view_next = static_cast<int32_t>(order[kn]);
  }

  // Weights after the filter, per view and column.
  const bool weighted = !full && redundancy_weights;
  const double smoothing = smoothing_deg / kDeg;
  setup.post_weights.assign(static_cast<size_t>(views * cols), 0.5f);
  if (weighted) {
    for (int64_t k = 0; k < views; ++k) {
      const int64_t p = order[k];
      const Vec3& s = proj.views[p].source_or_ray;
      for (int64_t col = 0; col < cols; ++col) {
        const Vec3 x = proj.PixelCenter(p, static_cast<double>(col), orow);
        const double rx = x.x - s.x, ry = x.y - s.y;
        const double gamma = std::atan2(-s.x * ry + s.y * rx, -s.x * rx - s.y * ry);
        setup.post_weights[p * cols + col] = static_cast<float>(NooWeight(b[k] + 0.5 * step, gamma, arc, smoothing));
      }
    }
  }
  const std::string filtering = "derivative + Hilbert filtering (Noo et al. 2002), weights after the filter";
  if (full) {
    setup.redundancy = "full scan: " + filtering + " (1/2 each)";
  } else if (weighted) {
    setup.redundancy =
        absl::StrFormat("short scan %.0f deg: %s (Noo's, %.0f deg smoothing)", arc * kDeg, filtering, smoothing_deg);
  } else {
    setup.redundancy =
        absl::StrFormat("short scan %.0f deg: %s: redundancy weights off (none, 1/2 each)", arc * kDeg, filtering);
  }
  return setup;
}

}  // namespace fbp
}  // namespace recon
}  // namespace tessera
