#include "kernels/reconstruction/geometry.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/reconstruction/vec3_math.h"

namespace tessera {
namespace recon {
namespace {

absl::Status CheckVolume(const VolumeGeometry& v) {
  if (v.nx <= 0) return absl::InvalidArgumentError(absl::StrCat("vol_geom.GridColCount must be positive, got ", v.nx));
  if (v.ny <= 0) return absl::InvalidArgumentError(absl::StrCat("vol_geom.GridRowCount must be positive, got ", v.ny));
  if (v.nz <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("vol_geom.GridSliceCount must be positive, got ", v.nz));
  }
  const struct {
    const char* name;
    double lo, hi;
  } axes[] = {{"X", v.min_x, v.max_x}, {"Y", v.min_y, v.max_y}, {"Z", v.min_z, v.max_z}};
  for (const auto& a : axes) {
    if (!std::isfinite(a.lo) || !std::isfinite(a.hi) || !(a.hi > a.lo)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "vol_geom.Option.WindowMin%s/WindowMax%s must be finite with min < max, got [%g, %g]", a.name, a.name, a.lo,
          a.hi));
    }
  }
  const int64_t kMaxVoxels = int64_t{1} << 34;  // 64 GiB of float: beyond any one GPU
  if (v.nx > kMaxVoxels / v.ny / v.nz) {
    return absl::InvalidArgumentError(absl::StrCat("vol_geom: ", v.nx, "x", v.ny, "x", v.nz, " voxels is too large"));
  }
  return absl::OkStatus();
}

}  // namespace

VolumeGeometry CenteredVolume(int64_t nx, int64_t ny, int64_t nz) {
  VolumeGeometry v;
  v.nx = nx;
  v.ny = ny;
  v.nz = nz;
  v.min_x = -0.5 * nx;
  v.max_x = 0.5 * nx;
  v.min_y = -0.5 * ny;
  v.max_y = 0.5 * ny;
  v.min_z = -0.5 * nz;
  v.max_z = 0.5 * nz;
  return v;
}

const char* BeamKindName(BeamKind kind) {
  switch (kind) {
    case BeamKind::kParallel:
      return "parallel";
    case BeamKind::kFan:
      return "fan";
    case BeamKind::kCone:
      return "cone";
  }
  return "?";
}

Vec3 ProjectionGeometry::PixelCenter(int64_t p, double col, double row) const {
  const ProjectionVectors& w = views[p];
  const double a = col - 0.5 * (det_cols - 1);
  const double b = row - 0.5 * (det_rows - 1);
  return {w.det_center.x + a * w.u.x + b * w.v.x, w.det_center.y + a * w.u.y + b * w.v.y,
          w.det_center.z + a * w.u.z + b * w.v.z};
}

absl::Status Validate(const CtGeometry& g) {
  if (absl::Status s = CheckVolume(g.volume); !s.ok()) return s;
  const ProjectionGeometry& p = g.projection;
  if (p.det_cols <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("proj_geom.DetectorCount / DetectorColCount must be positive, got ",
                                                   p.det_cols));
  }
  if (p.det_rows <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("proj_geom.DetectorRowCount must be positive, got ", p.det_rows));
  }
  if (p.views.empty()) {
    return absl::InvalidArgumentError("proj_geom.ProjectionAngles / Vectors: no projections");
  }
  if (p.is_2d != (p.beam != BeamKind::kCone)) {
    return absl::InvalidArgumentError("proj_geom: parallel and fanflat geometries are 2-D, cone is 3-D");
  }
  if (p.is_2d && (g.volume.nz != 1 || p.det_rows != 1)) {
    return absl::InvalidArgumentError(absl::StrCat("vol_geom: a 2-D ", BeamKindName(p.beam),
                                                   " geometry needs a 2-D volume (GridSliceCount 1), got ",
                                                   g.volume.nz, " slices"));
  }
  const VolumeGeometry& v = g.volume;
  const Vec3 centre{0.5 * (v.min_x + v.max_x), 0.5 * (v.min_y + v.max_y), p.is_2d ? 0.0 : 0.5 * (v.min_z + v.max_z)};
  const double hx = 0.5 * (v.max_x - v.min_x), hy = 0.5 * (v.max_y - v.min_y);
  const double hz = p.is_2d ? 0.0 : 0.5 * (v.max_z - v.min_z);
  const double radius = std::sqrt(hx * hx + hy * hy + hz * hz);
  for (int64_t i = 0; i < p.num_views(); ++i) {
    const ProjectionVectors& w = p.views[i];
    const std::string where = absl::StrCat("proj_geom.Vectors row ", i, ": ");
    if (!Finite(w.source_or_ray) || !Finite(w.det_center) || !Finite(w.u) || !Finite(w.v)) {
      return absl::InvalidArgumentError(where + "not finite");
    }
    if (Norm(w.u) <= 0) return absl::InvalidArgumentError(where + "detector step u is zero");
    if (p.is_2d) {
      if (w.source_or_ray.z != 0 || w.det_center.z != 0 || w.u.z != 0) {
        return absl::InvalidArgumentError(where + "a 2-D geometry must lie in the z = 0 plane");
      }
    } else if (Norm(w.v) <= 0) {
      return absl::InvalidArgumentError(where + "detector step v is zero");
    }
    // Direction of the central ray, and the detector normal.
    Vec3 dir = w.source_or_ray;
    if (p.beam != BeamKind::kParallel) {
      dir = {w.det_center.x - w.source_or_ray.x, w.det_center.y - w.source_or_ray.y,
             w.det_center.z - w.source_or_ray.z};
    }
    if (Norm(dir) <= 0) return absl::InvalidArgumentError(where + "ray direction is zero (source on the detector?)");
    const Vec3 normal = p.is_2d ? Vec3{w.u.y, -w.u.x, 0} : Cross(w.u, w.v);
    if (std::fabs(Dot(normal, dir)) < 1e-6 * Norm(normal) * Norm(dir)) {
      return absl::InvalidArgumentError(where + "rays run parallel to the detector");
    }
    if (p.beam != BeamKind::kParallel) {
      const Vec3 s = w.source_or_ray;
      const Vec3 rel{s.x - centre.x, s.y - centre.y, s.z - centre.z};
      if (Norm(rel) <= radius) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%ssource at distance %.6g mm from the volume centre lies inside the volume (radius %.6g mm): "
            "DistanceOriginSource too small or window too large",
            where, Norm(rel), radius));
      }
    }
  }
  return absl::OkStatus();
}

ProjectionGeometry ParallelBeam2D(const std::vector<double>& angles, double det_width, int64_t det_count) {
  ProjectionGeometry p;
  p.beam = BeamKind::kParallel;
  p.is_2d = true;
  p.det_cols = det_count;
  p.det_rows = 1;
  for (double a : angles) {
    ProjectionVectors w;
    w.source_or_ray = {std::sin(a), -std::cos(a), 0};
    w.det_center = {0, 0, 0};
    w.u = {det_width * std::cos(a), det_width * std::sin(a), 0};
    p.views.push_back(w);
  }
  return p;
}

ProjectionGeometry FanBeam2D(const std::vector<double>& angles, double det_width, int64_t det_count,
                             double source_origin, double origin_detector) {
  ProjectionGeometry p;
  p.beam = BeamKind::kFan;
  p.is_2d = true;
  p.det_cols = det_count;
  p.det_rows = 1;
  for (double a : angles) {
    ProjectionVectors w;
    w.source_or_ray = {std::sin(a) * source_origin, -std::cos(a) * source_origin, 0};
    w.det_center = {-std::sin(a) * origin_detector, std::cos(a) * origin_detector, 0};
    w.u = {det_width * std::cos(a), det_width * std::sin(a), 0};
    p.views.push_back(w);
  }
  return p;
}

ProjectionGeometry ConeBeam(const std::vector<double>& angles, double spacing_x, double spacing_y, int64_t det_rows,
                            int64_t det_cols, double source_origin, double origin_detector) {
  ProjectionGeometry p;
  p.beam = BeamKind::kCone;
  p.is_2d = false;
  p.det_cols = det_cols;
  p.det_rows = det_rows;
  for (double a : angles) {
    ProjectionVectors w;
    w.source_or_ray = {std::sin(a) * source_origin, -std::cos(a) * source_origin, 0};
    w.det_center = {-std::sin(a) * origin_detector, std::cos(a) * origin_detector, 0};
    w.u = {std::cos(a) * spacing_x, std::sin(a) * spacing_x, 0};
    w.v = {0, 0, spacing_y};
    p.views.push_back(w);
  }
  return p;
}

std::vector<double> EvenAngles(int64_t count, double range) {
  std::vector<double> angles(count);
  for (int64_t i = 0; i < count; ++i) angles[i] = range * static_cast<double>(i) / static_cast<double>(count);
  return angles;
}

std::vector<float> PackViews(const ProjectionGeometry& projection) {
  std::vector<float> out;
  out.reserve(projection.views.size() * kFloatsPerView);
  for (const ProjectionVectors& w : projection.views) {
    for (const Vec3& v : {w.source_or_ray, w.det_center, w.u, w.v}) {
      out.push_back(static_cast<float>(v.x));
      out.push_back(static_cast<float>(v.y));
      out.push_back(static_cast<float>(v.z));
    }
  }
  return out;
}

std::string Describe(const CtGeometry& g) {
  const ProjectionGeometry& p = g.projection;
  const VolumeGeometry& v = g.volume;
  std::string det = p.is_2d ? absl::StrCat(p.det_cols, " cols") : absl::StrCat(p.det_rows, "x", p.det_cols);
  return absl::StrFormat("%s %s, %d views x %s; volume %dx%dx%d of %.4gx%.4gx%.4g mm", BeamKindName(p.beam),
                         p.is_2d ? "2-D" : "3-D", p.num_views(), det, v.nx, v.ny, v.nz, v.dx(), v.dy(), v.dz());
}

}  // namespace recon
}  // namespace tessera
