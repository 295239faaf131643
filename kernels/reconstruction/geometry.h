// Tomographic geometry shared by every reconstruction kernel (CT and PET).
//
// All geometries are normalised to ASTRA's *vector* form, one row per
// projection, in world millimetres:
//   - parallel beams: `ray` is the ray direction (any length);
//   - fan and cone beams: `source` is the source position;
//   - `det_center` is the detector centre, `u` the step from one detector
//     column to the next and `v` the step from one detector row to the next
//     (v is zero in 2-D).
// Detector pixel (col c, row r) of a projection sits at
//   det_center + (c - (cols - 1) / 2) u + (r - (rows - 1) / 2) v.
// ASTRA's angle-based forms (`parallel`, `fanflat`, `cone`) are converted by
// the builders below with ASTRA's own formulas, so a user's geometry means the
// same rays here as there.
//
// Memory layouts (host and device alike):
//   - volumes are x-fastest: voxel (i, j, k) is at i + nx * (j + ny * k), and
//     its centre is (min_x + (i + 1/2) dx, min_y + (j + 1/2) dy, min_z + (k + 1/2) dz).
//     (Index j grows with y. ASTRA's 2-D images store row 0 at max y; we do
//     not, and every volume we write carries a NIfTI affine that says which
//     way is which.)
//   - sinograms are detector column fastest, then detector row, then
//     projection: element (c, r, p) is at c + cols * (r + rows * p).
// 2-D geometries have nz == 1 and rows == 1; their line integrals lie in the
// z = 0 plane and the slab thickness never enters (units: value x mm).
#ifndef TESSERA_KERNELS_RECONSTRUCTION_GEOMETRY_H_
#define TESSERA_KERNELS_RECONSTRUCTION_GEOMETRY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

#if defined(__CUDACC__)
#define TESSERA_RECON_HD __host__ __device__
#else
#define TESSERA_RECON_HD
#endif

namespace tessera {
namespace recon {

struct Vec3 {
  double x = 0, y = 0, z = 0;
};

// The reconstruction grid. Edges, not centres: voxel size = (max - min) / n.
struct VolumeGeometry {
  int64_t nx = 0, ny = 0, nz = 1;
  double min_x = 0, max_x = 0;
  double min_y = 0, max_y = 0;
  double min_z = -0.5, max_z = 0.5;

  int64_t size() const { return nx * ny * nz; }
  double dx() const { return (max_x - min_x) / static_cast<double>(nx); }
  double dy() const { return (max_y - min_y) / static_cast<double>(ny); }
  double dz() const { return (max_z - min_z) / static_cast<double>(nz); }
  Vec3 VoxelCenter(int64_t i, int64_t j, int64_t k) const {
    return {min_x + (i + 0.5) * dx(), min_y + (j + 0.5) * dy(), min_z + (k + 0.5) * dz()};
  }
};

// ASTRA's default: 1 mm voxels centred on the origin (nz = 1 gives a 2-D
// slice 1 mm thick around z = 0).
VolumeGeometry CenteredVolume(int64_t nx, int64_t ny, int64_t nz = 1);

enum class BeamKind { kParallel, kFan, kCone };

const char* BeamKindName(BeamKind kind);

struct ProjectionVectors {
  Vec3 source_or_ray;  // source position (fan, cone) or ray direction (parallel)
  Vec3 det_center;
  Vec3 u;
  Vec3 v;  // zero in 2-D
};

struct ProjectionGeometry {
  BeamKind beam = BeamKind::kParallel;
  bool is_2d = true;  // parallel and fanflat: true; cone: false
  int64_t det_cols = 0;
  int64_t det_rows = 1;  // 1 in 2-D
  std::vector<ProjectionVectors> views;

  int64_t num_views() const { return static_cast<int64_t>(views.size()); }
  int64_t sinogram_size() const { return det_cols * det_rows * num_views(); }
  // World position of the centre of detector pixel (col, row) in view p.
  Vec3 PixelCenter(int64_t p, double col, double row) const;
};

struct CtGeometry {
  VolumeGeometry volume;
  ProjectionGeometry projection;
};

// OK, or INVALID_ARGUMENT naming the offending field the way the geometry
// JSON does ("vol_geom.GridColCount must be positive", "proj_geom.Vectors row
// 3: u is zero", "DistanceOriginSource must exceed ..."): positive sizes, finite
// numbers, non-degenerate vectors, 2-D geometry with a 2-D volume, the source
// outside the volume's bounding sphere for fan and cone beams, and the ray not
// parallel to the detector.
absl::Status Validate(const CtGeometry& geometry);

// ASTRA's angle-based geometries, converted with ASTRA's formulas
// (astra/GeometryUtil2D.cpp, GeometryUtil3D.cpp):
//   parallel: ray = (sin a, -cos a), d = 0, u = w (cos a, sin a)
//   fanflat:  s = (sin a, -cos a) DSO, d = (-sin a, cos a) DOD, u = w (cos a, sin a)
//   cone:     s = (sin a, -cos a, 0) DSO, d = (-sin a, cos a, 0) DOD,
//             u = sx (cos a, sin a, 0), v = (0, 0, sy)
ProjectionGeometry ParallelBeam2D(const std::vector<double>& angles, double det_width, int64_t det_count);
ProjectionGeometry FanBeam2D(const std::vector<double>& angles, double det_width, int64_t det_count,
                             double source_origin, double origin_detector);
ProjectionGeometry ConeBeam(const std::vector<double>& angles, double spacing_x, double spacing_y,
                            int64_t det_rows, int64_t det_cols, double source_origin, double origin_detector);

// `count` angles evenly spaced over [0, range): range is pi for parallel
// beams, 2 pi for full fan/cone scans.
std::vector<double> EvenAngles(int64_t count, double range);

// Single-precision copy of the vectors for kernels: 12 floats per view in the
// order source_or_ray, det_center, u, v (x, y, z each).
std::vector<float> PackViews(const ProjectionGeometry& projection);
constexpr int kFloatsPerView = 12;

// "parallel 2-D, 180 views x 256 cols; volume 256x256x1 of 1x1x1 mm".
std::string Describe(const CtGeometry& geometry);

}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_GEOMETRY_H_
