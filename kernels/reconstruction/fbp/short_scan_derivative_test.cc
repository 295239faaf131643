// The derivative + Hilbert short-scan method (short_scan_derivative.h) on
// the CPU, against analytic phantoms (exact line integrals) and the ramp
// FDK: Noo's weights sum to one over conjugate rays; full 2-D fan scans
// match the ramp FBP; a short scan matches the full scan in 2-D and at the
// cone's central slices; the orientation of the detector's u axis and of
// the orbit does not matter; what the method refuses.
#include "kernels/reconstruction/fbp/short_scan_derivative.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/reconstruction/fbp/analytic_phantom.h"
#include "kernels/reconstruction/fbp/fbp.h"

namespace tessera {
namespace recon {
namespace fbp {
namespace {

using ::tessera::recon::testing::AnalyticSinogram;
using ::tessera::recon::testing::ArcAngles;
using ::tessera::recon::testing::Ellipsoid;
using ::tessera::recon::testing::InteriorMask;
using ::tessera::recon::testing::MaskedNrmse;
using ::tessera::recon::testing::PhantomVolume;

constexpr double kPi = 3.14159265358979323846;
constexpr double kDeg = kPi / 180.0;


struct Result {
  std::vector<float> volume;
  std::string redundancy;
  absl::Status status;
};

Result Reconstruct(const CtGeometry& g, const std::vector<float>& sino, ShortScanMethod method) {
  Result r;
  r.volume.assign(g.volume.size(), -1.0f);
  const Stream cpu = Stream::Cpu();
  FbpOptions options;
  options.short_scan = method;
  auto plan = FbpPlan::Create(g, cpu, options);
  if (!plan.ok()) {
    r.status = plan.status();
    return r;
  }
  r.redundancy = (*plan)->redundancy();
  r.status = (*plan)->Run(sino.data(), r.volume.data());
  return r;
}

const std::vector<Ellipsoid> kPhantom2D = {
    {{0, 0, 0}, {40, 40, 1}, 0, 1.0},
    {{10, -6, 0}, {12, 20, 1}, 0.4, 0.5},
    {{-18, 12, 0}, {6, 6, 1}, 0, -0.4},
};

double Nrmse(const CtGeometry& g, const std::vector<Ellipsoid>& phantom, ShortScanMethod method,
             std::string* redundancy = nullptr) {
  const Result r = Reconstruct(g, AnalyticSinogram(g.projection, phantom), method);
  EXPECT_TRUE(r.status.ok()) << r.status;
  if (redundancy != nullptr) *redundancy = r.redundancy;
  return MaskedNrmse(r.volume, PhantomVolume(g.volume, phantom), InteriorMask(g.volume, phantom, 2.5));
}

// w(ray) + w(conjugate) = 1 wherever both lie on the arc, w = 1 where the
// conjugate is off it, 0 <= w <= 1.
TEST(ShortScanDerivativeTest, NooWeightsSumToOneOverConjugates) {
  std::mt19937 rng(36);
  std::uniform_real_distribution<double> uni(0, 1);
  const double arc = 220 * kDeg, smoothing = 10 * kDeg;
  int pairs = 0;
  for (int i = 0; i < 5000; ++i) {
    const double b = arc * uni(rng), gamma = (uni(rng) - 0.5) * 40 * kDeg;
    const double w = NooWeight(b, gamma, arc, smoothing);
    EXPECT_GE(w, 0.0);
    EXPECT_LE(w, 1.0);
    const double conjugates =
        NooArcWindow(b + kPi + 2 * gamma, arc, smoothing) + NooArcWindow(b - kPi + 2 * gamma, arc, smoothing);
    if (conjugates == 0 && NooArcWindow(b, arc, smoothing) > 0) EXPECT_EQ(w, 1.0) << b << " " << gamma;
    for (double bc : {b + kPi + 2 * gamma, b - kPi + 2 * gamma}) {
      if (bc > 0 && bc < arc && NooArcWindow(b, arc, smoothing) + NooArcWindow(bc, arc, smoothing) > 0) {
        EXPECT_NEAR(w + NooWeight(bc, -gamma, arc, smoothing), 1.0, 1e-12) << b << " " << gamma;
        ++pairs;
      }
    }
  }
  EXPECT_GT(pairs, 1000);
}

// 2-D fan (exact in theory): the full scan matches the ramp FBP, the short
// scan the full scan; the unweighted short scan does not.
TEST(ShortScanDerivativeTest, FanFullAndShortMatchRamp) {
  const CtGeometry full{CenteredVolume(128, 128), FanBeam2D(ArcAngles(360, 1.0), 1.5, 200, 250, 150)};
  const CtGeometry short_scan{CenteredVolume(128, 128), FanBeam2D(ArcAngles(230, 1.0), 1.5, 200, 250, 150)};
  std::string what;
  const double ramp = Nrmse(full, kPhantom2D, ShortScanMethod::kParker);
  const double d_full = Nrmse(full, kPhantom2D, ShortScanMethod::kDerivative);
  const double d_short = Nrmse(short_scan, kPhantom2D, ShortScanMethod::kDerivative, &what);
  std::printf("fan 2-D NRMSE: ramp full %.5f, derivative full %.5f, derivative short 230 deg %.5f [%s]\n", ramp,
              d_full, d_short, what.c_str());
  EXPECT_LE(d_full, 1.02 * ramp);
  EXPECT_LE(d_short, 1.02 * ramp);
  EXPECT_NE(what.find("Noo"), std::string::npos) << what;
  // Unweighted (every ray 1/2): rays seen twice count twice.
  const Stream cpu = Stream::Cpu();
  FbpOptions none;
  none.short_scan = ShortScanMethod::kDerivative;
  none.redundancy_weights = false;
  auto plan = FbpPlan::Create(short_scan, cpu, none);
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<float> volume(short_scan.volume.size());
  ASSERT_TRUE((*plan)->Run(AnalyticSinogram(short_scan.projection, kPhantom2D).data(), volume.data()).ok());
  EXPECT_GT(MaskedNrmse(volume, PhantomVolume(short_scan.volume, kPhantom2D),
                        InteriorMask(short_scan.volume, kPhantom2D, 2.5)),
            5 * d_short);
}

// The wide cone of fbp_test's FDK (DSO 150, DSD 225, +-14.8 deg), on a
// coarser grid to stay fast: the derivative short scan against the ramp
// FDK's full scan (the Parker short scan misses 10 % here, redundancy_
// weights_test), whole volume and central slices.
TEST(ShortScanDerivativeTest, WideConeShortScanWithinTenPercentOfFullFdk) {
  const std::vector<Ellipsoid> phantom = {{{0, 0, 0}, {24, 24, 24}, 0, 1.0}, {{5, -4, 4}, {8, 12, 6}, 0.5, 0.5}};
  VolumeGeometry vol = CenteredVolume(40, 40, 40);
  vol.min_x = vol.min_y = vol.min_z = -32;
  vol.max_x = vol.max_y = vol.max_z = 32;
  const CtGeometry full{vol, ConeBeam(ArcAngles(360, 3.0), 2.0, 2.0, 60, 60, 150, 75)};
  const CtGeometry short_scan{vol, ConeBeam(ArcAngles(219, 3.0), 2.0, 2.0, 60, 60, 150, 75)};
  const std::vector<float> truth = PhantomVolume(vol, phantom);
  const std::vector<bool> mask = InteriorMask(vol, phantom, 4.0);
  const Result ramp = Reconstruct(full, AnalyticSinogram(full.projection, phantom), ShortScanMethod::kParker);
  const std::vector<float> sino = AnalyticSinogram(short_scan.projection, phantom);
  const Result parker = Reconstruct(short_scan, sino, ShortScanMethod::kParker);
  const Result derivative = Reconstruct(short_scan, sino, ShortScanMethod::kDerivative);
  ASSERT_TRUE(ramp.status.ok()) << ramp.status;
  ASSERT_TRUE(parker.status.ok()) << parker.status;
  ASSERT_TRUE(derivative.status.ok()) << derivative.status;
  std::vector<bool> central = mask;
  for (int64_t i = 0; i < vol.size(); ++i) central[i] = mask[i] && std::abs(i / (40 * 40) - 19.5) < 1;
  const double n_full = MaskedNrmse(ramp.volume, truth, mask), n_parker = MaskedNrmse(parker.volume, truth, mask),
               n_derivative = MaskedNrmse(derivative.volume, truth, mask);
  const double c_full = MaskedNrmse(ramp.volume, truth, central),
               c_derivative = MaskedNrmse(derivative.volume, truth, central);
  std::printf("wide cone NRMSE: ramp FDK full %.5f, Parker short %.5f (x%.3f), derivative short %.5f (x%.3f); "
              "central slices %.5f vs %.5f [%s]\n",
              n_full, n_parker, n_parker / n_full, n_derivative, n_derivative / n_full, c_full, c_derivative,
              derivative.redundancy.c_str());
  EXPECT_LE(n_derivative, 1.10 * n_full);
  EXPECT_LE(c_derivative, 1.10 * c_full);
}

// The same rays described clockwise, or with the detector's u axis (and the
// columns) reversed, give the same volume.
TEST(ShortScanDerivativeTest, OrientationDoesNotMatter) {
  const std::vector<Ellipsoid> phantom = {{{0, 0, 0}, {20, 20, 20}, 0, 1.0}, {{4, -3, 3}, {6, 9, 5}, 0.5, 0.5}};
  const CtGeometry ccw{CenteredVolume(32, 32, 16), ConeBeam(ArcAngles(220, 2.0), 1.5, 1.5, /*rows=*/24, /*cols=*/48, 150, 75)};
  // Clockwise: the same views mirrored through the x axis are not the same
  // rays; instead run the counter-clockwise angles backwards in order.
  CtGeometry reversed = ccw;
  std::reverse(reversed.projection.views.begin(), reversed.projection.views.end());
  CtGeometry flipped = ccw;
  for (ProjectionVectors& w : flipped.projection.views) w.u = {-w.u.x, -w.u.y, -w.u.z};
  const std::vector<float> sino = AnalyticSinogram(ccw.projection, phantom);
  std::vector<float> sino_reversed(sino.size()), sino_flipped(sino.size());
  const int64_t rows = 24, cols = 48, views = ccw.projection.num_views();
  for (int64_t p = 0; p < views; ++p) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        sino_reversed[((views - 1 - p) * rows + r) * cols + c] = sino[(p * rows + r) * cols + c];
        sino_flipped[(p * rows + r) * cols + (cols - 1 - c)] = sino[(p * rows + r) * cols + c];
      }
    }
  }
  const Result a = Reconstruct(ccw, sino, ShortScanMethod::kDerivative);
  const Result b = Reconstruct(reversed, sino_reversed, ShortScanMethod::kDerivative);
  const Result c = Reconstruct(flipped, sino_flipped, ShortScanMethod::kDerivative);
  ASSERT_TRUE(a.status.ok()) << a.status;
  ASSERT_TRUE(b.status.ok()) << b.status;
  ASSERT_TRUE(c.status.ok()) << c.status;
  double peak = 0, diff_b = 0, diff_c = 0;
  for (size_t i = 0; i < a.volume.size(); ++i) {
    peak = std::max(peak, std::fabs(static_cast<double>(a.volume[i])));
    diff_b = std::max(diff_b, std::fabs(static_cast<double>(a.volume[i]) - b.volume[i]));
    diff_c = std::max(diff_c, std::fabs(static_cast<double>(a.volume[i]) - c.volume[i]));
  }
  EXPECT_GT(peak, 0.5);
  EXPECT_LT(diff_b, 1e-5 * peak);
  EXPECT_LT(diff_c, 1e-4 * peak);
}

TEST(ShortScanDerivativeTest, RefusesWhatItCannotDo) {
  const Stream cpu = Stream::Cpu();
  FbpOptions options;
  options.short_scan = ShortScanMethod::kDerivative;
  const CtGeometry cone{CenteredVolume(16, 16, 8), ConeBeam(ArcAngles(220, 4.0), 1.5, 1.5, 12, 24, 150, 75)};
  // Not a circular orbit: one source moved off the circle.
  CtGeometry bent = cone;
  bent.projection.views[10].source_or_ray.x += 3;
  auto plan = FbpPlan::Create(bent, cpu, options);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(plan.status().message()).find("circular orbit"), std::string::npos) << plan.status();
  // Out of core.
  FbpOptions budget = options;
  budget.device_memory_bytes = 1 << 30;
  EXPECT_EQ(FbpPlan::Create(cone, cpu, budget).status().code(), absl::StatusCode::kInvalidArgument);
  // An offset detector (full scan).
  CtGeometry offset{CenteredVolume(16, 16, 8), ConeBeam(ArcAngles(360, 4.0), 1.5, 1.5, 12, 24, 150, 75)};
  for (ProjectionVectors& w : offset.projection.views) {
    w.det_center = {w.det_center.x + 4 * w.u.x, w.det_center.y + 4 * w.u.y, w.det_center.z};
  }
  plan = FbpPlan::Create(offset, cpu, options);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(plan.status().message()).find("offset detector"), std::string::npos) << plan.status();
  // Limited angle, as the Parker path.
  const CtGeometry limited{CenteredVolume(16, 16, 8), ConeBeam(ArcAngles(150, 4.0), 1.5, 1.5, 12, 24, 150, 75)};
  EXPECT_EQ(FbpPlan::Create(limited, cpu, options).status().code(), absl::StatusCode::kInvalidArgument);
  // Parallel beams ignore the option.
  const CtGeometry parallel{CenteredVolume(16, 16), ParallelBeam2D(ArcAngles(180, 4.0), 1.0, 24)};
  EXPECT_TRUE(FbpPlan::Create(parallel, cpu, options).ok());
  // RunOutOfCore is refused with a resident derivative plan.
  auto resident = FbpPlan::Create(cone, cpu, options);
  ASSERT_TRUE(resident.ok()) << resident.status();
  std::vector<float> sino(cone.projection.sinogram_size(), 1.0f), vol(cone.volume.size());
  EXPECT_EQ((*resident)->RunOutOfCore(sino.data(), vol.data()).code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace fbp
}  // namespace recon
}  // namespace tessera
