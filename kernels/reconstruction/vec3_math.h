// Vector arithmetic on the geometry's Vec3 (double): the per-view set-up of
// the projectors and FBP, never per voxel.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_VEC3_MATH_H_
#define TESSERA_KERNELS_RECONSTRUCTION_VEC3_MATH_H_

#include <cmath>

#include "kernels/reconstruction/geometry.h"

namespace tessera {
namespace recon {

inline Vec3 Add(const Vec3& a, const Vec3& b) { return {a.x + b.x, a.y + b.y, a.z + b.z}; }
inline Vec3 Sub(const Vec3& a, const Vec3& b) { return {a.x - b.x, a.y - b.y, a.z - b.z}; }
inline Vec3 Mul(double s, const Vec3& a) { return {s * a.x, s * a.y, s * a.z}; }
inline double Dot(const Vec3& a, const Vec3& b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
inline double Norm(const Vec3& a) { return std::sqrt(Dot(a, a)); }
inline bool Finite(const Vec3& a) { return std::isfinite(a.x) && std::isfinite(a.y) && std::isfinite(a.z); }
inline Vec3 Cross(const Vec3& a, const Vec3& b) {
  return {a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
}

// A view's detector frame: the unit normal n and the dual basis of (u, v) in
// the detector plane (u_hat . u = 1, u_hat . v = 0, u_hat . n = 0), so
// skewed detectors work. 2-D: n is u turned by -90 degrees, v_hat zero.
struct DetectorFrame {
  Vec3 n, u_hat, v_hat;
};
inline DetectorFrame DetectorFrameOf(const Vec3& u, const Vec3& v, bool is_2d) {
  DetectorFrame f;
  if (is_2d) {
    f.n = Mul(1.0 / Norm(u), Vec3{u.y, -u.x, 0});
    f.u_hat = Mul(1.0 / Dot(u, u), u);
    return f;
  }
  f.n = Cross(u, v);
  f.n = Mul(1.0 / Norm(f.n), f.n);
  const Vec3 vxn = Cross(v, f.n), nxu = Cross(f.n, u);
  f.u_hat = Mul(1.0 / Dot(u, vxn), vxn);
  f.v_hat = Mul(1.0 / Dot(v, nxu), nxu);
  return f;
}

}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_VEC3_MATH_H_
