#include "services/reconstruction/phantoms/phantom.h"

#include <cmath>

#include "services/reconstruction/phantoms/unit_frame.h"

namespace tessera::recon::phantoms {
namespace {

constexpr double kDegree = 3.14159265358979323846 / 180.0;

// Modified Shepp-Logan (Toft): value, semi-axes a b c, centre x y z, angle
// about z in degrees; unit-cube coordinates. The 2-D table is the z = 0 one
// without c and z.
struct Row {
  double value, a, b, c, x, y, z, degrees;
};
constexpr Row kSheppLogan3D[] = {
    {1.0, .6900, .920, .810, 0, 0, 0, 0},          {-.8, .6624, .874, .780, 0, -.0184, 0, 0},
    {-.2, .1100, .310, .220, .22, 0, 0, -18},      {-.2, .1600, .410, .280, -.22, 0, 0, 18},
    {.1, .2100, .250, .410, 0, .35, -.15, 0},      {.1, .0460, .046, .050, 0, .1, .25, 0},
    {.1, .0460, .046, .050, 0, -.1, .25, 0},       {.1, .0460, .023, .050, -.08, -.605, 0, 0},
    {.1, .0230, .023, .020, 0, -.606, 0, 0},       {.1, .0230, .046, .020, .06, -.605, 0, 0},
};

Phantom SheppLogan(bool is_2d, double half_xy, double half_z, Vec3 center) {
  Phantom p;
  p.is_2d = is_2d;
  for (const Row& r : kSheppLogan3D) {
    const Vec3 c{center.x + half_xy * r.x, center.y + half_xy * r.y, is_2d ? 0.0 : center.z + half_z * r.z};
    const Vec3 axes{half_xy * r.a, half_xy * r.b, is_2d ? 1.0 : half_z * r.c};
    p.ellipsoids.push_back(RotatedAboutZ(r.value, c, axes, r.degrees * kDegree));
  }
  return p;
}

}  // namespace

Ellipsoid RotatedAboutZ(double value, Vec3 center, Vec3 semi_axes, double angle) {
  Ellipsoid e;
  e.value = value;
  e.center = center;
  e.semi_axes = semi_axes;
  const double c = std::cos(angle), s = std::sin(angle);
  e.rotation = {c, -s, 0, s, c, 0, 0, 0, 1};
  return e;
}

Phantom SheppLogan2D(double fov_mm, Vec3 center) { return SheppLogan(true, 0.5 * fov_mm, 1.0, center); }

Phantom SheppLogan3D(double fov_mm, double fov_z_mm, Vec3 center) {
  return SheppLogan(false, 0.5 * fov_mm, 0.5 * fov_z_mm, center);
}

Phantom Disc(double radius_mm, double value, bool is_2d, Vec3 center) {
  Phantom p;
  p.is_2d = is_2d;
  if (is_2d) center.z = 0;
  p.ellipsoids.push_back(RotatedAboutZ(value, center, {radius_mm, radius_mm, is_2d ? 1.0 : radius_mm}, 0));
  return p;
}

double ValueAt(const Phantom& phantom, const Vec3& point) {
  double sum = 0;
  for (const Ellipsoid& e : phantom.ellipsoids) {
    if (UnitFrame(e, phantom.is_2d).Contains(point)) sum += e.value;
  }
  return sum;
}

double ChordLength(const Ellipsoid& e, bool is_2d, const Vec3& origin, const Vec3& direction) {
  const UnitFrame f(e, is_2d);
  Vec3 d = direction;
  Vec3 o = origin;
  if (is_2d) d.z = o.z = 0;
  const double norm = std::sqrt(d.x * d.x + d.y * d.y + d.z * d.z);
  if (!(norm > 0)) return 0;
  d = {d.x / norm, d.y / norm, d.z / norm};
  // Start from the point of the line nearest the centre: the quadratic is then
  // well conditioned even for a source far away from a small ellipse.
  const double t = (f.center.x - o.x) * d.x + (f.center.y - o.y) * d.y + (f.center.z - o.z) * d.z;
  o = {o.x + t * d.x, o.y + t * d.y, o.z + t * d.z};
  const Vec3 q0 = f.ToUnit(o), q1 = f.Apply(d);
  const double a = q1.x * q1.x + q1.y * q1.y + q1.z * q1.z;
  const double b = q0.x * q1.x + q0.y * q1.y + q0.z * q1.z;
  const double c = q0.x * q0.x + q0.y * q0.y + q0.z * q0.z - 1.0;
  const double disc = b * b - a * c;
  return disc > 0 ? 2.0 * std::sqrt(disc) / a : 0.0;
}

double LineIntegral(const Phantom& phantom, const Vec3& origin, const Vec3& direction) {
  double sum = 0;
  for (const Ellipsoid& e : phantom.ellipsoids) sum += e.value * ChordLength(e, phantom.is_2d, origin, direction);
  return sum;
}

}  // namespace tessera::recon::phantoms
