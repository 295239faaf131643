// Small geometries of every kind the projector supports, for its tests.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_CT_DD_TEST_GEOMETRIES_H_
#define TESSERA_KERNELS_RECONSTRUCTION_CT_DD_TEST_GEOMETRIES_H_

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/reconstruction/geometry.h"

namespace tessera {
namespace recon {
namespace ct {
namespace testing {

struct NamedGeometry {
  std::string name;
  CtGeometry geometry;
};

inline CtGeometry Parallel2D(int n = 32, int views = 24, int cols = 48, double width = 1.0) {
  return {CenteredVolume(n, n), ParallelBeam2D(EvenAngles(views, M_PI), width, cols)};
}

// Source at 60 mm (2n for larger images, so it stays outside the volume).
inline CtGeometry Fan2D(int n = 32, int views = 24, int cols = 48) {
  const double dso = std::max(60.0, 2.0 * n), dod = std::max(40.0, 1.25 * n);
  return {CenteredVolume(n, n), FanBeam2D(EvenAngles(views, 2 * M_PI), 1.5, cols, dso, dod)};
}

inline CtGeometry Cone3D(int n = 16, int views = 12, int rows = 20, int cols = 24) {
  return {CenteredVolume(n, n, n), ConeBeam(EvenAngles(views, 2 * M_PI), 1.5, 1.5, rows, cols, 50.0, 30.0)};
}

// An arbitrary cone_vec geometry: a helical-ish source path (z rising,
// radius wobbling), a detector shifted off the central ray, rolled about it
// (so u has a z component and v an in-plane one) and pitched (not
// perpendicular to the central ray), non-square cells and voxels.
inline CtGeometry ConeVec(int n = 16, int views = 12, int rows = 18, int cols = 22, double roll_degrees = 5,
                          double pitch_degrees = 8) {
  CtGeometry g;
  g.volume = CenteredVolume(n, n + 2, n - 2);
  g.volume.min_x *= 1.1, g.volume.max_x *= 1.1;  // 1.1 mm voxels along x
  ProjectionGeometry& p = g.projection;
  p.beam = BeamKind::kCone;
  p.is_2d = false;
  p.det_rows = rows;
  p.det_cols = cols;
  const double roll = roll_degrees * M_PI / 180, pitch = pitch_degrees * M_PI / 180;
  for (int i = 0; i < views; ++i) {
    const double a = 2 * M_PI * i / views + 0.1;
    const double radius = 48 + 2 * std::sin(3 * a);
    const Vec3 s{radius * std::sin(a), -radius * std::cos(a), -5.0 + 10.0 * i / views};
    Vec3 n_dir{-std::sin(a), std::cos(a), 0.02};
    const double nn = std::sqrt(n_dir.x * n_dir.x + n_dir.y * n_dir.y + n_dir.z * n_dir.z);
    n_dir = {n_dir.x / nn, n_dir.y / nn, n_dir.z / nn};
    const Vec3 u0{std::cos(a), std::sin(a), 0}, v0{0, 0, 1};
    const Vec3 u1{std::cos(roll) * u0.x + std::sin(roll) * v0.x, std::cos(roll) * u0.y + std::sin(roll) * v0.y,
                  std::cos(roll) * u0.z + std::sin(roll) * v0.z};
    const Vec3 v1{-std::sin(roll) * u0.x + std::cos(roll) * v0.x, -std::sin(roll) * u0.y + std::cos(roll) * v0.y,
                  -std::sin(roll) * u0.z + std::cos(roll) * v0.z};
    const Vec3 v2{std::cos(pitch) * v1.x + std::sin(pitch) * n_dir.x,
                  std::cos(pitch) * v1.y + std::sin(pitch) * n_dir.y,
                  std::cos(pitch) * v1.z + std::sin(pitch) * n_dir.z};
    ProjectionVectors w;
    w.source_or_ray = s;
    w.u = {1.4 * u1.x, 1.4 * u1.y, 1.4 * u1.z};
    w.v = {1.3 * v2.x, 1.3 * v2.y, 1.3 * v2.z};
    const double dist = 82;
    w.det_center = {s.x + dist * n_dir.x + 0.3 * w.u.x - 0.7 * w.v.x, s.y + dist * n_dir.y + 0.3 * w.u.y - 0.7 * w.v.y,
                    s.z + dist * n_dir.z + 0.3 * w.u.z - 0.7 * w.v.z};
    p.views.push_back(w);
  }
  return g;
}

// A circular cone with cells of `pixel` mm (1 mm voxels, magnification 1.6).
inline CtGeometry ConeCells(int n, int views, int rows, int cols, double pixel) {
  return {CenteredVolume(n, n, n), ConeBeam(EvenAngles(views, 2 * M_PI), pixel, pixel, rows, cols, 50.0, 30.0)};
}

// Cone3D with the detector's v reversed: rows run down in z.
inline CtGeometry ConeFlippedV(int n = 16, int views = 12, int rows = 20, int cols = 24) {
  CtGeometry g = Cone3D(n, views, rows, cols);
  for (ProjectionVectors& w : g.projection.views) w.v = {-w.v.x, -w.v.y, -w.v.z};
  return g;
}

inline std::vector<NamedGeometry> AllKinds() {
  return {{"parallel2d", Parallel2D()}, {"fan2d", Fan2D()}, {"cone3d", Cone3D()}, {"cone_vec", ConeVec()}};
}

// Larger ones: many blocks per view, more than one 16-view tile in the CUDA
// back kernel.
inline std::vector<NamedGeometry> LargerKinds() {
  return {{"parallel2d_128", Parallel2D(128, 90, 192)},
          {"fan2d_96", Fan2D(96, 60, 160)},
          {"cone3d_40", Cone3D(40, 36, 48, 56)},
          {"cone_vec_24", ConeVec(24, 40, 30, 36)}};
}

// Detector variants the back projection's searches must handle: cells much
// finer and coarser than the voxels, rows running down, a steeply rolled
// detector (the row-coupled box's margin grows with the roll).
inline std::vector<NamedGeometry> VariantKinds() {
  return {{"cone3d_fine_cells", ConeCells(14, 8, 48, 56, 0.45)},
          {"cone3d_coarse_cells", ConeCells(14, 8, 6, 8, 3.1)},
          {"cone3d_flipped_v", ConeFlippedV(14, 10, 18, 22)},
          {"cone_vec_roll25", ConeVec(14, 10, 20, 24, 25, 8)}};
}

// Tiny versions for explicit-matrix tests, with detector cells both finer
// and coarser than the voxels.
inline std::vector<NamedGeometry> TinyKinds() {
  return {{"parallel2d_fine", Parallel2D(7, 5, 11, 0.6)},
          {"parallel2d_coarse", Parallel2D(8, 6, 5, 2.3)},
          {"fan2d", Fan2D(8, 7, 9)},
          {"cone3d", Cone3D(5, 5, 5, 6)},
          {"cone_vec", ConeVec(5, 5, 4, 6)},
          {"cone3d_fine_cells", ConeCells(4, 3, 12, 14, 0.6)},
          {"cone3d_coarse_cells", ConeCells(5, 4, 3, 4, 2.8)},
          {"cone3d_flipped_v", ConeFlippedV(5, 4, 5, 6)},
          {"cone_vec_roll25", ConeVec(5, 4, 5, 6, 25, 8)}};
}

}  // namespace testing
}  // namespace ct
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_CT_DD_TEST_GEOMETRIES_H_
