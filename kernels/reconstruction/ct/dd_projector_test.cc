// CPU tests of the distance-driven projector: the branchless reference
// against the overlap formula, the transpose (inner products and explicit
// matrices), the CUDA kernels' gather code run on the host against the
// reference, physical line integrals, subsets and argument errors.
#include "kernels/reconstruction/ct/dd_projector.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/testing/device_array.h"
#include "kernels/reconstruction/ct/dd_test_geometries.h"

namespace tessera {
namespace recon {
namespace ct {
namespace {

using ::tessera::testing::RandomUniform;
using ::tessera::testing::RelL2;

std::vector<int64_t> AllViews(const CtGeometry& g) { return SubsetViews(g.projection.num_views(), 1, kAllSubsets); }

double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

double MaxAbs(const std::vector<float>& a) {
  double m = 0;
  for (float v : a) m = std::max(m, static_cast<double>(std::fabs(v)));
  return m;
}

DdSystem Build(const CtGeometry& g) {
  auto sys = BuildDdSystem(g);
  EXPECT_TRUE(sys.ok()) << sys.status();
  return *sys;
}

TEST(DdProjector, BranchlessEqualsExactOverlapFormula) {
  for (const auto& [name, g] : testing::AllKinds()) {
    SCOPED_TRACE(name);
    const DdSystem sys = Build(g);
    const auto x = RandomUniform<float>(g.volume.size(), 0.2, 1.8, 1);
    std::vector<float> branchless(g.projection.sinogram_size()), exact(branchless.size());
    cpu::Forward(sys, x.data(), AllViews(g), branchless.data());
    cpu::ForwardExactOverlap(sys, x.data(), AllViews(g), exact.data());
    EXPECT_GT(MaxAbs(exact), 1.0);  // the rays do cross the volume
    // Both sum in double and round once: equal up to float rounding.
    EXPECT_LE(RelL2(branchless, exact), 1e-7);
    for (size_t i = 0; i < exact.size(); ++i) ASSERT_NEAR(branchless[i], exact[i], 1e-6 * MaxAbs(exact)) << i;
  }
}

// <A x, y> = <x, A^T y> for the reference (double sums: ~1e-7 from the
// float outputs) and for the gather code the CUDA kernels run (float
// weights and float per-view sums: ~1e-6). Tolerance 1e-5 relative.
std::vector<testing::NamedGeometry> KindsAndVariants() {
  std::vector<testing::NamedGeometry> cases = testing::AllKinds();
  for (auto& named : testing::VariantKinds()) cases.push_back(named);
  return cases;
}

TEST(DdProjector, AdjointIdentityAllGeometryKinds) {
  for (const auto& [name, g] : KindsAndVariants()) {
    SCOPED_TRACE(name);
    const DdSystem sys = Build(g);
    const auto views = AllViews(g);
    const auto x = RandomUniform<float>(g.volume.size(), 0.5, 1.5, 2);
    const auto y = RandomUniform<float>(g.projection.sinogram_size(), -1.0, 1.0, 3);
    std::vector<float> ax(y.size()), aty(x.size());
    cpu::Forward(sys, x.data(), views, ax.data());
    cpu::Back(sys, y.data(), views, aty.data());
    const double lhs = Dot(ax, y), rhs = Dot(x, aty);
    EXPECT_LE(std::fabs(lhs - rhs), 1e-5 * std::fabs(lhs)) << lhs << " vs " << rhs;
    // The check has teeth: a positive pairing is far from zero.
    EXPECT_GT(Dot(ax, ax), 1.0);

    cpu::GatherForward(sys, x.data(), views, ax.data());
    cpu::GatherBack(sys, y.data(), views, aty.data());
    const double glhs = Dot(ax, y), grhs = Dot(x, aty);
    EXPECT_LE(std::fabs(glhs - grhs), 1e-5 * std::fabs(glhs)) << glhs << " vs " << grhs;
  }
}

// The larger geometries with the gather code: the signed dot products cancel
// (fan2d_96: 107 from terms adding to 3.1e5 in magnitude) and the float
// forward is 2.4e-3 off the double reference's <Ax, y> there, so the bound
// is 1e-5 of |lhs| or 1e-8 of the terms' sum (the GPU test's bound).
TEST(DdProjector, GatherAdjointOnLargerKinds) {
  for (const auto& [name, g] : testing::LargerKinds()) {
    SCOPED_TRACE(name);
    const DdSystem sys = Build(g);
    const auto views = AllViews(g);
    const auto x = RandomUniform<float>(g.volume.size(), 0.2, 1.8, 11);
    const auto y = RandomUniform<float>(g.projection.sinogram_size(), -1.0, 1.0, 13);
    std::vector<float> ax(y.size()), aty(x.size());
    cpu::GatherForward(sys, x.data(), views, ax.data());
    cpu::GatherBack(sys, y.data(), views, aty.data());
    double terms = 0;
    for (size_t i = 0; i < y.size(); ++i) terms += std::fabs(static_cast<double>(ax[i]) * y[i]);
    const double lhs = Dot(ax, y), rhs = Dot(x, aty);
    EXPECT_LE(std::fabs(lhs - rhs), std::max(1e-5 * std::fabs(lhs), 1e-8 * terms)) << lhs << " vs " << rhs;
  }
}

// The CUDA kernels' code (dd_gather.h) on the host against the reference:
// what the GPU parity test will see, minus FMA contraction (the H200 run
// measured 2e-7, bench/results/2026-12-01-h200-recon-projector.md).
TEST(DdProjector, GatherCodeMatchesReference) {
  std::vector<testing::NamedGeometry> cases = KindsAndVariants();
  for (auto& named : testing::LargerKinds()) cases.push_back(named);
  for (const auto& [name, g] : cases) {
    SCOPED_TRACE(name);
    const DdSystem sys = Build(g);
    const auto views = AllViews(g);
    const auto x = RandomUniform<float>(g.volume.size(), 0.2, 1.8, 4);
    const auto y = RandomUniform<float>(g.projection.sinogram_size(), 0.1, 2.0, 5);
    std::vector<float> ref_fwd(y.size()), gat_fwd(y.size()), ref_back(x.size()), gat_back(x.size());
    cpu::Forward(sys, x.data(), views, ref_fwd.data());
    cpu::GatherForward(sys, x.data(), views, gat_fwd.data());
    cpu::Back(sys, y.data(), views, ref_back.data());
    cpu::GatherBack(sys, y.data(), views, gat_back.data());
    EXPECT_LE(RelL2(gat_fwd, ref_fwd), 1e-5);
    EXPECT_LE(RelL2(gat_back, ref_back), 1e-5);
    EXPECT_GT(MaxAbs(ref_back), 1.0);
  }
}

// The back projection in chunks of views (a small scratch budget: the GPU
// plan's chunking, run on the host) equals the one-chunk result up to the
// float rounding between chunks.
TEST(DdProjector, GatherBackInChunksMatchesOneChunk) {
  for (const auto& [name, g] : KindsAndVariants()) {
    SCOPED_TRACE(name);
    const DdSystem sys = Build(g);
    const auto views = AllViews(g);
    const auto y = RandomUniform<float>(g.projection.sinogram_size(), 0.1, 2.0, 8);
    std::vector<float> whole(g.volume.size()), ones(whole.size()), threes(whole.size());
    cpu::GatherBack(sys, y.data(), views, whole.data());
    cpu::GatherBack(sys, y.data(), views, ones.data(), 1);  // one view per chunk
    const int64_t view_bytes = g.projection.is_2d ? 16 * g.projection.det_cols
                                                  : 4 * g.projection.det_cols * g.projection.det_rows;
    cpu::GatherBack(sys, y.data(), views, threes.data(), 3 * view_bytes + 5);
    EXPECT_GT(MaxAbs(whole), 1.0);
    EXPECT_LE(RelL2(ones, whole), 1e-6);
    EXPECT_LE(RelL2(threes, whole), 1e-6);
  }
}

// The CPU backend runs the fastest host path: the gathers, except the
// reference back projection for row-coupled (tilted) detectors.
TEST(DdProjector, CpuBackendRunsTheGathers) {
  for (const auto& [name, g] : testing::AllKinds()) {
    SCOPED_TRACE(name);
    auto p = DdProjector::Create(g, Stream::Cpu());
    ASSERT_TRUE(p.ok()) << p.status();
    const auto views = AllViews(g);
    const auto x = RandomUniform<float>(g.volume.size(), 0.2, 1.8, 9);
    const auto y = RandomUniform<float>(g.projection.sinogram_size(), 0.1, 2.0, 10);
    std::vector<float> fwd(y.size()), want_fwd(y.size()), back(x.size()), want_back(x.size());
    ASSERT_TRUE((*p)->Forward(x.data(), fwd.data()).ok());
    ASSERT_TRUE((*p)->Back(y.data(), back.data()).ok());
    cpu::GatherForward((*p)->system(), x.data(), views, want_fwd.data());
    if ((*p)->system().any_row_coupled) {
      cpu::Back((*p)->system(), y.data(), views, want_back.data());
    } else {
      cpu::GatherBack((*p)->system(), y.data(), views, want_back.data());
    }
    EXPECT_EQ(fwd, want_fwd);
    EXPECT_EQ(back, want_back);
  }
}

// Explicit system matrices on tiny problems: column n of A from Forward(e_n),
// row m from Back(e_m). Equal entry by entry, so no voxel-cell pair is missed
// by the back projectors' searches (gather) or scatters (reference).
TEST(DdProjector, ExplicitMatricesAreTransposes) {
  for (const auto& [name, g] : testing::TinyKinds()) {
    SCOPED_TRACE(name);
    const DdSystem sys = Build(g);
    const auto views = AllViews(g);
    const int64_t nv = g.volume.size(), ns = g.projection.sinogram_size();
    std::vector<float> ref_cols(nv * ns), gat_cols(nv * ns), ref_rows(nv * ns), gat_rows(nv * ns);
    std::vector<float> e(nv, 0.f), out(ns);
    for (int64_t n = 0; n < nv; ++n) {
      e[n] = 1.f;
      cpu::Forward(sys, e.data(), views, out.data());
      for (int64_t m = 0; m < ns; ++m) ref_cols[m * nv + n] = out[m];
      cpu::GatherForward(sys, e.data(), views, out.data());
      for (int64_t m = 0; m < ns; ++m) gat_cols[m * nv + n] = out[m];
      e[n] = 0.f;
    }
    std::vector<float> f(ns, 0.f), back(nv);
    for (int64_t m = 0; m < ns; ++m) {
      f[m] = 1.f;
      cpu::Back(sys, f.data(), views, back.data());
      std::copy(back.begin(), back.end(), ref_rows.begin() + m * nv);
      cpu::GatherBack(sys, f.data(), views, back.data());
      std::copy(back.begin(), back.end(), gat_rows.begin() + m * nv);
      f[m] = 0.f;
    }
    const double scale = MaxAbs(ref_cols);
    ASSERT_GT(scale, 0.1);
    int nonzero = 0;
    for (int64_t q = 0; q < nv * ns; ++q) {
      nonzero += ref_cols[q] > 1e-6 * scale;
      ASSERT_NEAR(ref_rows[q], ref_cols[q], 1e-6 * scale) << "reference entry " << q;
      ASSERT_NEAR(gat_cols[q], ref_cols[q], 2e-6 * scale) << "gather forward entry " << q;
      ASSERT_NEAR(gat_rows[q], ref_cols[q], 2e-6 * scale) << "gather back entry " << q;
    }
    EXPECT_GT(nonzero, ns);  // most cells see more than one voxel
  }
}

// Fraction of voxel (i, j) inside the disc |p| <= radius, by 8x8 subsamples.
std::vector<float> Disc(const VolumeGeometry& v, double radius, float value) {
  std::vector<float> x(v.size(), 0.f);
  for (int64_t j = 0; j < v.ny; ++j) {
    for (int64_t i = 0; i < v.nx; ++i) {
      int inside = 0;
      for (int a = 0; a < 8; ++a) {
        for (int b = 0; b < 8; ++b) {
          const double px = v.min_x + (i + (a + 0.5) / 8) * v.dx(), py = v.min_y + (j + (b + 0.5) / 8) * v.dy();
          inside += px * px + py * py <= radius * radius;
        }
      }
      x[i + v.nx * j] = value * inside / 64.f;
    }
  }
  return x;
}

TEST(DdProjector, ParallelDiscProjectionIsChordLength) {
  const double radius = 20, value = 2;
  const std::vector<double> angles = {0, M_PI / 6, M_PI / 4, M_PI / 3, 0.9 * M_PI};
  CtGeometry g{CenteredVolume(64, 64), ParallelBeam2D(angles, 1.0, 65)};
  auto projector = DdProjector::Create(g, Stream::Cpu());
  ASSERT_TRUE(projector.ok()) << projector.status();
  const auto x = Disc(g.volume, radius, static_cast<float>(value));
  std::vector<float> y(g.projection.sinogram_size());
  ASSERT_TRUE((*projector)->Forward(x.data(), y.data()).ok());
  for (size_t p = 0; p < angles.size(); ++p) {
    for (int offset : {0, 10, -15}) {
      const double chord = 2 * std::sqrt(radius * radius - offset * offset) * value;
      // Column 32 is the detector centre; offsets are in mm (1 mm cells).
      EXPECT_NEAR(y[p * 65 + 32 + offset], chord, 0.02 * chord) << "view " << p << " offset " << offset;
    }
  }
}

TEST(DdProjector, ConeCubeCentralRayIsChordLength) {
  // A uniform 8 mm cube in a 16^3 volume; odd detector so a cell sits on the
  // central ray through the cube's centre.
  const std::vector<double> angles = {0, M_PI / 6, M_PI / 2, 1.2 * M_PI};
  CtGeometry g{CenteredVolume(16, 16, 16), ConeBeam(angles, 1.0, 1.0, 21, 21, 60, 40)};
  std::vector<float> x(g.volume.size(), 0.f);
  for (int k = 4; k < 12; ++k) {
    for (int j = 4; j < 12; ++j) {
      for (int i = 4; i < 12; ++i) x[i + 16 * (j + 16 * k)] = 1.f;
    }
  }
  auto projector = DdProjector::Create(g, Stream::Cpu());
  ASSERT_TRUE(projector.ok()) << projector.status();
  std::vector<float> y(g.projection.sinogram_size());
  ASSERT_TRUE((*projector)->Forward(x.data(), y.data()).ok());
  for (size_t p = 0; p < angles.size(); ++p) {
    // The ray crosses the faces perpendicular to the dominant axis.
    const double a = std::fmod(angles[p], M_PI / 2);
    const double chord = 8 / std::cos(std::min(a, M_PI / 2 - a));
    EXPECT_NEAR(y[p * 21 * 21 + 10 * 21 + 10], chord, 0.03 * chord) << "view " << p;
  }
}

TEST(DdProjector, SubsetsAreCompactViewsOfTheFullOperator) {
  const CtGeometry g = testing::Cone3D();
  const int subsets = 5;
  auto full = DdProjector::Create(g, Stream::Cpu());
  auto os = DdProjector::Create(g, Stream::Cpu(), {ExecutionMode::kDefault, subsets});
  ASSERT_TRUE(full.ok() && os.ok());
  EXPECT_EQ((*os)->num_subsets(), subsets);
  EXPECT_EQ((*os)->domain_size(), 16 * 16 * 16);
  EXPECT_EQ((*os)->elements_per_view(), 20 * 24);
  const int64_t per_view = (*os)->elements_per_view();
  const auto x = RandomUniform<float>(g.volume.size(), 0.2, 1.8, 6);
  const auto y = RandomUniform<float>(g.projection.sinogram_size(), -1, 1, 7);
  std::vector<float> full_y(y.size()), full_back(x.size());
  ASSERT_TRUE((*full)->Forward(x.data(), full_y.data()).ok());
  for (int s = 0; s < subsets; ++s) {
    const auto views = SubsetViews(g.projection.num_views(), subsets, s);
    std::vector<float> part((*os)->range_size(s));
    ASSERT_EQ(part.size(), views.size() * per_view);
    ASSERT_TRUE((*os)->Forward(x.data(), part.data(), s).ok());
    for (size_t k = 0; k < views.size(); ++k) {
      for (int64_t e = 0; e < per_view; ++e) ASSERT_EQ(part[k * per_view + e], full_y[views[k] * per_view + e]);
    }
    // Back of the compact block = back of the full sinogram with the other
    // views zeroed.
    std::vector<float> compact(part.size()), masked(y.size(), 0.f), back(x.size());
    ASSERT_TRUE(CopySubset(Stream::Cpu(), g.projection.num_views(), per_view, subsets, s,
                           SubsetCopy::kFullToCompact, y.data(), compact.data())
                    .ok());
    ASSERT_TRUE(CopySubset(Stream::Cpu(), g.projection.num_views(), per_view, subsets, s,
                           SubsetCopy::kCompactToFull, compact.data(), masked.data())
                    .ok());
    ASSERT_TRUE((*os)->Back(compact.data(), back.data(), s).ok());
    ASSERT_TRUE((*full)->Back(masked.data(), full_back.data()).ok());
    EXPECT_LE(RelL2(back, full_back), 1e-7);
    EXPECT_GT(MaxAbs(back), 0.1);
  }
}

TEST(DdProjector, RejectsBadGeometryAndArguments) {
  CtGeometry bad = testing::Parallel2D();
  bad.volume.nx = 0;
  auto r = DdProjector::Create(bad, Stream::Cpu());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("GridColCount"), std::string::npos) << r.status();

  // A cone view looking down z.
  CtGeometry down = testing::Cone3D();
  down.projection.views[3].source_or_ray = {0, 0, -60};
  down.projection.views[3].det_center = {0, 0, 30};
  down.projection.views[3].u = {1.5, 0, 0};
  down.projection.views[3].v = {0, 1.5, 0};
  r = DdProjector::Create(down, Stream::Cpu());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("row 3"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("along z"), std::string::npos) << r.status();

  // A fan whose source sits within the volume's extent along the slab axis
  // (a long, thin volume seen at 50 degrees: x-slabs, source at x = 46).
  CtGeometry thin{CenteredVolume(100, 4), FanBeam2D({50 * M_PI / 180}, 1.0, 64, 60, 60)};
  thin.volume.min_x = -50, thin.volume.max_x = 50;
  r = DdProjector::Create(thin, Stream::Cpu());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("source"), std::string::npos) << r.status();

  // A fan too wide for slabs: the edge rays graze them.
  CtGeometry wide{CenteredVolume(16, 16), FanBeam2D({M_PI / 4}, 4.0, 200, 30, 10)};
  r = DdProjector::Create(wide, Stream::Cpu());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("parallel to the"), std::string::npos) << r.status();

  const CtGeometry g = testing::Parallel2D();
  EXPECT_FALSE(DdProjector::Create(g, Stream::Cpu(), {ExecutionMode::kDefault, 0}).ok());
  EXPECT_FALSE(DdProjector::Create(g, Stream::Cpu(), {ExecutionMode::kDefault, 25}).ok());
  r = DdProjector::Create(g, Stream::Cpu(), {ExecutionMode::kDefault, 1, 0});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("back_scratch_bytes"), std::string::npos) << r.status();
  DdProjectorOptions odd_run;
  odd_run.back_z_run = 3;
  r = DdProjector::Create(g, Stream::Cpu(), odd_run);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("back_z_run"), std::string::npos) << r.status();
  auto p = DdProjector::Create(g, Stream::Cpu(), {ExecutionMode::kDeterministic, 4});
  ASSERT_TRUE(p.ok()) << p.status();
  std::vector<float> x(g.volume.size(), 1.f), y(g.projection.sinogram_size());
  EXPECT_EQ((*p)->Forward(nullptr, y.data()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*p)->Forward(x.data(), nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*p)->Back(nullptr, x.data()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*p)->Back(y.data(), nullptr, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*p)->Forward(x.data(), y.data(), 4).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*p)->Back(y.data(), x.data(), -2).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE((*p)->Forward(x.data(), y.data(), 3).ok());
}

}  // namespace
}  // namespace ct
}  // namespace recon
}  // namespace tessera
