#include "kernels/reconstruction/fbp/fbp_setup.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "kernels/reconstruction/fbp/redundancy_weights.h"
#include "kernels/reconstruction/vec3_math.h"

namespace tessera {
namespace recon {
namespace fbp {
namespace {

// A world-space affine map g . x + g0 rewritten over voxel indices (i, j, k).
void ToIndexSpace(const VolumeGeometry& vol, const Vec3& g, double g0, float out[4]) {
  const Vec3 first = vol.VoxelCenter(0, 0, 0);
  out[0] = static_cast<float>(g.x * vol.dx());
  out[1] = static_cast<float>(g.y * vol.dy());
  out[2] = static_cast<float>(g.z * vol.dz());
  out[3] = static_cast<float>(g0 + Dot(g, first));
}

void StoreVec(const Vec3& v, float out[3]) {
  out[0] = static_cast<float>(v.x);
  out[1] = static_cast<float>(v.y);
  out[2] = static_cast<float>(v.z);
}

}  // namespace

std::vector<double> AngularWeights(const std::vector<double>& angles, double period) {
  const size_t n = angles.size();
  std::vector<double> folded(n), weights(n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    double a = std::fmod(angles[i], period);
    if (a < 0) a += period;
    if (a >= period) a = 0;
    folded[i] = a;
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return folded[a] < folded[b]; });
  for (size_t s = 0; s < n; ++s) {
    const double cur = folded[order[s]];
    const double next = s + 1 < n ? folded[order[s + 1]] : folded[order[0]] + period;
    const double prev = s > 0 ? folded[order[s - 1]] : folded[order[n - 1]] - period;
    weights[order[s]] = 0.5 * ((next - cur) + (cur - prev));
  }
  return weights;
}

absl::StatusOr<FbpSetup> MakeFbpSetup(const CtGeometry& geometry, bool redundancy_weights) {
  if (absl::Status s = Validate(geometry); !s.ok()) return s;
  // Per-view shares and Parker / offset-detector column weights (and the
  // limited-angle refusal): redundancy_weights.h.
  TESSERA_ASSIGN_OR_RETURN(RedundancyWeights redundancy,
                           MakeRedundancyWeights(geometry.projection, redundancy_weights));
  const std::vector<double>& shares = redundancy.shares;

  FbpSetup setup;
  setup.column_weights = std::move(redundancy.column_weights);
  setup.redundancy = std::move(redundancy.description);
  setup.geometry = geometry;
  setup.input_cols = geometry.projection.det_cols;
  if (redundancy.pad_columns > 0) {
    // Widened detector: the same pixels at columns col0 .. col0 + input_cols - 1.
    ProjectionGeometry& wide = setup.geometry.projection;
    const int64_t pad = redundancy.pad_columns;
    setup.col0 = redundancy.pad_low ? pad : 0;
    wide.det_cols += pad;
    const double shift = 0.5 * static_cast<double>(pad) - static_cast<double>(setup.col0);
    for (ProjectionVectors& w : wide.views) w.det_center = Add(w.det_center, Mul(shift, w.u));
  }
  TESSERA_RETURN_IF_ERROR(ComputeViewConstants(shares, &setup));
  return setup;
}

absl::Status ComputeViewConstants(const std::vector<double>& shares, FbpSetup* setup_ptr) {
  FbpSetup& setup = *setup_ptr;
  const ProjectionGeometry& proj = setup.geometry.projection;
  const VolumeGeometry& vol = setup.geometry.volume;
  const bool divergent = proj.beam != BeamKind::kParallel;
  const double oc = 0.5 * static_cast<double>(proj.det_cols - 1);
  const double orow = 0.5 * static_cast<double>(proj.det_rows - 1);
  const int64_t num_views = proj.num_views();
  std::vector<double> radii(num_views, 0.0);
  for (int64_t p = 0; p < num_views; ++p) {
    radii[p] = std::hypot(proj.views[p].source_or_ray.x, proj.views[p].source_or_ray.y);
  }
  setup.pre.resize(num_views);
  setup.back.resize(num_views);
  for (int64_t p = 0; p < num_views; ++p) {
    const ProjectionVectors& w = proj.views[p];
    const std::string where = absl::StrCat("proj_geom.Vectors row ", p, ": ");
    const Vec3 c = w.det_center, u = w.u, v = proj.is_2d ? Vec3{} : w.v;
    const DetectorFrame frame = DetectorFrameOf(u, v, proj.is_2d);
    Vec3 n = frame.n;
    const Vec3 uh = frame.u_hat, vh = frame.v_hat;
    PreWeightView& pre = setup.pre[p];
    BackprojectView& back = setup.back[p];
    StoreVec(u, pre.u);
    StoreVec(v, pre.v);
    if (!divergent) {
      const Vec3 d = Mul(1.0 / Norm(w.source_or_ray), w.source_or_ray);
      if (Dot(d, n) < 0) n = Mul(-1.0, n);
      // Follow the ray from the voxel to the detector plane: x + t d.
      const double kap_u = Dot(d, uh) / Dot(d, n), kap_v = Dot(d, vh) / Dot(d, n);
      const Vec3 ga = Sub(uh, Mul(kap_u, n)), gb = Sub(vh, Mul(kap_v, n));
      ToIndexSpace(vol, ga, oc - Dot(c, ga), back.a);
      ToIndexSpace(vol, gb, orow - Dot(c, gb), back.b);
      back.d[0] = back.d[1] = back.d[2] = 0.0f;
      back.d[3] = 1.0f;
      const double tau = Norm(Sub(u, Mul(Dot(u, d), d)));  // pixel width across the rays
      StoreVec(Vec3{}, pre.to_center);
      pre.dsd = 1.0f;
      pre.divergent = 0.0f;
      pre.scale = static_cast<float>(shares[p] / tau);
      continue;
    }
    const Vec3 s = w.source_or_ray;
    if (Dot(Sub(c, s), n) < 0) n = Mul(-1.0, n);
    const double dsd = Dot(Sub(c, s), n);
    // Cone projection x -> s + (x - s) / D with D = (x - s) . n / DSD.
    const double alpha = Dot(Sub(s, c), uh) + oc, beta = Dot(Sub(s, c), vh) + orow;
    const double sn = Dot(s, n) / dsd;
    ToIndexSpace(vol, Add(Mul(alpha / dsd, n), uh), -alpha * sn - Dot(s, uh), back.a);
    ToIndexSpace(vol, Add(Mul(beta / dsd, n), vh), -beta * sn - Dot(s, vh), back.b);
    ToIndexSpace(vol, Mul(1.0 / dsd, n), -sn, back.d);
    // Every voxel must lie in front of the source (D > 0 at the box's corners).
    for (int corner = 0; corner < 8; ++corner) {
      const Vec3 x{(corner & 1) ? vol.max_x : vol.min_x, (corner & 2) ? vol.max_y : vol.min_y,
                   (corner & 4) ? vol.max_z : vol.min_z};
      if (Dot(Sub(x, s), n) <= 1e-9 * dsd) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%svolume corner (%g, %g, %g) lies behind the source: FBP needs the volume between source and "
            "detector",
            where, x.x, x.y, x.z));
      }
    }
    StoreVec(Sub(c, s), pre.to_center);
    pre.dsd = static_cast<float>(dsd);
    pre.divergent = 1.0f;
    const double tau = Norm(u);
    pre.scale = static_cast<float>(shares[p] * radii[p] / (2.0 * dsd * tau));
  }
  return absl::OkStatus();
}

}  // namespace fbp
}  // namespace recon
}  // namespace tessera
