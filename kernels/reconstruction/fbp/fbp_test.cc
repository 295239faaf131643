// FBP/FDK on the CPU: amplitude and RMSE against analytic phantoms (exact
// line integrals, not our projector) for parallel, fan and cone beams, the
// angular weights, batching, progress/cancel and argument errors.
#include "kernels/reconstruction/fbp/fbp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/reconstruction/fbp/analytic_phantom.h"
#include "kernels/reconstruction/fbp/fbp_backend.h"
#include "kernels/reconstruction/fbp/fbp_setup.h"

namespace tessera {
namespace recon {
namespace fbp {
namespace {

using ::tessera::recon::testing::AnalyticSinogram;
using ::tessera::recon::testing::Ellipsoid;
using ::tessera::recon::testing::InteriorMask;
using ::tessera::recon::testing::MaskedRmse;
using ::tessera::recon::testing::PhantomVolume;

constexpr double kPi = 3.14159265358979323846;

std::vector<float> Reconstruct(const CtGeometry& g, const std::vector<float>& sino, const FbpOptions& options = {}) {
  std::vector<float> vol(g.volume.size(), -1.0f);
  const Stream cpu = Stream::Cpu();
  auto plan = FbpPlan::Create(g, cpu, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return vol;
  const absl::Status s = (*plan)->Run(sino.data(), vol.data());
  EXPECT_TRUE(s.ok()) << s;
  return vol;
}

// Mean over a small box around voxel (ci, cj, ck).
double MeanAround(const VolumeGeometry& v, const std::vector<float>& x, int64_t ci, int64_t cj, int64_t ck, int r) {
  double sum = 0;
  int n = 0;
  for (int64_t k = std::max<int64_t>(0, ck - r); k <= std::min(v.nz - 1, ck + r); ++k) {
    for (int64_t j = cj - r; j <= cj + r; ++j) {
      for (int64_t i = ci - r; i <= ci + r; ++i) {
        sum += x[i + v.nx * (j + v.ny * k)];
        ++n;
      }
    }
  }
  return sum / n;
}

// Mask restricted to slice k.
std::vector<bool> SliceMask(const VolumeGeometry& v, std::vector<bool> mask, int64_t k0, int64_t k1) {
  for (int64_t i = 0; i < v.size(); ++i) {
    const int64_t k = i / (v.nx * v.ny);
    if (k < k0 || k > k1) mask[i] = false;
  }
  return mask;
}

const std::vector<Ellipsoid> kPhantom2D = {
    {{0, 0, 0}, {40, 40, 1}, 0, 1.0},
    {{10, -6, 0}, {12, 20, 1}, 0.4, 0.5},
    {{-18, 12, 0}, {6, 6, 1}, 0, -0.4},
};

TEST(AngularWeightsTest, EvenAndUnevenAngles) {
  const std::vector<double> even = AngularWeights(EvenAngles(8, kPi), kPi);
  for (double w : even) EXPECT_NEAR(w, kPi / 8, 1e-12);
  // Gaps 0.1, 0.3, pi - 0.4 (wrapping): each view gets half its two gaps.
  const std::vector<double> uneven = AngularWeights({0.4, 0.0, 0.1}, kPi);
  EXPECT_NEAR(uneven[1], 0.5 * ((kPi - 0.4) + 0.1), 1e-12);
  EXPECT_NEAR(uneven[2], 0.5 * (0.1 + 0.3), 1e-12);
  EXPECT_NEAR(uneven[0], 0.5 * (0.3 + (kPi - 0.4)), 1e-12);
  // A parallel scan over 2 pi folds onto [0, pi): each direction twice, half weight.
  const std::vector<double> doubled = AngularWeights(EvenAngles(8, 2 * kPi), kPi);
  for (double w : doubled) EXPECT_NEAR(w, kPi / 8, 1e-12);
}

// A uniform disc of value 1 reconstructs to ~1 in its centre: checks the
// scale constant of each beam (pi / views for parallel over pi; the fan's
// DSO / (2 DSD) and 2 pi / views).
TEST(FbpTest, UniformDiscHasUnitAmplitude) {
  const std::vector<Ellipsoid> disc = {{{0, 0, 0}, {40, 40, 1}, 0, 1.0}};
  CtGeometry par{CenteredVolume(128, 128), ParallelBeam2D(EvenAngles(180, kPi), 1.0, 185)};
  CtGeometry fan{CenteredVolume(128, 128), FanBeam2D(EvenAngles(360, 2 * kPi), 1.5, 200, 250, 150)};
  for (const CtGeometry* g : {&par, &fan}) {
    const std::vector<float> rec = Reconstruct(*g, AnalyticSinogram(g->projection, disc));
    EXPECT_NEAR(MeanAround(g->volume, rec, 64, 64, 0, 4), 1.0, 0.01) << Describe(*g);
    EXPECT_NEAR(MeanAround(g->volume, rec, 40, 70, 0, 3), 1.0, 0.02) << Describe(*g);
    EXPECT_NEAR(MeanAround(g->volume, rec, 8, 8, 0, 2), 0.0, 0.02) << Describe(*g);
  }
}

TEST(FbpTest, ParallelBeamPhantomRmse) {
  CtGeometry g{CenteredVolume(128, 128), ParallelBeam2D(EvenAngles(180, kPi), 1.0, 185)};
  const std::vector<float> rec = Reconstruct(g, AnalyticSinogram(g.projection, kPhantom2D));
  const double rmse = MaskedRmse(rec, PhantomVolume(g.volume, kPhantom2D), InteriorMask(g.volume, kPhantom2D, 2.5));
  EXPECT_LT(rmse, 0.015);  // measured 0.0106
}

TEST(FbpTest, FanBeamPhantomRmse) {
  CtGeometry g{CenteredVolume(128, 128), FanBeam2D(EvenAngles(360, 2 * kPi), 1.5, 200, 250, 150)};
  const std::vector<float> rec = Reconstruct(g, AnalyticSinogram(g.projection, kPhantom2D));
  const double rmse = MaskedRmse(rec, PhantomVolume(g.volume, kPhantom2D), InteriorMask(g.volume, kPhantom2D, 2.5));
  EXPECT_LT(rmse, 0.013);  // measured 0.0085
}

// FDK on a sphere with an inner ellipsoid: the central slices are nearly
// exact; slices 12 mm off the source plane (cone angle ~5 degrees there)
// carry FDK's cone-beam error, hence the looser bound.
TEST(FbpTest, ConeBeamFdkRmse) {
  const std::vector<Ellipsoid> phantom = {
      {{0, 0, 0}, {24, 24, 24}, 0, 1.0},
      {{5, -4, 4}, {8, 12, 6}, 0.5, 0.5},
  };
  CtGeometry g{CenteredVolume(64, 64, 64), ConeBeam(EvenAngles(180, 2 * kPi), 1.5, 1.5, 80, 80, 150, 75)};
  const std::vector<float> rec = Reconstruct(g, AnalyticSinogram(g.projection, phantom));
  const std::vector<float> truth = PhantomVolume(g.volume, phantom);
  const std::vector<bool> mask = InteriorMask(g.volume, phantom, 2.5);
  const double central = MaskedRmse(rec, truth, SliceMask(g.volume, mask, 31, 32));
  const double off = MaskedRmse(rec, truth, SliceMask(g.volume, mask, 43, 44));
  const double off_neg = MaskedRmse(rec, truth, SliceMask(g.volume, mask, 19, 20));
  EXPECT_LT(central, 0.015);  // measured 0.0095
  EXPECT_LT(off, 0.02);       // measured 0.0095
  EXPECT_LT(off_neg, 0.02);
  EXPECT_NEAR(MeanAround(g.volume, rec, 22, 42, 32, 2), 1.0, 0.02);  // (-10, 10, 0) mm: sphere only
}

// The weights come from the view vectors, so a detector shifted along u by
// a non-integer number of pixels (an offset detector) and a different
// source distance per view still reconstruct correctly.
TEST(FbpTest, FanBeamOffsetDetectorFromVectors) {
  CtGeometry g{CenteredVolume(128, 128), FanBeam2D(EvenAngles(360, 2 * kPi), 1.5, 220, 250, 150)};
  for (int64_t p = 0; p < g.projection.num_views(); ++p) {
    ProjectionVectors& w = g.projection.views[p];
    const double shift = 7.3, stretch = p % 2 == 0 ? 1.0 : 1.1;
    w.det_center = {w.det_center.x + shift * w.u.x, w.det_center.y + shift * w.u.y, 0};
    w.source_or_ray = {w.source_or_ray.x * stretch, w.source_or_ray.y * stretch, 0};
  }
  const std::vector<float> rec = Reconstruct(g, AnalyticSinogram(g.projection, kPhantom2D));
  const double rmse = MaskedRmse(rec, PhantomVolume(g.volume, kPhantom2D), InteriorMask(g.volume, kPhantom2D, 2.5));
  EXPECT_LT(rmse, 0.015);
}

TEST(FbpTest, BatchingDoesNotChangeTheResult) {
  CtGeometry g{CenteredVolume(48, 40), FanBeam2D(EvenAngles(90, 2 * kPi), 1.5, 80, 150, 100)};
  const std::vector<float> sino = AnalyticSinogram(g.projection, {{{3, -2, 0}, {15, 12, 1}, 0.3, 1.0}});
  FbpOptions small;
  small.views_per_batch = 7;
  const std::vector<float> a = Reconstruct(g, sino), b = Reconstruct(g, sino, small), c = Reconstruct(g, sino);
  double max_diff = 0;
  for (size_t i = 0; i < a.size(); ++i) max_diff = std::max(max_diff, std::fabs(static_cast<double>(a[i]) - b[i]));
  EXPECT_LT(max_diff, 1e-5);
  EXPECT_EQ(a, c);  // bit-identical run to run
}

TEST(FbpTest, ProgressAndCancel) {
  CtGeometry g{CenteredVolume(32, 32), ParallelBeam2D(EvenAngles(180, kPi), 1.0, 48)};
  const std::vector<float> sino = AnalyticSinogram(g.projection, {{{0, 0, 0}, {10, 10, 1}, 0, 1.0}});
  std::vector<float> vol(g.volume.size());
  const Stream cpu = Stream::Cpu();
  FbpOptions options;
  options.views_per_batch = 50;
  auto plan = FbpPlan::Create(g, cpu, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ((*plan)->views_per_batch(), 50);
  std::vector<int64_t> seen;
  FbpTimings timings;
  ASSERT_TRUE((*plan)
                  ->Run(sino.data(), vol.data(),
                        [&](int64_t done, int64_t total) {
                          EXPECT_EQ(total, 180);
                          seen.push_back(done);
                          return absl::OkStatus();
                        },
                        &timings)
                  .ok());
  EXPECT_EQ(seen, (std::vector<int64_t>{50, 100, 150, 180}));
  EXPECT_GT(timings.total_ms, 0);
  EXPECT_GE(timings.total_ms, timings.filter_ms + timings.backproject_ms - 1e-6);
  int calls = 0;
  const absl::Status cancelled = (*plan)->Run(sino.data(), vol.data(), [&](int64_t, int64_t) {
    return ++calls == 2 ? absl::CancelledError("stop") : absl::OkStatus();
  });
  EXPECT_EQ(cancelled.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(calls, 2);
}

// Filter() for a parallel beam is the ramp filter times the view's share of
// pi divided by the pixel width.
TEST(FbpTest, FilterMatchesRowFilterTimesScale) {
  const double width = 0.8;
  CtGeometry g{CenteredVolume(32, 32), ParallelBeam2D(EvenAngles(60, kPi), width, 50)};
  const std::vector<float> sino = AnalyticSinogram(g.projection, {{{2, 1, 0}, {9, 12, 1}, 0.2, 1.0}});
  std::vector<float> filtered(sino.size()), rows(sino.size());
  const Stream cpu = Stream::Cpu();
  FbpOptions options;
  options.filter = FilterKind::kSheppLogan;
  options.cutoff = 0.9;
  auto plan = FbpPlan::Create(g, cpu, options);
  ASSERT_TRUE(plan.ok());
  ASSERT_TRUE((*plan)->Filter(sino.data(), filtered.data()).ok());
  ASSERT_TRUE(cpu::FilterRows(FilterKind::kSheppLogan, 0.9, sino.data(), rows.data(), 60, 50).ok());
  const double scale = kPi / 60 / width;
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_NEAR(filtered[i], rows[i] * scale, 1e-5) << i;
}

TEST(FbpTest, ErrorsNameTheProblem) {
  const Stream cpu = Stream::Cpu();
  CtGeometry g{CenteredVolume(16, 16), ParallelBeam2D(EvenAngles(10, kPi), 1.0, 24)};
  FbpOptions bad_cutoff;
  bad_cutoff.cutoff = 0;
  auto s1 = FbpPlan::Create(g, cpu, bad_cutoff);
  EXPECT_EQ(s1.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s1.status().message().find("filter_cutoff"), absl::string_view::npos);
  FbpOptions bad_batch;
  bad_batch.views_per_batch = -2;
  EXPECT_EQ(FbpPlan::Create(g, cpu, bad_batch).status().code(), absl::StatusCode::kInvalidArgument);
  CtGeometry no_cols = g;
  no_cols.projection.det_cols = 0;
  auto s2 = FbpPlan::Create(no_cols, cpu);
  EXPECT_EQ(s2.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s2.status().message().find("DetectorCount"), absl::string_view::npos);
  // Detector between the source and ... nothing: the volume lies behind the source.
  CtGeometry behind{CenteredVolume(16, 16), FanBeam2D({0.0}, 1.0, 24, 100, -150)};
  auto s3 = FbpPlan::Create(behind, cpu);
  EXPECT_EQ(s3.status().code(), absl::StatusCode::kInvalidArgument) << s3.status();
  EXPECT_NE(s3.status().message().find("behind the source"), absl::string_view::npos) << s3.status();
  // A limited-angle scan (150 degrees of a fan; 180 + 8.8 needed) is refused;
  // short scans (redundancy_weights_test.cc) are not.
  std::vector<double> limited = EvenAngles(75, 150.0 * kPi / 180.0);
  auto s4 = FbpPlan::Create({CenteredVolume(16, 16), FanBeam2D(limited, 1.0, 24, 100, 50)}, cpu);
  EXPECT_EQ(s4.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s4.status().message().find("limited-angle"), absl::string_view::npos) << s4.status();
  // Sparse but even views are fine.
  EXPECT_TRUE(FbpPlan::Create({CenteredVolume(16, 16), FanBeam2D(EvenAngles(5, 2 * kPi), 1.0, 24, 100, 50)}, cpu).ok());
  auto plan = FbpPlan::Create(g, cpu);
  ASSERT_TRUE(plan.ok());
  std::vector<float> vol(g.volume.size());
  EXPECT_EQ((*plan)->Run(nullptr, vol.data()).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fbp
}  // namespace recon
}  // namespace tessera
