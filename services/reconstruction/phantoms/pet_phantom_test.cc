#include "services/reconstruction/phantoms/pet_phantom.h"

#include <cmath>

#include "gtest/gtest.h"
#include "services/reconstruction/phantoms/analytic_sinogram.h"

namespace tessera::recon::phantoms {
namespace {

constexpr double kPi = 3.14159265358979323846;

CtGeometry Parallel2D(int64_t cols, int64_t views) {
  CtGeometry g;
  g.volume = CenteredVolume(64, 64);
  g.projection = ParallelBeam2D(EvenAngles(views, kPi), 1.0, cols);
  return g;
}

TEST(PetPhantomTest, ExpectedCountsAreAttenuatedActivityIntegrals) {
  // Activity disc r inside an attenuating disc R: the central LOR sees
  // scale * exp(-2 R mu) * 2 r a.
  PetPhantom p;
  p.activity = Disc(10, 3.0, true);
  p.attenuation = Disc(25, kWaterMu, true);
  const CtGeometry g = Parallel2D(65, 8);
  PetSimulationOptions o;
  o.total_counts = 0;
  o.scale = 2.0;
  o.poisson = false;
  absl::StatusOr<PetSinogram> s = SimulatePetSinogram(p, g, o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->scale, 2.0);
  const int64_t centre = 32;
  for (int64_t v = 0; v < 8; ++v) {
    EXPECT_NEAR(s->expected.data<float>()[centre + 65 * v], 2.0 * std::exp(-50 * kWaterMu) * 20 * 3.0, 1e-4);
    EXPECT_NEAR(s->attenuation_factors.data<float>()[centre + 65 * v], std::exp(-50 * kWaterMu), 1e-6);
    EXPECT_EQ(s->counts.data<float>()[centre + 65 * v], s->expected.data<float>()[centre + 65 * v]);
  }
  // A LOR at offset 15 mm misses the activity but crosses the body.
  EXPECT_EQ(s->expected.data<float>()[centre + 15], 0.0f);
  EXPECT_NEAR(s->attenuation_factors.data<float>()[centre + 15],
              std::exp(-2 * std::sqrt(25.0 * 25 - 15 * 15) * kWaterMu), 1e-6);
}

TEST(PetPhantomTest, PoissonCountsHaveTheExpectedMeanAndVariance) {
  const CtGeometry g = Parallel2D(96, 60);
  const PetPhantom p = MakePetPhantom(60, true);
  PetSimulationOptions o;
  o.total_counts = 2e6;
  o.seed = 42;
  absl::StatusOr<PetSinogram> s = SimulatePetSinogram(p, g, o);
  ASSERT_TRUE(s.ok()) << s.status();
  const int64_t n = s->counts.num_elements();
  double expected_sum = 0, count_sum = 0, chi2 = 0;
  int64_t used = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double y = s->expected.data<float>()[i], k = s->counts.data<float>()[i];
    ASSERT_EQ(k, std::floor(k));
    ASSERT_GE(k, 0);
    expected_sum += y;
    count_sum += k;
    if (y > 20) {
      chi2 += (k - y) * (k - y) / y;  // Poisson: variance = mean
      ++used;
    }
  }
  EXPECT_NEAR(expected_sum, 2e6, 2e6 * 1e-5);
  EXPECT_NEAR(count_sum, 2e6, 5 * std::sqrt(2e6));
  ASSERT_GT(used, 1000);
  EXPECT_NEAR(chi2 / used, 1.0, 0.1);

  // Same seed, same counts; another seed, other counts.
  absl::StatusOr<PetSinogram> again = SimulatePetSinogram(p, g, o);
  o.seed = 43;
  absl::StatusOr<PetSinogram> other = SimulatePetSinogram(p, g, o);
  ASSERT_TRUE(again.ok() && other.ok());
  int64_t same = 0, differ = 0;
  for (int64_t i = 0; i < n; ++i) {
    same += again->counts.data<float>()[i] == s->counts.data<float>()[i];
    differ += other->counts.data<float>()[i] != s->counts.data<float>()[i];
  }
  EXPECT_EQ(same, n);
  EXPECT_GT(differ, n / 4);
}

TEST(PetPhantomTest, PhantomRegionsHaveTheirDocumentedValues) {
  const PetPhantom p = MakePetPhantom(200, true);
  EXPECT_DOUBLE_EQ(ValueAt(p.activity, {0, 0, 0}), 1.0);
  EXPECT_NEAR(ValueAt(p.attenuation, {0, 0, 0}), kWaterMu, 1e-12);
  EXPECT_NEAR(ValueAt(p.activity, {-42, 0, 0}), 0.25, 1e-12);  // lung
  EXPECT_NEAR(ValueAt(p.attenuation, {-42, 0, 0}), kLungMu, 1e-12);
  EXPECT_NEAR(ValueAt(p.activity, {0, -42, 0}), 0.5, 1e-12);   // spine
  EXPECT_NEAR(ValueAt(p.attenuation, {0, -42, 0}), kBoneMu, 1e-12);
  EXPECT_NEAR(ValueAt(p.activity, {5, 30, 0}), 4.0, 1e-12);
  EXPECT_NEAR(ValueAt(p.activity, {50, -30, 0}), 6.0, 1e-12);
  EXPECT_NEAR(ValueAt(p.activity, {-45, 15, 0}), 8.0, 1e-12);
  EXPECT_NEAR(ValueAt(p.activity, {-10, -15, 0}), 0.0, 1e-12);  // cold region
  EXPECT_EQ(ValueAt(p.activity, {0, 65, 0}), 0.0);              // outside the body
  const PetPhantom p3 = MakePetPhantom(200, false, 100);
  EXPECT_NEAR(ValueAt(p3.activity, {50, -30, 7.5}), 6.0, 1e-12);  // lesion 2 sits at z = 0.15 fov_z / 2
}

TEST(PetPhantomTest, ThreeDConeAndErrors) {
  CtGeometry g;
  g.volume = CenteredVolume(16, 16, 16);
  g.projection = ConeBeam(EvenAngles(4, 2 * kPi), 1.5, 1.5, 8, 12, 60, 40);
  const PetPhantom p = MakePetPhantom(16, false);
  absl::StatusOr<PetSinogram> s = SimulatePetSinogram(p, g, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->counts.shape(), (Shape{12, 8, 4}));
  EXPECT_EQ(SimulatePetSinogram(MakePetPhantom(16, true), g, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  PetSimulationOptions bad;
  bad.total_counts = 0;
  bad.scale = 0;
  EXPECT_EQ(SimulatePetSinogram(p, g, bad).status().code(), absl::StatusCode::kInvalidArgument);
  PetPhantom empty;
  empty.activity.is_2d = empty.attenuation.is_2d = false;
  EXPECT_EQ(SimulatePetSinogram(empty, g, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::recon::phantoms
