// Issue 36 (CT): short-scan FDK against the full scan on analytic phantoms
// (exact line integrals, fbp/analytic_phantom.h), CPU, over the cone
// geometries users have and over redundancy weightings:
//   parker      the library's weights (redundancy_weights.h, FbpPlan);
//   tilted      Parker with each ray's fan angle in its tilted fan plane,
//               atan(u / sqrt(DSD^2 + v^2)) instead of atan(u / DSD);
//   tang k      Parker before the filter, then Tang et al.'s cone-angle
//               weighting of conjugate rays in a back projection of our own
//               (TangBackprojection below), full and short scans;
//   wesarg q    Wesarg, Ebert & Bortfeld (Med. Phys. 29:372, 2002), as
//               TIGRE's ParkerWeight(q): transitions of q x Parker's width,
//               the over-scan's redundant rays weighted 1/2 each in between
//               (q = 1 is Parker's over-scan weighting).
//   derivative d  the library's ShortScanMethod::kDerivative (short_scan_derivative.h:
//               derivative along the orbit + Hilbert filter, Noo's weight after
//               the filter with d degrees of smoothing), full and short scans.
// The bench-side weightings are multiplied into the sinogram (x2) and run
// through FbpPlan with redundancy weights "none", which keeps the arc's view
// shares (redundancy_weights_test NoneGivesTheUnweightedResult); "parker"
// computed that way is printed too, as a check of the emulation.
// NRMSE: RMSE over the interior mask (2.5 voxels inside the sphere, away from
// the insert's edge) / RMS of the phantom there; per 8-slice band as well
// (--bands).
//
//   bazel build //bench:fdk_short_scan_bench && bazel-bin/bench/fdk_short_scan_bench \
//       [--cases=wide,narrow,tigre,carm,sweep] [--arcs=min,240,270,300] [--q=1,0.5,0.25,0.1] [--bands]
//       [--step=DEG] (angular step; default 2) [--no-tilted]
//       [--tang=0,1,2,4]  Parker + Tang's 3-D weights with these k (own back projection; k 0 = the library's)
//       [--derivative=5,10,20]  the derivative method with these smoothing widths (deg); default 10; "" none
//       [--derivative-tang=0,1,2]  the derivative method's filtered views with Noo x Tang per-voxel weights
//                      (DerivativeTangBackprojection; k 0 = Noo's weight per voxel, a check)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "common/device.h"
#include "kernels/reconstruction/fbp/analytic_phantom.h"
#include "kernels/reconstruction/fbp/fbp.h"
#include "kernels/reconstruction/fbp/redundancy_weights.h"
#include "kernels/reconstruction/fbp/short_scan_derivative.h"

namespace tessera::recon {
namespace {

using testing::AnalyticSinogram;
using testing::ArcAngles;
using testing::Ellipsoid;
using testing::MaskedNrmse;

constexpr double kPi = 3.14159265358979323846;
constexpr double kDeg = kPi / 180.0;

struct Case {
  std::string name;
  double dso, dsd;
  int64_t det;       // rows = cols
  double pitch;      // mm
  int64_t n;         // volume n^3
  double voxel;      // mm
  double step_deg;   // angular step
};

// The redundancy_weights_test phantom (a sphere of radius 24 voxels and an
// insert), scaled to the voxel size.
std::vector<Ellipsoid> Phantom(double s) {
  return {{{0, 0, 0}, {24 * s, 24 * s, 24 * s}, 0, 1.0}, {{5 * s, -4 * s, 4 * s}, {8 * s, 12 * s, 6 * s}, 0.5, 0.5}};
}

VolumeGeometry Volume(const Case& k) {
  VolumeGeometry v = CenteredVolume(k.n, k.n, k.n);
  const double h = 0.5 * k.n * k.voxel;
  v.min_x = v.min_y = v.min_z = -h;
  v.max_x = v.max_y = v.max_z = h;
  return v;
}


ProjectionGeometry Cone(const Case& k, double arc_deg) {
  return ConeBeam(ArcAngles(arc_deg, k.step_deg), k.pitch, k.pitch, k.det, k.det, k.dso, k.dsd - k.dso);
}

double SMinus(double x) {  // Wesarg's S: 0 below -1/2, 1 above 1/2, a sine step between
  if (x <= -0.5) return 0;
  if (x >= 0.5) return 1;
  return 0.5 * (1 + std::sin(kPi * x));
}

// Wesarg et al.'s weight (sums to 1 over conjugates) at arc position b of an
// arc pi + 2 delta + eps, fan angle g (Parker's sign), smoothing q in (0, 1].
double Wesarg(double b, double g, double delta, double eps, double q) {
  auto width = [&](double a) { return q * (2 * delta - 2 * a + eps); };
  return 0.5 * (SMinus(b / width(g) - 0.5) + SMinus((b - 2 * delta + 2 * g - eps) / width(g) + 0.5) -
                SMinus((b - kPi + 2 * g) / width(-g) - 0.5) - SMinus((b - kPi - 2 * delta - eps) / width(-g) + 0.5));
}

enum class Weighting { kLibrary, kParkerEmulated, kTilted, kWesarg, kTang, kDerivative, kDerivativeTang };

// Bilinear sample of one filtered view (cols x rows), 0 outside
// (-1, cols) x (-1, rows), blending with zeros at the edges (as fbp_math.h).
float Sample(const float* view, int64_t cols, int64_t rows, double a, double b) {
  if (!(a > -1 && a < cols && b > -1 && b < rows)) return 0.0f;
  const int64_t ia = static_cast<int64_t>(std::floor(a)), ib = static_cast<int64_t>(std::floor(b));
  const double wa = a - ia, wb = b - ib;
  auto at = [&](int64_t c, int64_t r) { return c < 0 || r < 0 || c >= cols || r >= rows ? 0.0 : view[r * cols + c]; };
  const double top = at(ia, ib) + wa * (at(ia + 1, ib) - at(ia, ib));
  const double bottom = at(ia, ib + 1) + wa * (at(ia + 1, ib + 1) - at(ia, ib + 1));
  return static_cast<float>(top + wb * (bottom - top));
}

// FDK back projection of the library's filtered views (Parker weights,
// cosine weight, shares and ramp filter already in them: FbpPlan::Filter),
// each sample divided by D^2 as fbp_math.h, times Tang et al.'s 3-D weight
// (Phys. Med. Biol. 50:3889, 2005) in its short-scan form: the voxel's ray
// and its conjugate (in-plane the same line, from beta + pi + 2 gamma) share
// the Parker pair's weight in proportion to tan^k of the other's cone angle,
//   c = t_c^k / (w t_c^k + w_c t^k),  t = |z| / L, t_c = |z| / (2 R cos gamma - L),
// w, w_c the pair's Parker weights (w + w_c = 1), L the in-plane distance of the
// voxel from the source: the ray with the smaller cone angle counts more, and
// w c + w_c c_c = 1. k = 0 gives c = 1: the library's FDK (a check).
std::vector<float> TangBackprojection(const CtGeometry& g, const std::vector<float>& filtered, double delta_scan,
                                      double step, double k) {
  const ProjectionGeometry& p = g.projection;
  const VolumeGeometry& vol = g.volume;
  const int64_t cols = p.det_cols, rows = p.det_rows;
  const double ocol = 0.5 * (cols - 1), orow = 0.5 * (rows - 1);
  std::vector<float> out(vol.size(), 0.0f);
  for (int64_t view = 0; view < p.num_views(); ++view) {
    const ProjectionVectors& w = p.views[view];
    const Vec3 s = w.source_or_ray, d0 = w.det_center, u = w.u, v = w.v;
    Vec3 n{u.y * v.z - u.z * v.y, u.z * v.x - u.x * v.z, u.x * v.y - u.y * v.x};
    const double nn = std::sqrt(n.x * n.x + n.y * n.y + n.z * n.z);
    n = {n.x / nn, n.y / nn, n.z / nn};
    double dsd = (d0.x - s.x) * n.x + (d0.y - s.y) * n.y + (d0.z - s.z) * n.z;
    if (dsd < 0) {
      n = {-n.x, -n.y, -n.z};
      dsd = -dsd;
    }
    const double uu = u.x * u.x + u.y * u.y + u.z * u.z, vv = v.x * v.x + v.y * v.y + v.z * v.z;
    const double radius = std::hypot(s.x, s.y), b = view * step + 0.5 * step;
    const float* q = filtered.data() + view * cols * rows;
    for (int64_t kz = 0; kz < vol.nz; ++kz) {
      for (int64_t j = 0; j < vol.ny; ++j) {
        for (int64_t i = 0; i < vol.nx; ++i) {
          const Vec3 x = vol.VoxelCenter(i, j, kz);
          const double rx = x.x - s.x, ry = x.y - s.y, rz = x.z - s.z;
          const double depth = rx * n.x + ry * n.y + rz * n.z;
          const double t = dsd / depth;
          const double hx = s.x + t * rx - d0.x, hy = s.y + t * ry - d0.y, hz = s.z + t * rz - d0.z;
          const double a = (hx * u.x + hy * u.y + hz * u.z) / uu + ocol;
          const double bb = (hx * v.x + hy * v.y + hz * v.z) / vv + orow;
          const double big_d = depth / dsd;
          double value = Sample(q, cols, rows, a, bb) / (big_d * big_d);
          if (k > 0 && x.z != 0) {
            const double gamma = std::atan2(-s.x * ry + s.y * rx, -s.x * rx - s.y * ry);
            const double l = std::hypot(rx, ry), lc = 2 * radius * std::cos(gamma) - l;
            // A full scan (delta_scan 0 here) weighs every pair 1/2 + 1/2.
            double wp = 0.5, wc = 0.5;
            if (delta_scan > 0) {
              wp = fbp::ParkerWeight(b, gamma, delta_scan);
              wc = 0;
              for (double b2 : {b + kPi + 2 * gamma, b - kPi + 2 * gamma}) wc += fbp::ParkerWeight(b2, -gamma, delta_scan);
            }
            const double tk = std::pow(std::fabs(x.z) / l, k), tck = std::pow(std::fabs(x.z) / std::max(lc, 1e-9), k);
            const double den = wp * tck + wc * tk;
            if (den > 0) value *= tck / den;
          }
          out[(kz * vol.ny + j) * vol.nx + i] += static_cast<float>(value);
        }
      }
    }
  }
  return out;
}

// The derivative method's filtered views without weights (FbpPlan::Filter
// with redundancy weights "none" gives them x 1/2), back-projected with 1 / D
// and a per-voxel weight: Noo's c(b) (short_scan_derivative.h, 10 deg
// smoothing) times Tang et al.'s cone-angle preference, normalised over the
// voxel's ray and its conjugate,
//   w = c(b) t_c^k / (c(b) t_c^k + c(b_c) t^k),  t = |z| / L, t_c = |z| / (2 R cos gamma - L),
// gamma the fan angle of the voxel's ray, L the voxel's in-plane distance
// from the source; a full scan has c = 1. k = 0 is Noo's weight per voxel
// (the library's per column: a check). The weight comes after the filter,
// which the derivative method allows (exact in 2-D for any w summing to 1).
std::vector<float> DerivativeTangBackprojection(const CtGeometry& g, const std::vector<float>& half_filtered,
                                                double arc, double step, double k) {
  const ProjectionGeometry& p = g.projection;
  const VolumeGeometry& vol = g.volume;
  const int64_t cols = p.det_cols, rows = p.det_rows;
  const double ocol = 0.5 * (cols - 1), orow = 0.5 * (rows - 1);
  const bool full = arc >= 2 * kPi - 1e-9;
  std::vector<double> out(vol.size(), 0.0);
  for (int64_t view = 0; view < p.num_views(); ++view) {
    const ProjectionVectors& w = p.views[view];
    const Vec3 s = w.source_or_ray, d0 = w.det_center, u = w.u, v = w.v;
    Vec3 n{u.y * v.z - u.z * v.y, u.z * v.x - u.x * v.z, u.x * v.y - u.y * v.x};
    const double nn = std::sqrt(n.x * n.x + n.y * n.y + n.z * n.z);
    n = {n.x / nn, n.y / nn, n.z / nn};
    double dsd = (d0.x - s.x) * n.x + (d0.y - s.y) * n.y + (d0.z - s.z) * n.z;
    if (dsd < 0) {
      n = {-n.x, -n.y, -n.z};
      dsd = -dsd;
    }
    const double uu = u.x * u.x + u.y * u.y + u.z * u.z, vv = v.x * v.x + v.y * v.y + v.z * v.z;
    const double radius = std::hypot(s.x, s.y), b = view * step + 0.5 * step;
    const float* q = half_filtered.data() + view * cols * rows;
    for (int64_t kz = 0; kz < vol.nz; ++kz) {
      for (int64_t j = 0; j < vol.ny; ++j) {
        for (int64_t i = 0; i < vol.nx; ++i) {
          const Vec3 x = vol.VoxelCenter(i, j, kz);
          const double rx = x.x - s.x, ry = x.y - s.y, rz = x.z - s.z;
          const double depth = rx * n.x + ry * n.y + rz * n.z;
          const double t = dsd / depth;
          const double hx = s.x + t * rx - d0.x, hy = s.y + t * ry - d0.y, hz = s.z + t * rz - d0.z;
          const double a = (hx * u.x + hy * u.y + hz * u.z) / uu + ocol;
          const double bb = (hx * v.x + hy * v.y + hz * v.z) / vv + orow;
          const double sample = 2.0 * Sample(q, cols, rows, a, bb) * dsd / depth;
          const double gamma = std::atan2(-s.x * ry + s.y * rx, -s.x * rx - s.y * ry);
          const double l = std::hypot(rx, ry), lc = std::max(2 * radius * std::cos(gamma) - l, 1e-9);
          const double tk = k > 0 ? std::pow(std::fabs(rz) / l, k) : 1.0, tck = k > 0 ? std::pow(std::fabs(rz) / lc, k) : 1.0;
          double c = 1, cc = 1;
          if (!full) {
            c = fbp::NooArcWindow(b, arc, 10 * kDeg);
            cc = fbp::NooArcWindow(b + kPi + 2 * gamma, arc, 10 * kDeg) + fbp::NooArcWindow(b - kPi + 2 * gamma, arc, 10 * kDeg);
          }
          double weight = 0.5;
          const double den = c * tck + cc * tk;
          if (den > 0) weight = c * tck / den;
          else if (c > 0) weight = 1.0;
          out[(kz * vol.ny + j) * vol.nx + i] += sample * weight;
        }
      }
    }
  }
  return std::vector<float>(out.begin(), out.end());
}

struct Scored {
  double whole = 0;
  std::vector<double> bands;
};

Scored Score(const Case& k, const std::vector<float>& volume, const std::vector<Ellipsoid>& phantom) {
  const VolumeGeometry vol = Volume(k);
  const std::vector<float> truth = testing::PhantomVolume(vol, phantom);
  const std::vector<bool> mask = testing::InteriorMask(vol, phantom, 2.5 * k.voxel);
  Scored s;
  s.whole = MaskedNrmse(volume, truth, mask);
  const int64_t slice = k.n * k.n;
  for (int64_t z0 = 0; z0 < k.n; z0 += 8) {
    std::vector<bool> band(mask.size(), false);
    for (int64_t i = z0 * slice; i < std::min(k.n, z0 + 8) * slice; ++i) band[i] = mask[i];
    s.bands.push_back(MaskedNrmse(volume, truth, band));
  }
  return s;
}

Scored Reconstruct(const Case& k, double arc_deg, Weighting weighting, double q = 1) {
  const CtGeometry g{Volume(k), Cone(k, arc_deg)};
  const std::vector<Ellipsoid> phantom = Phantom(k.voxel);
  std::vector<float> sino = AnalyticSinogram(g.projection, phantom);
  fbp::FbpOptions options;
  options.redundancy_weights =
      weighting == Weighting::kLibrary || weighting == Weighting::kTang || weighting == Weighting::kDerivative;
  if (weighting == Weighting::kDerivativeTang) {
    options.short_scan = fbp::ShortScanMethod::kDerivative;
    options.redundancy_weights = false;  // 1/2 each: DerivativeTangBackprojection weighs per voxel
  }
  if (weighting == Weighting::kDerivative) {
    options.short_scan = fbp::ShortScanMethod::kDerivative;
    options.short_scan_smoothing_deg = q;
  }
  if (!options.redundancy_weights && weighting != Weighting::kDerivativeTang) {
    const ProjectionGeometry& p = g.projection;
    const int64_t views = p.num_views(), cols = p.det_cols, rows = p.det_rows;
    const double step = k.step_deg * kDeg, arc = views * step;
    const double orow = 0.5 * (rows - 1), ocol = 0.5 * (cols - 1);
    // Half fan angle of the detector (the library's delta) and the scan's.
    double delta = 0;
    for (int64_t c = 0; c < cols; ++c) delta = std::max(delta, std::fabs(std::atan((c - ocol) * k.pitch / k.dsd)));
    const double delta_scan = 0.5 * (arc - kPi), eps = arc - kPi - 2 * delta;
    for (int64_t v = 0; v < views; ++v) {
      const Vec3& s = p.views[v].source_or_ray;
      const double b = v * step + 0.5 * step;
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          // The fan angle's sign as the library measures it (counter-clockwise
          // from the source->axis direction).
          const Vec3 x = p.PixelCenter(v, static_cast<double>(c), orow);
          const double rx = x.x - s.x, ry = x.y - s.y;
          double gamma = std::atan2(-s.x * ry + s.y * rx, -s.x * rx - s.y * ry);
          if (weighting == Weighting::kTilted) {
            const double u = (c - ocol) * k.pitch, w = (r - orow) * k.pitch;
            gamma = std::copysign(std::atan(std::fabs(u) / std::hypot(k.dsd, w)), gamma);
          }
          const double weight = weighting == Weighting::kWesarg ? Wesarg(b, gamma, delta, eps, q)
                                                                : fbp::ParkerWeight(b, gamma, delta_scan);
          sino[(v * rows + r) * cols + c] *= static_cast<float>(2 * weight);
        }
      }
    }
  }
  const Stream cpu = Stream::Cpu();
  auto plan = bench::ValueOrExit(fbp::FbpPlan::Create(g, cpu, options), "plan");
  std::vector<float> volume(g.volume.size());
  if (weighting == Weighting::kDerivativeTang) {
    std::vector<float> filtered(sino.size());
    bench::ExitUnlessOk(plan->Filter(sino.data(), filtered.data()), "filter");
    const double step = k.step_deg * kDeg, arc = g.projection.num_views() * step;
    volume = DerivativeTangBackprojection(g, filtered, arc, step, q);
  } else if (weighting == Weighting::kTang) {
    std::vector<float> filtered(sino.size());
    bench::ExitUnlessOk(plan->Filter(sino.data(), filtered.data()), "filter");
    const double step = k.step_deg * kDeg, arc = g.projection.num_views() * step;
    volume = TangBackprojection(g, filtered, arc >= 2 * kPi - 1e-9 ? 0.0 : 0.5 * (arc - kPi), step, q);
  } else {
    bench::ExitUnlessOk(plan->Run(sino.data(), volume.data()), "run");
  }
  return Score(k, volume, phantom);
}

std::string Bands(const Scored& s) {
  std::string out;
  for (double b : s.bands) out += (out.empty() ? "" : " ") + std::to_string(b).substr(0, 6);
  return out;
}

}  // namespace
}  // namespace tessera::recon

int main(int argc, char** argv) {
  using namespace tessera::recon;
  std::vector<std::string> cases = {"wide", "narrow", "tigre", "carm"};
  std::vector<std::string> arcs = {"min", "240", "270", "300"};
  std::vector<double> qs = {1, 0.5, 0.25, 0.1};
  std::vector<double> tang_k, derivative_d = {10}, dtang_k;
  bool bands = false, tilted = true;
  double step_override = 0;
  for (int i = 1; i < argc; ++i) {
    if (const char* v = tessera::bench::FlagValue(argv[i], "--cases")) {
      cases = absl::StrSplit(v, ',', absl::SkipEmpty());
    } else if (const char* v = tessera::bench::FlagValue(argv[i], "--arcs")) {
      arcs = absl::StrSplit(v, ',', absl::SkipEmpty());
    } else if (const char* v = tessera::bench::FlagValue(argv[i], "--q")) {
      qs.clear();
      for (absl::string_view s : absl::StrSplit(v, ',', absl::SkipEmpty())) {
        double d = 0;
        if (!absl::SimpleAtod(s, &d) || !(d > 0 && d <= 1)) {
          std::fprintf(stderr, "--q: %s is not in (0, 1]\n", std::string(s).c_str());
          return 2;
        }
        qs.push_back(d);
      }
    } else if (const char* v = tessera::bench::FlagValue(argv[i], "--tang")) {
      for (absl::string_view t : absl::StrSplit(v, ',', absl::SkipEmpty())) {
        double d = 0;
        if (!absl::SimpleAtod(t, &d) || d < 0) {
          std::fprintf(stderr, "--tang: %s is not >= 0\n", std::string(t).c_str());
          return 2;
        }
        tang_k.push_back(d);
      }
    } else if (const char* v = tessera::bench::FlagValue(argv[i], "--derivative")) {
      derivative_d.clear();
      for (absl::string_view t : absl::StrSplit(v, ',', absl::SkipEmpty())) {
        double d = 0;
        if (!absl::SimpleAtod(t, &d) || d < 0) {
          std::fprintf(stderr, "--derivative: %s is not >= 0\n", std::string(t).c_str());
          return 2;
        }
        derivative_d.push_back(d);
      }
    } else if (const char* v = tessera::bench::FlagValue(argv[i], "--derivative-tang")) {
      for (absl::string_view t : absl::StrSplit(v, ',', absl::SkipEmpty())) {
        double d = 0;
        if (!absl::SimpleAtod(t, &d) || d < 0) {
          std::fprintf(stderr, "--derivative-tang: %s is not >= 0\n", std::string(t).c_str());
          return 2;
        }
        dtang_k.push_back(d);
      }
    } else if (const char* v = tessera::bench::FlagValue(argv[i], "--step")) {
      step_override = std::atof(v);
    } else if (std::string(argv[i]) == "--bands") {
      bands = true;
    } else if (std::string(argv[i]) == "--no-tilted") {
      tilted = false;
    } else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  std::vector<Case> list;
  for (const std::string& c : cases) {
    if (c == "wide") list.push_back({"wide (fbp_test FDK)", 150, 225, 80, 1.5, 64, 1.0, 2.0});
    else if (c == "narrow") list.push_back({"narrow (test)", 600, 900, 80, 1.5, 64, 1.0, 2.0});
    // TIGRE's default cone geometry (DSO 1000, DSD 1536, 512^2 x 0.8 mm,
    // 256^3 voxels over 256 mm) at a quarter of the samples: 128^2 x 3.2 mm,
    // 64^3 x 4 mm; the same angles.
    else if (c == "tigre") list.push_back({"TIGRE default (/4)", 1000, 1536, 128, 3.2, 64, 4.0, 2.0});
    // A C-arm CBCT: DSO 750, DSD 1200, 422 mm detector (+-10 deg), 224 mm volume.
    else if (c == "carm") list.push_back({"C-arm (+-10 deg)", 750, 1200, 128, 3.3, 64, 3.5, 2.0});
    else if (c == "sweep") {
      // The wide case's detector and magnification (1.5) at growing DSO.
      for (double dso : {150.0, 200.0, 250.0, 300.0, 400.0, 600.0}) {
        list.push_back({"DSO " + std::to_string(static_cast<int>(dso)), dso, 1.5 * dso, 80, 1.5, 64, 1.0, 2.0});
      }
    } else {
      std::fprintf(stderr, "unknown case %s\n", c.c_str());
      return 2;
    }
  }
  if (step_override > 0) {
    for (Case& k : list) k.step_deg = step_override;
  }
  std::printf("| geometry | cone half-angle (detector / phantom) | fan | arc | weighting | NRMSE | full 360 | ratio |%s\n",
              bands ? " bands (8 slices, bottom to top) |" : "");
  std::printf("|---|---|---|---|---|---|---|---|%s\n", bands ? "---|" : "");
  for (const Case& k : list) {
    const double half_det = 0.5 * (k.det - 1) * k.pitch;
    const double cone = std::atan(0.5 * k.det * k.pitch / k.dsd) / kDeg;
    const double r = 24 * k.voxel;  // phantom radius; its top at the near side
    const double phantom_cone = std::atan(r / (k.dso - r)) / kDeg;
    const double fan = 2 * std::atan(half_det / k.dsd) / kDeg;
    const Scored full = Reconstruct(k, 360, Weighting::kLibrary);
    char geo[160];
    std::snprintf(geo, sizeof geo, "%s: DSO %.0f, DSD %.0f, %lld^2 x %.2g mm, %lld^3 x %.2g mm, %.2g deg steps",
                  k.name.c_str(), k.dso, k.dsd, static_cast<long long>(k.det), k.pitch, static_cast<long long>(k.n),
                  k.voxel, k.step_deg);
    auto row = [&](double arc, const std::string& what, const Scored& s) {
      std::printf("| %s | %.1f / %.1f deg | %.1f deg | %.0f | %s | %.5f | %.5f | %.3f |", geo, cone, phantom_cone, fan,
                  arc, what.c_str(), s.whole, full.whole, s.whole / full.whole);
      if (bands) std::printf(" %s (full: %s) |", Bands(s).c_str(), Bands(full).c_str());
      std::printf("\n");
      std::fflush(stdout);
    };
    for (double tk : tang_k) {
      char what[64];
      std::snprintf(what, sizeof what, "full scan, Tang 3-D weights k %g", tk);
      row(360, what, Reconstruct(k, 360, Weighting::kTang, tk));
    }
    if (!derivative_d.empty()) row(360, "full scan, derivative", Reconstruct(k, 360, Weighting::kDerivative, 10));
    for (double tk : dtang_k) {
      char what[64];
      std::snprintf(what, sizeof what, "full scan, derivative + Tang k %g", tk);
      row(360, what, Reconstruct(k, 360, Weighting::kDerivativeTang, tk));
    }
    const double needed = 180 + fan;
    for (const std::string& a : arcs) {
      double arc = 0;
      if (a == "min") {
        arc = k.step_deg * std::ceil(needed / k.step_deg + 1e-9);
      } else if (!absl::SimpleAtod(a, &arc)) {
        std::fprintf(stderr, "--arcs: %s\n", a.c_str());
        return 2;
      }
      if (arc < needed) continue;
      row(arc, "parker", Reconstruct(k, arc, Weighting::kLibrary));
      for (double d : derivative_d) {
        char what[64];
        std::snprintf(what, sizeof what, "derivative, smoothing %g deg", d);
        row(arc, what, Reconstruct(k, arc, Weighting::kDerivative, d));
      }
      for (double tk : dtang_k) {
        char what[64];
        std::snprintf(what, sizeof what, "derivative + Tang k %g (per voxel)", tk);
        row(arc, what, Reconstruct(k, arc, Weighting::kDerivativeTang, tk));
      }
      if (a == arcs.front()) row(arc, "parker (emulated)", Reconstruct(k, arc, Weighting::kParkerEmulated));
      if (tilted) row(arc, "parker, tilted fan angle", Reconstruct(k, arc, Weighting::kTilted));
      for (double tk : tang_k) {
        char what[64];
        std::snprintf(what, sizeof what, "parker + Tang 3-D weights k %g", tk);
        row(arc, what, Reconstruct(k, arc, Weighting::kTang, tk));
      }
      for (double q : qs) {
        if (q == 1 && arc - needed < 1e-6) continue;
        row(arc, "wesarg q " + std::to_string(q).substr(0, 4), Reconstruct(k, arc, Weighting::kWesarg, q));
      }
    }
  }
  return 0;
}
