// Internal to the phantoms package: an ellipsoid's map to the unit ball,
// q = M (p - center) with M = diag(1 / semi_axes) R^T, so that p is inside
// when |q| <= 1 and chords are solved on the unit sphere.
#ifndef TESSERA_SERVICES_RECONSTRUCTION_PHANTOMS_UNIT_FRAME_H_
#define TESSERA_SERVICES_RECONSTRUCTION_PHANTOMS_UNIT_FRAME_H_

#include <cmath>

#include "services/reconstruction/phantoms/phantom.h"

namespace tessera::recon::phantoms {

struct UnitFrame {
  Vec3 center;
  double m[9];
  bool is_2d;

  UnitFrame(const Ellipsoid& e, bool two_d) : center(e.center), is_2d(two_d) {
    const double inv[3] = {1 / e.semi_axes.x, 1 / e.semi_axes.y, two_d ? 0.0 : 1 / e.semi_axes.z};
    for (int r = 0; r < 3; ++r) {
      for (int c = 0; c < 3; ++c) m[r * 3 + c] = inv[r] * e.rotation[c * 3 + r];  // diag(inv) R^T
    }
    if (two_d) {  // only the in-plane block: the ellipse's own rotation about z
      m[2] = m[5] = 0;
      center.z = 0;
    }
  }

  // M v for a direction (no centre shift); z is ignored in 2-D.
  Vec3 Apply(const Vec3& v) const {
    const double z = is_2d ? 0.0 : v.z;
    return {m[0] * v.x + m[1] * v.y + m[2] * z, m[3] * v.x + m[4] * v.y + m[5] * z,
            m[6] * v.x + m[7] * v.y + m[8] * z};
  }
  Vec3 ToUnit(const Vec3& p) const { return Apply({p.x - center.x, p.y - center.y, p.z - center.z}); }
  bool Contains(const Vec3& p) const {
    const Vec3 q = ToUnit(p);
    return q.x * q.x + q.y * q.y + q.z * q.z <= 1.0;
  }
};

}  // namespace tessera::recon::phantoms

#endif  // TESSERA_SERVICES_RECONSTRUCTION_PHANTOMS_UNIT_FRAME_H_
