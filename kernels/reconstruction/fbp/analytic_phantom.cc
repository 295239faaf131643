#include "kernels/reconstruction/fbp/analytic_phantom.h"

#include <cmath>

#include "kernels/reconstruction/vec3_math.h"

namespace tessera {
namespace recon {
namespace testing {
namespace {

// x in the ellipsoid's frame, scaled so the ellipsoid is the unit ball.
Vec3 ToUnit(const Ellipsoid& e, const Vec3& x, bool is_point) {
  const Vec3 d = is_point ? Vec3{x.x - e.center.x, x.y - e.center.y, x.z - e.center.z} : x;
  const double c = std::cos(e.angle), s = std::sin(e.angle);
  return {(c * d.x + s * d.y) / e.semi_axes.x, (-s * d.x + c * d.y) / e.semi_axes.y, d.z / e.semi_axes.z};
}

}  // namespace

double LineIntegral(const std::vector<Ellipsoid>& phantom, const Vec3& p0, const Vec3& dir) {
  const double len = std::sqrt(Dot(dir, dir));
  const Vec3 unit{dir.x / len, dir.y / len, dir.z / len};
  double sum = 0;
  for (const Ellipsoid& e : phantom) {
    // |q + t w|^2 = 1 has roots t1 < t2; the chord is t2 - t1 (t in mm).
    const Vec3 q = ToUnit(e, p0, true), w = ToUnit(e, unit, false);
    const double a = Dot(w, w), b = Dot(q, w), c = Dot(q, q) - 1.0;
    const double disc = b * b - a * c;
    if (disc > 0) sum += e.value * 2.0 * std::sqrt(disc) / a;
  }
  return sum;
}

std::vector<float> AnalyticSinogram(const ProjectionGeometry& proj, const std::vector<Ellipsoid>& phantom) {
  std::vector<float> sino(proj.sinogram_size());
  for (int64_t p = 0; p < proj.num_views(); ++p) {
    const Vec3& s = proj.views[p].source_or_ray;
    for (int64_t r = 0; r < proj.det_rows; ++r) {
      for (int64_t c = 0; c < proj.det_cols; ++c) {
        const Vec3 pix = proj.PixelCenter(p, static_cast<double>(c), static_cast<double>(r));
        const Vec3 dir = proj.beam == BeamKind::kParallel ? s : Vec3{pix.x - s.x, pix.y - s.y, pix.z - s.z};
        sino[(p * proj.det_rows + r) * proj.det_cols + c] = static_cast<float>(LineIntegral(phantom, pix, dir));
      }
    }
  }
  return sino;
}

std::vector<float> PhantomVolume(const VolumeGeometry& vol, const std::vector<Ellipsoid>& phantom) {
  std::vector<float> out(vol.size());
  for (int64_t k = 0; k < vol.nz; ++k) {
    for (int64_t j = 0; j < vol.ny; ++j) {
      for (int64_t i = 0; i < vol.nx; ++i) {
        const Vec3 x = vol.VoxelCenter(i, j, k);
        double v = 0;
        for (const Ellipsoid& e : phantom) {
          const Vec3 q = ToUnit(e, x, true);
          // 2-D volumes sit in z = 0 whatever their slab; only x, y count there.
          const double r2 = vol.nz == 1 ? q.x * q.x + q.y * q.y : Dot(q, q);
          if (r2 <= 1.0) v += e.value;
        }
        out[i + vol.nx * (j + vol.ny * k)] = static_cast<float>(v);
      }
    }
  }
  return out;
}

double MaskedRmse(const std::vector<float>& image, const std::vector<float>& truth, const std::vector<bool>& mask) {
  double sum = 0;
  int64_t n = 0;
  for (size_t i = 0; i < image.size(); ++i) {
    if (!mask[i]) continue;
    const double d = static_cast<double>(image[i]) - truth[i];
    sum += d * d;
    ++n;
  }
  return n > 0 ? std::sqrt(sum / static_cast<double>(n)) : 0.0;
}

double MaskedNrmse(const std::vector<float>& image, const std::vector<float>& truth, const std::vector<bool>& mask) {
  const std::vector<float> zero(truth.size(), 0.0f);
  const double rms = MaskedRmse(truth, zero, mask);
  return rms > 0 ? MaskedRmse(image, truth, mask) / rms : 0.0;
}

std::vector<bool> InteriorMask(const VolumeGeometry& vol, const std::vector<Ellipsoid>& phantom, double margin) {
  std::vector<Ellipsoid> shrunk = phantom, grown = phantom;
  for (size_t e = 0; e < phantom.size(); ++e) {
    for (double* a : {&shrunk[e].semi_axes.x, &shrunk[e].semi_axes.y, &shrunk[e].semi_axes.z}) *a -= margin;
    for (double* a : {&grown[e].semi_axes.x, &grown[e].semi_axes.y, &grown[e].semi_axes.z}) *a += margin;
  }
  const std::vector<float> in = PhantomVolume(vol, shrunk), out = PhantomVolume(vol, grown);
  const std::vector<float> outer = PhantomVolume(vol, {shrunk[0]});
  std::vector<bool> mask(in.size());
  for (size_t i = 0; i < in.size(); ++i) mask[i] = in[i] == out[i] && outer[i] > 0;
  return mask;
}

std::vector<double> ArcAngles(double arc_deg, double step_deg, double start_deg, double direction) {
  constexpr double kRadiansPerDegree = 3.14159265358979323846 / 180.0;
  std::vector<double> a;
  for (int64_t i = 0; i * step_deg < arc_deg - 1e-9; ++i) {
    a.push_back((start_deg + direction * i * step_deg) * kRadiansPerDegree);
  }
  return a;
}

}  // namespace testing
}  // namespace recon
}  // namespace tessera
