// CPU PET projector: adjointness (<Ax, y> = <x, A^T y>) for 2-D fan, 2-D
// parallel and 3-D cone geometries with and without TOF and attenuation, in
// both back projection orders and per subset; gather equals scatter; line
// integrals, TOF localisation and attenuation factors against hand values;
// efficiencies (normalisation) scale each LOR's bins;
// validation errors name the field.
#include "kernels/reconstruction/pet/projector.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/reconstruction/pet/pet_testing.h"

namespace tessera {
namespace recon {
namespace pet {
namespace {

using ::testing::HasSubstr;
using testing::DotD;
using testing::Random;
using testing::RelL2;
using testing::Tof;

struct Case {
  const char* name;
  PetGeometry geometry;
};

std::vector<Case> Cases() {
  return {
      {"fan2d", testing::Fan2D()},
      {"fan2d_tof", testing::Fan2D(Tof(7, 5.0, 9.0))},
      {"parallel2d_tof", testing::Parallel2D(Tof(4, 6.0, 10.0))},
      {"cone3d", testing::Cone3D()},
      {"cone3d_tof", testing::Cone3D(Tof(5, 4.0, 7.0))},
  };
}

// <A x, y> against <x, A^T y> to float precision (relative 2e-5 of the
// products' magnitude), for the whole range and one subset, in both modes,
// with a mu-map too.
TEST(PetProjectorTest, BackProjectionIsTheAdjoint) {
  const Stream cpu = Stream::Cpu();
  for (const Case& c : Cases()) {
    for (bool attenuate : {false, true}) {
      const std::vector<float> mu = Random(c.geometry.ct.volume.size(), 5, 0.0f, 0.02f);
      PetProjectorOptions options;
      options.num_subsets = 3;
      options.mu_map = attenuate ? mu.data() : nullptr;
      auto projector = PetProjector::Create(c.geometry, cpu, options);
      ASSERT_TRUE(projector.ok()) << c.name << ": " << projector.status();
      PetProjector& A = **projector;
      for (int subset : {kAllSubsets, 1}) {
        const std::vector<float> x = Random(A.domain_size(), 1);
        const std::vector<float> y = Random(A.range_size(subset), 2);
        std::vector<float> ax(A.range_size(subset)), aty(A.domain_size()), aty_gather(A.domain_size());
        ASSERT_TRUE(A.Forward(x.data(), ax.data(), subset).ok());
        ASSERT_TRUE(A.BackWithMode(y.data(), aty.data(), subset, ExecutionMode::kDefault).ok());
        ASSERT_TRUE(A.BackWithMode(y.data(), aty_gather.data(), subset, ExecutionMode::kDeterministic).ok());
        const double lhs = DotD(ax, y), rhs = DotD(x, aty), rhs_gather = DotD(x, aty_gather);
        ASSERT_GT(lhs, 0) << c.name;
        EXPECT_NEAR(rhs / lhs, 1.0, 2e-5) << c.name << " atten " << attenuate << " subset " << subset;
        EXPECT_NEAR(rhs_gather / lhs, 1.0, 2e-5) << c.name << " atten " << attenuate << " subset " << subset;
        // Same terms in another order: voxel by voxel.
        EXPECT_LT(RelL2(aty_gather, aty), 1e-5) << c.name << " atten " << attenuate << " subset " << subset;
      }
    }
  }
}

TEST(PetProjectorTest, GatherIsIndependentOfThreadsAndRepeatable) {
  const Stream cpu = Stream::Cpu();
  auto projector = PetProjector::Create(testing::Cone3D(Tof(5, 4.0, 7.0)), cpu,
                                        {1, ExecutionMode::kDeterministic, nullptr});
  ASSERT_TRUE(projector.ok()) << projector.status();
  const std::vector<float> y = Random((*projector)->range_size(), 3);
  std::vector<float> a((*projector)->domain_size()), b((*projector)->domain_size());
  ASSERT_TRUE((*projector)->Back(y.data(), a.data()).ok());
  ASSERT_TRUE((*projector)->Back(y.data(), b.data()).ok());
  EXPECT_EQ(a, b);
}

// A uniform image of ones: the central vertical ray of a parallel view at
// angle 0 (direction -y) crosses the 20 mm of the grid: 20 samples of 1 mm.
TEST(PetProjectorTest, LineIntegralOfOnesIsTheChordLength) {
  const Stream cpu = Stream::Cpu();
  PetGeometry g = testing::Parallel2D();
  auto projector = PetProjector::Create(g, cpu);
  ASSERT_TRUE(projector.ok());
  const std::vector<float> ones((*projector)->domain_size(), 1.0f);
  std::vector<float> y((*projector)->range_size());
  ASSERT_TRUE((*projector)->Forward(ones.data(), y.data()).ok());
  // Columns 14..21 of 36 (1 mm apart, centred) lie well inside x in [-12, 12].
  for (int c = 14; c <= 21; ++c) EXPECT_NEAR(y[c], 20.0f, 1e-4) << "col " << c;
  // Outside the grid: nothing.
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[35], 0.0f);
}

// The TOF bins of an LOR sum to erf(3/sqrt 2) = 0.9973 of the non-TOF value
// when the bins cover the line and its +-3 sigma reach.
TEST(PetProjectorTest, TofBinsSumToTheTruncatedKernelMass) {
  const Stream cpu = Stream::Cpu();
  const PetGeometry plain = testing::Fan2D();
  const PetGeometry tof = testing::Fan2D(Tof(15, 5.0, 9.0));  // +-37.5 mm > 16 + 11.5
  auto a = PetProjector::Create(plain, cpu);
  auto b = PetProjector::Create(tof, cpu);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::vector<float> x = Random((*a)->domain_size(), 4);
  std::vector<float> ya((*a)->range_size()), yb((*b)->range_size());
  ASSERT_TRUE((*a)->Forward(x.data(), ya.data()).ok());
  ASSERT_TRUE((*b)->Forward(x.data(), yb.data()).ok());
  const int64_t cols = plain.cols(), bins = 15;
  const double mass = std::erf(3.0 / std::sqrt(2.0));
  for (int64_t p = 0; p < plain.num_views(); ++p) {
    for (int64_t c = 0; c < cols; ++c) {
      double sum = 0;
      for (int64_t k = 0; k < bins; ++k) sum += yb[c + cols * (k + bins * p)];
      ASSERT_NEAR(sum, mass * ya[c + cols * p], 2e-5 * (1 + ya[c + cols * p])) << "view " << p << " col " << c;
    }
  }
}

// A hot voxel at y = +7.5 seen by the parallel view at angle 0 (rays run
// towards -y): t = -7.5 mm, which is bin floor(-7.5 / 6 + 11 / 2) = 4 of 11.
TEST(PetProjectorTest, TofLocatesAPointSource) {
  const Stream cpu = Stream::Cpu();
  const PetGeometry g = testing::Parallel2D(Tof(11, 6.0, 6.0));
  auto projector = PetProjector::Create(g, cpu);
  ASSERT_TRUE(projector.ok());
  std::vector<float> x((*projector)->domain_size(), 0.0f);
  const int i = 12, j = 17;  // centre (0.5, 7.5)
  x[i + 24 * j] = 1.0f;
  std::vector<float> y((*projector)->range_size());
  ASSERT_TRUE((*projector)->Forward(x.data(), y.data()).ok());
  const int c = 18;  // column centre x = 0.5
  std::vector<float> profile(11);
  for (int k = 0; k < 11; ++k) profile[k] = y[c + 36 * k];
  EXPECT_EQ(std::max_element(profile.begin(), profile.end()) - profile.begin(), 4);
  EXPECT_GT(profile[4], 0.3f);
}

// Uniform mu over the grid: the central vertical ray's attenuation factor is
// exp(-mu * 20 mm), and the forward projection of ones is 20 times that.
TEST(PetProjectorTest, AttenuationFactorsAreExpOfMinusTheLineIntegral) {
  const Stream cpu = Stream::Cpu();
  const PetGeometry g = testing::Parallel2D();
  const std::vector<float> mu(g.ct.volume.size(), 0.01f);
  auto projector = PetProjector::Create(g, cpu, {1, ExecutionMode::kDefault, mu.data()});
  ASSERT_TRUE(projector.ok()) << projector.status();
  const float* a = (*projector)->attenuation();
  ASSERT_NE(a, nullptr);
  EXPECT_NEAR(a[17], std::exp(-0.2), 1e-5);
  const std::vector<float> ones((*projector)->domain_size(), 1.0f);
  std::vector<float> y((*projector)->range_size());
  ASSERT_TRUE((*projector)->Forward(ones.data(), y.data()).ok());
  EXPECT_NEAR(y[17], 20 * std::exp(-0.2), 1e-4);
}

// Detection efficiencies (normalisation) multiply every TOF bin of their LOR
// on top of the attenuation factors; the back projection stays the adjoint,
// and the fixed-point scatter's bound covers factors above 1 (it matches the
// float scatter; with the bound of factors <= 1 it could overflow).
TEST(PetProjectorTest, EfficienciesScaleEachLorOnTopOfAttenuation) {
  const Stream cpu = Stream::Cpu();
  for (const Case& c : Cases()) {
    const std::vector<float> mu = Random(c.geometry.ct.volume.size(), 5, 0.0f, 0.02f);
    const std::vector<float> eff = Random(c.geometry.num_lors(), 6, 0.5f, 4.0f);
    PetProjectorOptions plain;
    plain.mu_map = mu.data();
    PetProjectorOptions normalised = plain;
    normalised.efficiency = eff.data();
    normalised.deterministic_back = DeterministicBack::kFixedPoint;
    auto a = PetProjector::Create(c.geometry, cpu, plain);
    auto b = PetProjector::Create(c.geometry, cpu, normalised);
    ASSERT_TRUE(a.ok() && b.ok()) << c.name;
    const std::vector<float> x = Random((*a)->domain_size(), 1);
    std::vector<float> ya((*a)->range_size()), yb((*a)->range_size());
    ASSERT_TRUE((*a)->Forward(x.data(), ya.data()).ok());
    ASSERT_TRUE((*b)->Forward(x.data(), yb.data()).ok());
    const int64_t det = c.geometry.cols() * c.geometry.rows(), bins = c.geometry.tof.num_bins;
    for (int64_t i = 0; i < static_cast<int64_t>(ya.size()); ++i) {
      const int64_t lor = i % det + det * (i / (det * bins));
      ASSERT_NEAR(yb[i], ya[i] * eff[lor], 1e-5f * (1 + std::fabs(yb[i]))) << c.name << " element " << i;
    }
    const std::vector<float> y = Random((*b)->range_size(), 2);
    std::vector<float> scatter((*b)->domain_size()), fixed((*b)->domain_size());
    ASSERT_TRUE((*b)->BackWithMode(y.data(), scatter.data(), kAllSubsets, ExecutionMode::kDefault).ok());
    ASSERT_TRUE((*b)->BackWithMode(y.data(), fixed.data(), kAllSubsets, ExecutionMode::kDeterministic).ok());
    EXPECT_NEAR(DotD(x, scatter) / DotD(yb, y), 1.0, 2e-5) << c.name;
    EXPECT_LT(RelL2(fixed, scatter), 1e-5) << c.name;
    for (float v : fixed) ASSERT_TRUE(std::isfinite(v)) << c.name;
  }
  std::vector<float> eff(testing::Fan2D().num_lors(), 1.0f);
  eff[7] = -0.5f;
  PetProjectorOptions bad;
  bad.efficiency = eff.data();
  auto refused = PetProjector::Create(testing::Fan2D(), cpu, bad);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("efficiency[7]"));
}

TEST(PetProjectorTest, RejectsBadInputsNamingTheField) {
  const Stream cpu = Stream::Cpu();
  auto bad_tof = PetProjector::Create(testing::Fan2D(Tof(5, 4.0, -1.0)), cpu);
  EXPECT_EQ(bad_tof.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_tof.status().message(), HasSubstr("tof.fwhm_mm"));
  auto bad_bins = PetProjector::Create(testing::Fan2D(Tof(0, 4.0, 5.0)), cpu);
  EXPECT_THAT(bad_bins.status().message(), HasSubstr("tof.num_bins"));
  auto bad_subsets = PetProjector::Create(testing::Fan2D(), cpu, {0, ExecutionMode::kDefault, nullptr});
  EXPECT_THAT(bad_subsets.status().message(), HasSubstr("num_subsets"));
  PetGeometry bad_geometry = testing::Fan2D();
  bad_geometry.ct.projection.det_cols = 0;
  EXPECT_THAT(PetProjector::Create(bad_geometry, cpu).status().message(), HasSubstr("proj_geom"));
  std::vector<float> mu(testing::Fan2D().ct.volume.size(), 0.01f);
  mu[30] = NAN;
  auto bad_mu = PetProjector::Create(testing::Fan2D(), cpu, {1, ExecutionMode::kDefault, mu.data()});
  EXPECT_EQ(bad_mu.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_mu.status().message(), HasSubstr("mu_map voxel 30 (x 6, y 1, z 0)"));
  auto ok = PetProjector::Create(testing::Fan2D(), cpu, {2, ExecutionMode::kDefault, nullptr});
  ASSERT_TRUE(ok.ok());
  std::vector<float> x((*ok)->domain_size()), y((*ok)->range_size());
  EXPECT_THAT((*ok)->Forward(x.data(), y.data(), 2).message(), HasSubstr("subset 2 out of range"));
  EXPECT_FALSE((*ok)->Back(nullptr, x.data()).ok());
}

}  // namespace
}  // namespace pet
}  // namespace recon
}  // namespace tessera
