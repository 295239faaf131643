#include "kernels/reconstruction/fbp/redundancy_weights.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_format.h"
#include "kernels/reconstruction/fbp/fbp_setup.h"

namespace tessera {
namespace recon {
namespace fbp {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kDeg = 180.0 / kPi;

double Fold(double a, double period) {
  double f = std::fmod(a, period);
  if (f < 0) f += period;
  return f >= period ? 0.0 : f;
}

// The largest angular gap between consecutive views folded onto [0, period)
// and the folded angle of the view just after it (where the covered arc
// starts).
struct Gap {
  double size = 0;
  double arc_start = 0;
};

Gap LargestGap(const std::vector<double>& angles, double period) {
  std::vector<double> folded(angles.size());
  for (size_t p = 0; p < angles.size(); ++p) folded[p] = Fold(angles[p], period);
  std::sort(folded.begin(), folded.end());
  Gap gap{folded.front() + period - folded.back(), folded.front()};
  for (size_t p = 1; p < folded.size(); ++p) {
    if (folded[p] - folded[p - 1] > gap.size) gap = {folded[p] - folded[p - 1], folded[p]};
  }
  return gap;
}

absl::Status LimitedAngle(double covered, double needed, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "proj_geom: limited-angle scan: the views cover %.1f degrees but FBP/FDK needs at least %.1f (%s); the "
      "missing lines cannot be filtered back: use an iterative method (cgls, sart) for limited-angle data",
      covered * kDeg, needed * kDeg, what));
}

}  // namespace

double ParkerWeight(double b, double gamma, double delta) {
  if (b < 0 || b > kPi + 2 * delta) return 0.0;
  if (b < 2 * (delta - gamma)) {
    const double s = std::sin(0.25 * kPi * b / (delta - gamma));
    return s * s;
  }
  if (b <= kPi - 2 * gamma) return 1.0;
  const double s = std::sin(0.25 * kPi * (kPi + 2 * delta - b) / (delta + gamma));
  return s * s;
}

double OffsetDetectorWeight(double rho, double rho_short, int side) {
  const double x = side * rho;
  if (x <= -rho_short) return 0.0;
  if (x >= rho_short) return 1.0;
  const double s = std::sin(0.25 * kPi * (1.0 + x / rho_short));
  return s * s;
}

absl::StatusOr<RedundancyWeights> MakeRedundancyWeights(const ProjectionGeometry& proj, bool enabled) {
  const int64_t num_views = proj.num_views(), cols = proj.det_cols;
  const bool divergent = proj.beam != BeamKind::kParallel;
  std::vector<double> angles(num_views), radii(num_views);
  for (int64_t p = 0; p < num_views; ++p) {
    const Vec3& s = proj.views[p].source_or_ray;
    angles[p] = std::atan2(s.y, s.x);
    radii[p] = std::hypot(s.x, s.y);
  }
  RedundancyWeights out;
  const double period = divergent ? 2.0 * kPi : kPi;
  const bool full = num_views < 2 || LargestGap(angles, period).size <= 3.0 * period / static_cast<double>(num_views);

  if (!divergent) {
    // Lines repeat every pi: fold, share. The arc over 2 pi only names it.
    if (!full) {
      const Gap gap = LargestGap(angles, kPi);
      return LimitedAngle(kPi - gap.size + kPi / num_views, kPi, "parallel beam: 180 degrees");
    }
    out.shares = AngularWeights(angles, kPi);
    const Gap gap2 = LargestGap(angles, 2 * kPi);
    const double arc = num_views < 2 ? 0.0 : 2 * kPi - gap2.size + (2 * kPi - gap2.size) / (num_views - 1);
    out.description = arc > kPi * (1.0 + 1.5 / num_views)
                          ? absl::StrFormat("parallel beam over %.0f deg: views of the same direction share its weight",
                                            arc * kDeg)
                          : "parallel beam: complete, no redundancy weights needed";
    return out;
  }

  // Fan angle of every (view, column) in the xy plane, counter-clockwise
  // from the source->axis direction.
  const double orow = 0.5 * static_cast<double>(proj.det_rows - 1);
  std::vector<double> gamma(static_cast<size_t>(num_views * cols));
  double delta = 0;                           // half fan angle: largest |gamma|
  double rho_pos = HUGE_VAL, rho_neg = HUGE_VAL;  // reach on each side of the axis, least over views
  double pitch_at_axis = 0;
  for (int64_t p = 0; p < num_views; ++p) {
    const Vec3& s = proj.views[p].source_or_ray;
    double lo = HUGE_VAL, hi = -HUGE_VAL;
    for (int64_t c = 0; c < cols; ++c) {
      const Vec3 x = proj.PixelCenter(p, static_cast<double>(c), orow);
      const double rx = x.x - s.x, ry = x.y - s.y;
      const double g = std::atan2(-s.x * ry + s.y * rx, -s.x * rx - s.y * ry);
      gamma[p * cols + c] = g;
      lo = std::min(lo, g);
      hi = std::max(hi, g);
    }
    delta = std::max({delta, -lo, hi});
    rho_pos = std::min(rho_pos, radii[p] * std::sin(hi));
    rho_neg = std::min(rho_neg, -radii[p] * std::sin(lo));
    const Vec3& c = proj.views[p].det_center;
    const double dsd = std::hypot(c.x - s.x, c.y - s.y);
    pitch_at_axis = std::max(pitch_at_axis, std::hypot(proj.views[p].u.x, proj.views[p].u.y) * radii[p] / dsd);
  }
  const bool offset = std::fabs(rho_pos - rho_neg) > pitch_at_axis;
  const std::string off = enabled ? "" : ": redundancy weights off (none)";

  if (full) {
    out.shares = AngularWeights(angles, 2 * kPi);
    if (!offset) {
      out.description = enabled ? "full scan, centred detector: no redundancy weights needed" : "full scan" + off;
      return out;
    }
    const double rho_short = std::min(rho_pos, rho_neg);
    if (!enabled) {
      out.description = "full scan, offset detector" + off;
      return out;
    }
    if (!(rho_short > 0)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "proj_geom: the detector does not reach the rotation axis on one side (it covers %.2f mm and %.2f mm "
          "either side of it): the centre is never measured; set ct.redundancy_weights \"none\" to reconstruct "
          "anyway",
          rho_neg, rho_pos));
    }
    const int side = rho_pos > rho_neg ? 1 : -1;
    // Widen the detector on the short side by the columns it lacks against
    // the long side (most over the views, plus a margin of 2), if every view
    // has its short side at the same end.
    int64_t pad = 0, low_votes = 0;
    for (int64_t p = 0; p < num_views; ++p) {
      int64_t n_pos = 0, n_neg = 0;
      for (int64_t c = 0; c < cols; ++c) (gamma[p * cols + c] > 0 ? n_pos : n_neg) += 1;
      pad = std::max(pad, side > 0 ? n_pos - n_neg : n_neg - n_pos);
      const bool increasing = gamma[p * cols + cols - 1] > gamma[p * cols];
      low_votes += increasing == (side > 0) ? 1 : 0;  // column 0 on the short side
    }
    if (low_votes == 0 || low_votes == num_views) {
      out.pad_columns = pad + 2;
      out.pad_low = low_votes == num_views;
    }
    const int64_t wide = cols + out.pad_columns, col0 = out.pad_low ? out.pad_columns : 0;
    out.column_weights.resize(static_cast<size_t>(num_views * wide));
    for (int64_t p = 0; p < num_views; ++p) {
      const Vec3& s = proj.views[p].source_or_ray;
      for (int64_t c = 0; c < wide; ++c) {
        const Vec3 x = proj.PixelCenter(p, static_cast<double>(c - col0), orow);
        const double rx = x.x - s.x, ry = x.y - s.y;
        const double rho = radii[p] * std::sin(std::atan2(-s.x * ry + s.y * rx, -s.x * rx - s.y * ry));
        out.column_weights[p * wide + c] = static_cast<float>(2.0 * OffsetDetectorWeight(rho, rho_short, side));
      }
    }
    out.description = absl::StrFormat(
        "full scan, offset detector (rays within %.1f mm of the axis seen twice, out to %.1f mm once): Wang weights, "
        "%d zero columns added on the short side",
        rho_short, std::max(rho_pos, rho_neg), static_cast<int>(out.pad_columns));
    return out;
  }

  // Short scan: the views' arc counter-clockwise from the largest gap's end.
  const Gap gap = LargestGap(angles, 2 * kPi);
  const double step = (2 * kPi - gap.size) / static_cast<double>(num_views - 1);
  const double arc = 2 * kPi - gap.size + step;
  const double needed = kPi + 2 * delta;
  if (arc < needed - 1e-6) {
    return LimitedAngle(arc, needed, absl::StrFormat("180 + the fan angle %.1f", 2 * delta * kDeg));
  }
  if (offset && enabled) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "proj_geom: a short scan (%.0f degrees) with an offset detector is not supported: Parker weights need a "
        "centred detector (scan 360 degrees for offset-detector weights)",
        arc * kDeg));
  }
  // Arc positions, each view centred in its step; shares from the gaps
  // between them, the two end views taking half a step outward.
  std::vector<double> b(num_views);
  for (int64_t p = 0; p < num_views; ++p) b[p] = Fold(angles[p] - gap.arc_start, 2 * kPi) + 0.5 * step;
  std::vector<int64_t> order(num_views);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return b[x] < b[y]; });
  out.shares.assign(num_views, 0.0);
  for (int64_t k = 0; k < num_views; ++k) {
    const double prev = k > 0 ? b[order[k]] - b[order[k - 1]] : step;
    const double next = k + 1 < num_views ? b[order[k + 1]] - b[order[k]] : step;
    out.shares[order[k]] = 0.5 * (prev + next);
  }
  if (!enabled) {
    out.description = absl::StrFormat("short scan %.0f deg", arc * kDeg) + off;
    return out;
  }
  const double delta_scan = 0.5 * (arc - kPi);  // >= delta: an over-scan widens the transitions
  out.column_weights.resize(gamma.size());
  for (int64_t p = 0; p < num_views; ++p) {
    for (int64_t c = 0; c < cols; ++c) {
      out.column_weights[p * cols + c] = static_cast<float>(2.0 * ParkerWeight(b[p], gamma[p * cols + c], delta_scan));
    }
  }
  out.description = absl::StrFormat("short scan %.0f deg (180 + fan angle %.1f = %.1f deg needed): Parker weights",
                                    arc * kDeg, 2 * delta * kDeg, needed * kDeg);
  return out;
}

}  // namespace fbp
}  // namespace recon
}  // namespace tessera
