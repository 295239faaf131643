// Analytic phantoms: sums of constant-valued ellipses (2-D) or ellipsoids
// (3-D), whose line integrals are exact (chord length x value), so that
// reconstructions are tested against data no projector of ours produced (no
// inverse crime).
//
// World coordinates are the geometry's millimetres (kernels/reconstruction/geometry.h).
// A 2-D phantom lives in the z = 0 plane: its ellipses use only the x and y
// parts of centre, semi-axes and rotation, and points and rays are taken in
// the plane (z ignored), as 2-D geometries are.
#ifndef TESSERA_SERVICES_RECONSTRUCTION_PHANTOMS_PHANTOM_H_
#define TESSERA_SERVICES_RECONSTRUCTION_PHANTOMS_PHANTOM_H_

#include <array>
#include <vector>

#include "kernels/reconstruction/geometry.h"

namespace tessera::recon::phantoms {

struct Ellipsoid {
  double value = 0;  // added inside (overlaps add up, as in Shepp-Logan)
  Vec3 center;       // mm
  Vec3 semi_axes;    // mm, along the body axes (z unused in 2-D)
  // Row-major; column c is body axis c in world coordinates (a rotation).
  std::array<double, 9> rotation = {1, 0, 0, 0, 1, 0, 0, 0, 1};
};

// An ellipse/ellipsoid turned counterclockwise by `angle` (radians) about z.
Ellipsoid RotatedAboutZ(double value, Vec3 center, Vec3 semi_axes, double angle);

struct Phantom {
  bool is_2d = true;
  std::vector<Ellipsoid> ellipsoids;
};

// Toft's modified (high-contrast) Shepp-Logan head (the table of MATLAB's
// phantom('Modified Shepp-Logan')): its [-1, 1]^2 square scaled to `fov_mm`
// and centred on `center`. Values 0 (outside) to 1 (skull); brain 0.2-0.3.
Phantom SheppLogan2D(double fov_mm, Vec3 center = {});

// The 3-D version (Kak-Slaney ellipsoids with Toft's values, rotations about z
// only, as in ODL): its [-1, 1]^3 cube scaled to fov_mm in x and y and
// fov_z_mm in z. Its z = 0 section differs from the 2-D phantom only where
// ellipsoids 5-7 sit off-centre in z.
Phantom SheppLogan3D(double fov_mm, double fov_z_mm, Vec3 center = {});

// A disc (2-D) or ball (3-D) of `value`.
Phantom Disc(double radius_mm, double value, bool is_2d, Vec3 center = {});

// Sum of the values of the ellipsoids containing `point` (boundary included).
double ValueAt(const Phantom& phantom, const Vec3& point);

// Length (mm) of the intersection of the whole line {origin + t direction} with
// the ellipsoid; 0 if they miss. `direction` need not be unit; nonzero.
double ChordLength(const Ellipsoid& ellipsoid, bool is_2d, const Vec3& origin, const Vec3& direction);

// Sum over ellipsoids of value x chord length: the exact line integral
// (value x mm) along the whole line.
double LineIntegral(const Phantom& phantom, const Vec3& origin, const Vec3& direction);

}  // namespace tessera::recon::phantoms

#endif  // TESSERA_SERVICES_RECONSTRUCTION_PHANTOMS_PHANTOM_H_
