// The fixed-point back projection (fixed_point.h) on the CPU backend:
//   - the scale: S * B in [2^61, 2^62) for a range of bounds, zero and clamped
//     bounds, non-finite bounds flagged; rounding is to nearest, ties to even;
//   - order independence: the LORs in natural, reversed and shuffled order
//     (and on however many threads run) give bit-identical volumes;
//   - the error bound: against a double sum of the very float terms the
//     scatter adds, every voxel is within N / (2 S) + 0.5 ulp, that allowance
//     is below 1e-3 ulp for voxels above 1e-3 of the largest, and >= 99.9% of
//     voxels are the correctly rounded sum;
//   - agreement with the float scatter (relative L2 2e-6) and the gather
//     (1e-5), the adjoint (2e-5, projector_test), scaled inputs (1e-30 and
//     1e30: the scale follows), non-finite inputs give NaN everywhere, zero
//     gives exact zeros.
#include "kernels/reconstruction/pet/fixed_point.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/reconstruction/pet/pet_testing.h"
#include "kernels/reconstruction/pet/projector.h"
#include "kernels/reconstruction/pet/projector_kernels.h"

namespace tessera {
namespace recon {
namespace pet {
namespace {

using ::testing::HasSubstr;
using testing::Random;
using testing::RelL2;
using testing::Tof;

std::vector<PetGeometry> Geometries() {
  return {testing::Fan2D(Tof(7, 5.0, 9.0)), testing::Parallel2D(), testing::Cone3D(Tof(5, 4.0, 7.0)),
          testing::Cone3D()};
}

TEST(FixedPointTest, ScalePutsTheBoundJustBelowTwoToThe62) {
  for (double bound : {1e-12, 1e-3, 0.5, 0.7, 1.0, 3.0, 1024.0, 1e8, 3.3e20, 1e40}) {
    const FixedPointScale f = ChooseFixedPointScale(bound);
    ASSERT_TRUE(f.finite) << bound;
    const double scaled = bound * std::ldexp(1.0, f.exponent);
    EXPECT_LT(scaled, std::ldexp(1.0, 62)) << bound;
    EXPECT_GE(scaled, std::ldexp(1.0, 61)) << bound;
    EXPECT_EQ(f.scale, std::ldexp(1.0f, f.exponent));
    EXPECT_EQ(f.scale * f.inv_scale, 1.0f);
  }
  EXPECT_EQ(ChooseFixedPointScale(0.0).exponent, 62);
  EXPECT_TRUE(ChooseFixedPointScale(0.0).finite);
  EXPECT_EQ(ChooseFixedPointScale(1e-50).exponent, kFixedPointMaxExponent);  // clamped
  EXPECT_TRUE(ChooseFixedPointScale(1e-50).finite);
  EXPECT_FALSE(ChooseFixedPointScale(NAN).finite);
  EXPECT_FALSE(ChooseFixedPointScale(INFINITY).finite);
  EXPECT_FALSE(ChooseFixedPointScale(-1.0).finite);
  EXPECT_FALSE(ChooseFixedPointScale(1e60).finite);  // would need S < 2^-126
}

TEST(FixedPointTest, RoundsToNearestEvenAndConvertsBack) {
  EXPECT_EQ(ToFixed(0.5f, 1.0f), 0);
  EXPECT_EQ(ToFixed(1.5f, 1.0f), 2);
  EXPECT_EQ(ToFixed(2.5f, 1.0f), 2);
  EXPECT_EQ(ToFixed(-0.5f, 1.0f), 0);
  EXPECT_EQ(ToFixed(-1.5f, 1.0f), -2);
  EXPECT_EQ(ToFixed(0.3f, 1.0f), 0);
  EXPECT_EQ(ToFixed(3.0f, std::ldexp(1.0f, 40)), 3ll << 40);
  EXPECT_EQ(ToFixed(-0.75f, 4.0f), -3);
  const FixedPointScale f = ChooseFixedPointScale(1.0);  // S = 2^61
  EXPECT_EQ(f.exponent, 61);
  const long long q = ToFixed(-1.25f, f.scale) + ToFixed(0.5f, f.scale);
  EXPECT_EQ(FromFixed(static_cast<unsigned long long>(q), f), -0.75f);
  EXPECT_TRUE(std::isnan(FromFixed(0, ChooseFixedPointScale(NAN))));
}

// The projectors keep a pointer to their stream: one that outlives them all.
const Stream& Cpu() {
  static const Stream* stream = new Stream(Stream::Cpu());
  return *stream;
}

// One projector per geometry (attenuated) and its host parameters.
struct Fixture {
  std::unique_ptr<PetProjector> A;
  std::vector<float> mu;
};

Fixture Make(const PetGeometry& g, DeterministicBack back = DeterministicBack::kFixedPoint) {
  Fixture s;
  s.mu = Random(g.ct.volume.size(), 5, 0.0f, 0.02f);
  PetProjectorOptions options;
  options.num_subsets = 3;
  options.mode = ExecutionMode::kDeterministic;
  options.mu_map = s.mu.data();
  options.deterministic_back = back;
  auto A = PetProjector::Create(g, Cpu(), options);
  EXPECT_TRUE(A.ok()) << A.status();
  s.A = std::move(*A);
  return s;
}

TEST(FixedPointTest, AnyLorOrderGivesTheSameBits) {
  for (const PetGeometry& g : Geometries()) {
    Fixture s = Make(g);
    PetProjector& A = *s.A;
    ASSERT_EQ(A.deterministic_back(), DeterministicBack::kFixedPoint);
    const ProjectorParams& p = A.params();
    auto scratch = A.fixed_point_scratch();
    ASSERT_TRUE(scratch.ok());
    for (int subset : {kAllSubsets, 1}) {
      const ViewRange range = *A.Range(subset);
      const std::vector<float> y = Random(A.range_size(subset), 7, -1.0f, 1.0f);  // signed: cancellation too
      const int64_t lors = static_cast<int64_t>(p.cols) * p.rows * range.count;
      std::vector<int64_t> reversed(lors), shuffled(lors);
      std::iota(reversed.rbegin(), reversed.rend(), int64_t{0});
      std::iota(shuffled.begin(), shuffled.end(), int64_t{0});
      std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(3));
      std::vector<float> a(A.domain_size()), b(A.domain_size()), c(A.domain_size()), d(A.domain_size());
      cpu::BackFixedPoint(p, range, y.data(), a.data(), *scratch);
      cpu::BackFixedPoint(p, range, y.data(), b.data(), *scratch, reversed.data());
      cpu::BackFixedPoint(p, range, y.data(), c.data(), *scratch, shuffled.data());
      ASSERT_TRUE(A.Back(y.data(), d.data(), subset).ok());
      EXPECT_EQ(a, b) << Describe(g) << " subset " << subset;
      EXPECT_EQ(a, c) << Describe(g) << " subset " << subset;
      EXPECT_EQ(a, d) << Describe(g) << " subset " << subset;
    }
  }
}

// The float terms the scatter adds, summed in double, and their count per voxel.
struct Record {
  double* sum;
  int64_t* count;
  void operator()(int64_t voxel, float what) const {
    sum[voxel] += what;
    ++count[voxel];
  }
};

TEST(FixedPointTest, WithinTheErrorBoundOfTheExactSumOfTheSameTerms) {
  for (const PetGeometry& g : Geometries()) {
    Fixture s = Make(g);
    PetProjector& A = *s.A;
    const ProjectorParams& p = A.params();
    const ViewRange range = *A.Range(kAllSubsets);
    const std::vector<float> y = Random(A.range_size(), 8, 0.1f, 2.0f);
    std::vector<float> x(A.domain_size());
    const FixedPointScale f = cpu::BackFixedPoint(p, range, y.data(), x.data(), *A.fixed_point_scratch());
    ASSERT_TRUE(f.finite);

    const int64_t det = static_cast<int64_t>(p.cols) * p.rows;
    std::vector<double> exact(x.size(), 0.0);
    std::vector<int64_t> count(x.size(), 0);
    const Record record{exact.data(), count.data()};
    for (int64_t l = 0; l < det * range.count; ++l) {
      const int64_t q = l / det, lor = l % det;
      const int view = range.first + static_cast<int>(q) * range.stride;
      const Lor L = MakeLor(p, view, static_cast<int>(lor % p.cols), static_cast<int>(lor / p.cols));
      BackLor(p, L, y.data() + q * det * p.tof.bins + lor, det, p.atten[lor + det * view], record);
    }
    int64_t rounded = 0, touched = 0;
    double worst_allowance_ulps = 0;  // over voxels above 1e-3 of the largest
    const float top = *std::max_element(x.begin(), x.end());
    for (size_t v = 0; v < x.size(); ++v) {
      if (count[v] == 0) {
        EXPECT_EQ(x[v], 0.0f);
        continue;
      }
      ++touched;
      const double ulp = std::nextafter(std::fabs(x[v]), INFINITY) - std::fabs(x[v]);
      const double allowance = 0.5 * static_cast<double>(count[v]) * f.inv_scale;
      ASSERT_LE(std::fabs(x[v] - exact[v]), allowance + 0.5 * ulp * (1 + 1e-6)) << Describe(g) << " voxel " << v;
      if (x[v] >= 1e-3f * top) worst_allowance_ulps = std::max(worst_allowance_ulps, allowance / ulp);
      if (x[v] == static_cast<float>(exact[v])) ++rounded;
    }
    ASSERT_GT(touched, 0);
    std::printf("%s: S = 2^%d, worst allowance %.2e ulp, %lld of %lld voxels correctly rounded\n",
                Describe(g).c_str(), f.exponent, worst_allowance_ulps, static_cast<long long>(rounded),
                static_cast<long long>(touched));
    EXPECT_LT(worst_allowance_ulps, 1e-3) << Describe(g);
    EXPECT_GE(rounded, touched - touched / 1000) << Describe(g);
  }
}

TEST(FixedPointTest, AgreesWithTheFloatScatterTheGatherAndTheAdjoint) {
  for (const PetGeometry& g : Geometries()) {
    Fixture s = Make(g);
    PetProjector& A = *s.A;
    for (int subset : {kAllSubsets, 2}) {
      const std::vector<float> x = Random(A.domain_size(), 1);
      const std::vector<float> y = Random(A.range_size(subset), 2);
      std::vector<float> ax(A.range_size(subset)), fixed(A.domain_size()), scatter(A.domain_size()),
          gather(A.domain_size());
      ASSERT_TRUE(A.Forward(x.data(), ax.data(), subset).ok());
      ASSERT_TRUE(A.BackWithMode(y.data(), fixed.data(), subset, ExecutionMode::kDeterministic).ok());
      ASSERT_TRUE(A.BackWithMode(y.data(), scatter.data(), subset, ExecutionMode::kDefault).ok());
      cpu::BackGather(A.params(), *A.Range(subset), y.data(), gather.data());
      EXPECT_LT(RelL2(fixed, scatter), 2e-6) << Describe(g) << " subset " << subset;
      EXPECT_LT(RelL2(fixed, gather), 1e-5) << Describe(g) << " subset " << subset;
      EXPECT_NEAR(testing::DotD(x, fixed) / testing::DotD(ax, y), 1.0, 2e-5) << Describe(g);
    }
  }
}

// The scale follows the data: y * 1e30 and y * 1e-30 give the scaled volume.
TEST(FixedPointTest, ScaleFollowsTheMagnitudeOfTheData) {
  Fixture s = Make(testing::Cone3D(Tof(5, 4.0, 7.0)));
  PetProjector& A = *s.A;
  const std::vector<float> y = Random(A.range_size(), 9);
  std::vector<float> x(A.domain_size()), big(A.domain_size()), tiny(A.domain_size());
  ASSERT_TRUE(A.Back(y.data(), x.data()).ok());
  for (float factor : {1e30f, 1e-30f}) {
    std::vector<float> ys = y;
    for (float& v : ys) v *= factor;
    std::vector<float> xs(A.domain_size());
    ASSERT_TRUE(A.Back(ys.data(), xs.data()).ok());
    for (float& v : xs) v /= factor;
    EXPECT_LT(RelL2(xs, x), 1e-6) << factor;
  }
}

TEST(FixedPointTest, NonFiniteDataGivesNanEverywhereAndZeroGivesZero) {
  Fixture s = Make(testing::Fan2D(Tof(7, 5.0, 9.0)));
  PetProjector& A = *s.A;
  std::vector<float> y(A.range_size(), 0.0f), x(A.domain_size(), 1.0f);
  ASSERT_TRUE(A.Back(y.data(), x.data()).ok());
  EXPECT_EQ(x, std::vector<float>(x.size(), 0.0f));
  for (float bad : {NAN, INFINITY, -INFINITY}) {
    y = Random(A.range_size(), 4);
    y[y.size() / 2] = bad;
    ASSERT_TRUE(A.Back(y.data(), x.data()).ok());
    EXPECT_TRUE(std::all_of(x.begin(), x.end(), [](float v) { return std::isnan(v); })) << bad;
  }
}

TEST(FixedPointTest, ProjectorOptions) {
  const Stream cpu = Stream::Cpu();
  auto automatic = PetProjector::Create(testing::Fan2D(), cpu, {1, ExecutionMode::kDeterministic, nullptr});
  ASSERT_TRUE(automatic.ok());
  EXPECT_EQ((*automatic)->deterministic_back(), DeterministicBack::kGather);  // the CPU keeps the gather
  PetProjectorOptions bad;
  bad.deterministic_back = static_cast<DeterministicBack>(7);
  auto refused = PetProjector::Create(testing::Fan2D(), cpu, bad);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("deterministic_back"));
  EXPECT_STREQ(DeterministicBackName(DeterministicBack::kFixedPoint), "fixed-point scatter");
}

}  // namespace
}  // namespace pet
}  // namespace recon
}  // namespace tessera
