// TV on the CPU against plain double-precision references written here:
// TvNorm exactly (a triple loop over voxels), TvGradient against central
// differences of the smoothed TV, and TvProx through its objective
// 0.5 ||x - b||^2 + w TV(x): no random perturbation of the result and no
// long (2000-iteration) run does better, the constrained prox beats a clamp
// of the unconstrained one, and a complex image's prox turns with its phase.
#include "kernels/reconstruction/regularizers/tv.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace tessera {
namespace recon {
namespace regularizers {
namespace {

std::vector<float> RandomImage(const TvShape& s, unsigned seed, float lo = -1, float hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> x(static_cast<size_t>(s.size()));
  for (float& v : x) v = u(rng);
  return x;
}

// A piecewise-constant image plus noise: what TV denoising is for.
std::vector<float> NoisyBlocks(const TvShape& s, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0, 0.2f);
  std::vector<float> x(static_cast<size_t>(s.size()));
  for (int64_t k = 0; k < s.nz; ++k)
    for (int64_t j = 0; j < s.ny; ++j)
      for (int64_t i = 0; i < s.nx; ++i)
        for (int c = 0; c < s.channels; ++c) {
          const float block = (i > s.nx / 3 && j < 2 * s.ny / 3) ? 1.0f + 0.5f * c : 0.2f;
          x[((k * s.ny + j) * s.nx + i) * s.channels + c] = block + noise(rng);
        }
  return x;
}

// sum_v sqrt(eps^2 + sum_{d,c} (x(v + e_d) - x(v))^2), forward differences, 0 past the edge.
double ReferenceTv(const TvShape& s, const std::vector<double>& x, double eps = 0) {
  const int64_t n[3] = {s.nx, s.ny, s.nz};
  double total = 0;
  for (int64_t k = 0; k < s.nz; ++k)
    for (int64_t j = 0; j < s.ny; ++j)
      for (int64_t i = 0; i < s.nx; ++i) {
        const int64_t at[3] = {i, j, k};
        const int64_t v = (k * s.ny + j) * s.nx + i;
        double sq = eps * eps;
        for (int d = 0; d < 3; ++d) {
          if (at[d] + 1 >= n[d]) continue;
          const int64_t step = d == 0 ? 1 : (d == 1 ? s.nx : s.nx * s.ny);
          for (int c = 0; c < s.channels; ++c) {
            const double diff = x[(v + step) * s.channels + c] - x[v * s.channels + c];
            sq += diff * diff;
          }
        }
        total += std::sqrt(sq);
      }
  return total;
}

std::vector<double> ToDouble(const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); }

double ProxObjective(const TvShape& s, double w, const std::vector<float>& b, const std::vector<double>& x) {
  double fit = 0;
  for (size_t i = 0; i < b.size(); ++i) fit += 0.5 * (x[i] - b[i]) * (x[i] - b[i]);
  return fit + w * ReferenceTv(s, x);
}

std::vector<float> Prox(const TvShape& s, const std::vector<float>& b, double w, int iterations,
                        bool non_negative = false) {
  std::vector<float> x = b;
  const Stream cpu = Stream::Cpu();
  auto plan = TvProxPlan::Create(cpu, s);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return x;
  const absl::Status applied = plan->Apply({w, iterations, non_negative}, x.data());
  EXPECT_TRUE(applied.ok()) << applied;
  return x;
}

const TvShape kShapes[] = {
    {13, 9, 1, 1},  // 2-D real
    {8, 7, 5, 1},   // 3-D real
    {11, 6, 1, 2},  // 2-D complex
    {6, 5, 4, 2},   // 3-D complex
    {17, 1, 1, 1},  // 1-D
    {1, 6, 5, 3},   // an axis of extent 1 first, 3 channels
};

TEST(TvTest, NormMatchesTheReference) {
  for (const TvShape& s : kShapes) {
    const std::vector<float> x = RandomImage(s, 7);
    auto norm = TvNorm(Stream::Cpu(), s, x.data());
    ASSERT_TRUE(norm.ok()) << norm.status();
    const double ref = ReferenceTv(s, ToDouble(x));
    EXPECT_NEAR(*norm, ref, 1e-5 * ref) << s.nx << "x" << s.ny << "x" << s.nz << " c" << s.channels;
  }
}

TEST(TvTest, ConstantImageHasNoVariation) {
  const TvShape s{9, 8, 3, 2};
  const std::vector<float> x(static_cast<size_t>(s.size()), 0.7f);
  auto norm = TvNorm(Stream::Cpu(), s, x.data());
  ASSERT_TRUE(norm.ok());
  EXPECT_EQ(*norm, 0.0);
}

TEST(TvTest, GradientMatchesCentralDifferencesOfTheSmoothedNorm) {
  const double eps = 0.05;
  for (const TvShape& s : kShapes) {
    const std::vector<float> x = RandomImage(s, 11);
    std::vector<float> g(x.size());
    ASSERT_TRUE(TvGradient(Stream::Cpu(), s, eps, x.data(), g.data()).ok());
    std::vector<double> xd = ToDouble(x);
    const double h = 1e-5;
    double err2 = 0, ref2 = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double keep = xd[i];
      xd[i] = keep + h;
      const double up = ReferenceTv(s, xd, eps);
      xd[i] = keep - h;
      const double down = ReferenceTv(s, xd, eps);
      xd[i] = keep;
      const double ref = (up - down) / (2 * h);
      err2 += (g[i] - ref) * (g[i] - ref);
      ref2 += ref * ref;
    }
    EXPECT_LT(std::sqrt(err2 / ref2), 1e-4) << s.nx << "x" << s.ny << "x" << s.nz << " c" << s.channels;
  }
}

TEST(TvTest, ProxIsNotImprovedByPerturbations) {
  std::mt19937 rng(3);
  std::normal_distribution<double> normal(0, 1);
  for (const TvShape& s : kShapes) {
    const std::vector<float> b = NoisyBlocks(s, 5);
    const double w = 0.15;
    const std::vector<double> x = ToDouble(Prox(s, b, w, 300));
    const double at = ProxObjective(s, w, b, x);
    EXPECT_LT(at, ProxObjective(s, w, b, ToDouble(b)));
    for (int trial = 0; trial < 30; ++trial) {
      std::vector<double> y = x;
      const double size = trial < 15 ? 1e-2 : 1e-3;
      for (double& v : y) v += size * normal(rng);
      EXPECT_LE(at, ProxObjective(s, w, b, y) + 1e-7 * at) << "trial " << trial << " shape " << s.nx << "x" << s.ny
                                                            << "x" << s.nz << " c" << s.channels;
    }
  }
}

TEST(TvTest, ProxConvergesToTheLongRun) {
  for (const TvShape& s : kShapes) {
    const std::vector<float> b = NoisyBlocks(s, 9);
    const double w = 0.1;
    const std::vector<double> long_run = ToDouble(Prox(s, b, w, 2000));
    const std::vector<double> x = ToDouble(Prox(s, b, w, 100));
    const double best = ProxObjective(s, w, b, long_run);
    EXPECT_LE(ProxObjective(s, w, b, x), best * (1 + 1e-4));
    double diff2 = 0, norm2 = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      diff2 += (x[i] - long_run[i]) * (x[i] - long_run[i]);
      norm2 += long_run[i] * long_run[i];
    }
    EXPECT_LT(std::sqrt(diff2 / norm2), 1e-2);
  }
}

// warm_start: the first call equals a cold one (no dual yet); repeated
// calls on the same input continue from the last dual, so 10 calls of 10
// iterations get much closer to the long run than one call of 10, and the
// cold option on the same plan still starts from 0.
TEST(TvTest, WarmStartContinuesFromTheLastDual) {
  for (const TvShape& s : {kShapes[0], kShapes[3]}) {
    const std::vector<float> b = NoisyBlocks(s, 21);
    const double w = 0.1;
    const std::vector<float> long_run = Prox(s, b, w, 2000), cold = Prox(s, b, w, 10);
    const Stream cpu = Stream::Cpu();
    auto plan = TvProxPlan::Create(cpu, s);
    ASSERT_TRUE(plan.ok()) << plan.status();
    TvProxOptions warm{w, 10, false, /*warm_start=*/true};
    std::vector<float> x = b;
    ASSERT_TRUE(plan->Apply(warm, x.data()).ok());
    EXPECT_EQ(x, cold);
    for (int call = 1; call < 10; ++call) {
      x = b;
      ASSERT_TRUE(plan->Apply(warm, x.data()).ok());
    }
    auto distance = [&](const std::vector<float>& y) {
      double d2 = 0, n2 = 0;
      for (size_t i = 0; i < y.size(); ++i) {
        d2 += (static_cast<double>(y[i]) - long_run[i]) * (static_cast<double>(y[i]) - long_run[i]);
        n2 += static_cast<double>(long_run[i]) * long_run[i];
      }
      return std::sqrt(d2 / n2);
    };
    EXPECT_LT(distance(x), 0.2 * distance(cold)) << distance(x) << " vs " << distance(cold);
    std::vector<float> again = b;
    ASSERT_TRUE(plan->Apply({w, 10, false, /*warm_start=*/false}, again.data()).ok());
    EXPECT_EQ(again, cold);
  }
}

TEST(TvTest, NonNegativeProxIsTheConstrainedMinimum) {
  const TvShape s{12, 10, 1, 1};
  const std::vector<float> b = RandomImage(s, 13, -0.5f, 1.0f);
  const double w = 0.2;
  const std::vector<float> x = Prox(s, b, w, 400, /*non_negative=*/true);
  EXPECT_GE(*std::min_element(x.begin(), x.end()), 0.0f);
  std::vector<float> clamped = Prox(s, b, w, 400);
  for (float& v : clamped) v = std::max(v, 0.0f);
  EXPECT_LT(ProxObjective(s, w, b, ToDouble(x)), ProxObjective(s, w, b, ToDouble(clamped)));
}

TEST(TvTest, ComplexProxTurnsWithThePhase) {
  const TvShape s{10, 9, 1, 2};
  const std::vector<float> b = NoisyBlocks(s, 17);
  const float c = std::cos(0.7f), sn = std::sin(0.7f);
  std::vector<float> turned(b.size());
  for (size_t v = 0; v < b.size(); v += 2) {
    turned[v] = c * b[v] - sn * b[v + 1];
    turned[v + 1] = sn * b[v] + c * b[v + 1];
  }
  const std::vector<float> x = Prox(s, b, 0.1, 200);
  const std::vector<float> y = Prox(s, turned, 0.1, 200);
  for (size_t v = 0; v < b.size(); v += 2) {
    EXPECT_NEAR(y[v], c * x[v] - sn * x[v + 1], 1e-4);
    EXPECT_NEAR(y[v + 1], sn * x[v] + c * x[v + 1], 1e-4);
  }
}

TEST(TvTest, OneShotProxEqualsThePlanAndZeroWeightIsIdentity) {
  const TvShape s{9, 8, 1, 2};
  const std::vector<float> b = NoisyBlocks(s, 19);
  std::vector<float> x = b;
  ASSERT_TRUE(TvProx(Stream::Cpu(), s, 0.1, 30, x.data()).ok());
  EXPECT_EQ(x, Prox(s, b, 0.1, 30));
  x = b;
  ASSERT_TRUE(TvProx(Stream::Cpu(), s, 0.0, 30, x.data()).ok());
  EXPECT_EQ(x, b);
}

TEST(TvTest, BadInputIsRefusedNamingTheField) {
  std::vector<float> x(64, 1.0f), g(64);
  const Stream cpu = Stream::Cpu();
  auto message = [](const absl::Status& s) { return std::string(s.message()); };
  EXPECT_NE(message(TvProx(cpu, {0, 8, 1, 1}, 0.1, 5, x.data())).find("nx"), std::string::npos);
  EXPECT_NE(message(TvProx(cpu, {8, 8, 1, 0}, 0.1, 5, x.data())).find("channels"), std::string::npos);
  EXPECT_NE(message(TvProx(cpu, {8, 8, 1, 1}, -1, 5, x.data())).find("weight"), std::string::npos);
  EXPECT_NE(message(TvProx(cpu, {8, 8, 1, 1}, NAN, 5, x.data())).find("weight"), std::string::npos);
  EXPECT_NE(message(TvProx(cpu, {8, 8, 1, 1}, 0.1, -1, x.data())).find("iterations"), std::string::npos);
  EXPECT_NE(message(TvGradient(cpu, {8, 8, 1, 1}, 0, x.data(), g.data())).find("epsilon"), std::string::npos);
  EXPECT_FALSE(TvGradient(cpu, {8, 8, 1, 1}, 0.1, x.data(), x.data()).ok());
  auto plan = TvProxPlan::Create(cpu, {4, 4, 2, 2});
  ASSERT_TRUE(plan.ok());
  EXPECT_NE(message(plan->Apply({0.1, 5, true}, x.data())).find("non_negative"), std::string::npos);
  EXPECT_FALSE(TvNorm(cpu, {8, 8, 1, 1}, nullptr).ok());
}

}  // namespace
}  // namespace regularizers
}  // namespace recon
}  // namespace tessera
