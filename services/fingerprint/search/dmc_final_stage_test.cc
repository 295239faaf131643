// DMC final stage and end-to-end matcher: behaviour on distorted mates and
// non-mates, determinism across threads, bad input.
#include "services/fingerprint/search/dmc_final_stage.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/fingerprint/dmc.h"
#include "kernels/fingerprint/mcc.h"
#include "kernels/fingerprint/test_templates.h"
#include "services/fingerprint/search/dmc_matcher.h"

namespace tessera {
namespace fingerprint {
namespace {

// A smooth non-linear distortion plus a rigid motion (image frame), with the
// minutia directions carried by the map's Jacobian; a few minutiae dropped,
// a little jitter.
std::vector<MinutiaPoint> Distort(const std::vector<MinutiaPoint>& in, uint32_t seed, double strength) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> jitter(0.0, 1.0);
  std::uniform_real_distribution<double> u(0, 1);
  const double a = 0.25, c = std::cos(a), s = std::sin(a);
  auto map = [&](double x, double y) {
    const double wx = x + strength * std::sin(y / 70.0), wy = y + strength * std::cos(x / 80.0);
    return std::make_pair(wx * c + wy * s + 15.0, -wx * s + wy * c + 40.0);
  };
  std::vector<MinutiaPoint> out;
  for (const MinutiaPoint& m : in) {
    if (u(rng) < 0.1) continue;
    const auto p = map(m.x, m.y);
    const auto q = map(m.x + 0.5 * std::cos(m.theta), m.y - 0.5 * std::sin(m.theta));
    MinutiaPoint w;
    w.x = static_cast<float>(std::round(p.first + jitter(rng)));
    w.y = static_cast<float>(std::round(p.second + jitter(rng)));
    double th = std::atan2(-(q.second - p.second), q.first - p.first);
    if (th < 0) th += 2 * M_PI;
    w.theta = static_cast<float>(th);
    out.push_back(w);
  }
  return out;
}

struct Scored {
  std::vector<float> scores;
};

std::vector<float> Score(const DmcMatcher& m, const MccTemplate& latent, const std::vector<MccTemplate>& gallery) {
  MccGallery g;
  for (const auto& t : gallery) g.Append(t);
  auto s = m.ScoreGallery(Stream::Cpu(), latent, g);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : std::vector<float>(gallery.size(), 0.0f);
}

TEST(DmcFinalStageTest, DistortedMateScoresAboveNonMates) {
  const auto points = testing::TestTemplates(1, 20, 31);
  const DmcMatcher m = *DmcMatcher::Create(DmcMatcherOptions{});
  int wins = 0, trials = 0, tps_pairs = 0;
  for (int p = 0; p < 10; ++p) {
    const int src = p * 8 % static_cast<int>(points.size());
    const MccTemplate original = cpu::BuildMccTemplate(points[src]);
    const MccTemplate distorted = cpu::BuildMccTemplate(Distort(points[src], 77 + p, 10.0));
    // Gallery: the original and five templates of other fingers.
    std::vector<MccTemplate> gallery{original};
    for (int q = 1; q <= 5; ++q) {
      gallery.push_back(cpu::BuildMccTemplate(points[(src + 8 * q + 3) % points.size()]));
    }
    const std::vector<float> s = Score(m, distorted, gallery);
    float best_other = 0;
    for (int q = 1; q <= 5; ++q) best_other = std::max(best_other, s[q]);
    ++trials;
    wins += s[0] > best_other;
    EXPECT_GT(s[0], 0.04f) << "probe " << p;
    EXPECT_GT(s[0], 3 * best_other) << "probe " << p;
    // The TPS stage adds pairs the rigid clusters missed.
    const DmcLatent latent = *m.Prepare(distorted);
    MccGallery g;
    g.Append(original);
    std::vector<int32_t> start;
    const DmcBatchView batch = HostBatchView(g, 0, 1, &start);
    const int n = batch.num_cylinders;
    std::vector<int16_t> best(n);
    std::vector<float> sim(n), quality(n);
    std::vector<uint8_t> count(n), members(static_cast<size_t>(n) * kDmcMaxClusterSize);
    const DmcKernelResults r{best.data(), sim.data(), quality.data(), count.data(), members.data()};
    cpu::RunDmcKernels(latent.view(), batch, m.constants(), r);
    LssParams lp;
    const DmcTemplateScore detail =
        ScoreTemplateFinalStage(latent, batch, r, 0, MakeLssConstants(lp), m.options().final_stage);
    EXPECT_EQ(detail.score, s[0]);
    EXPECT_GT(detail.clusters, 0);
    // Kernel 2 missing every third local match: the warp fitted to the rest
    // finds most of them again.
    for (int i = 0; i < n; i += 3) {
      best[i] = -1;
      count[i] = 0;
    }
    const DmcTemplateScore recovered =
        ScoreTemplateFinalStage(latent, batch, r, 0, MakeLssConstants(lp), m.options().final_stage);
    int from_tps = 0;
    for (const DmcPair& pair : recovered.pairs) from_tps += pair.from_tps;
    tps_pairs += from_tps;
    EXPECT_GE(recovered.pairs.size() + 3, detail.pairs.size()) << "probe " << p;
    EXPECT_GT(from_tps, n / 6) << "probe " << p;
    // One-to-one.
    std::vector<int> seen_l(latent.n(), 0), seen_g(n, 0);
    for (const DmcPair& pair : detail.pairs) {
      EXPECT_EQ(seen_l[pair.latent]++, 0);
      EXPECT_EQ(seen_g[pair.gallery]++, 0);
    }
  }
  EXPECT_EQ(wins, trials);
  EXPECT_GT(tps_pairs, 0);
}

TEST(DmcFinalStageTest, IdenticalTemplatesScoreHighAndSymmetric) {
  const auto points = testing::TestTemplates(2, 10, 41);
  const DmcMatcher m = *DmcMatcher::Create(DmcMatcherOptions{});
  const MccTemplate a = cpu::BuildMccTemplate(points[0]);
  const MccTemplate b = cpu::BuildMccTemplate(points[9]);
  const std::vector<float> s = Score(m, a, {a, b});
  EXPECT_GT(s[0], 0.4f);
  EXPECT_GT(s[0], 3 * s[1]);
  EXPECT_LE(s[0], 1.0f);
}

TEST(DmcFinalStageTest, ThreadsGiveTheSameScores) {
  const auto points = testing::SyntheticTemplates(60, 5);
  std::vector<MccTemplate> templates;
  for (const auto& p : points) templates.push_back(cpu::BuildMccTemplate(p));
  DmcMatcherOptions one, all;
  one.threads = 1;
  all.threads = 0;
  all.batch_templates = 7;  // several batches
  const auto latent = cpu::BuildMccTemplate(Distort(points[4], 3, 6.0));
  const auto a = Score(*DmcMatcher::Create(one), latent, templates);
  const auto b = Score(*DmcMatcher::Create(all), latent, templates);
  EXPECT_EQ(a, b);
  EXPECT_EQ(std::max_element(a.begin(), a.end()) - a.begin(), 4);
}

TEST(DmcFinalStageTest, BadInputIsRejected) {
  const auto points = testing::SyntheticTemplates(3, 8);
  MccGallery g;
  for (const auto& p : points) g.Append(cpu::BuildMccTemplate(p));
  const DmcMatcher m = *DmcMatcher::Create(DmcMatcherOptions{});
  const DmcLatent latent = *m.Prepare(cpu::BuildMccTemplate(points[0]));
  std::vector<int32_t> start;
  const DmcBatchView batch = HostBatchView(g, 0, 3, &start);
  std::vector<float> scores(3);
  LssParams lp;
  const LssConstants lss = MakeLssConstants(lp);
  EXPECT_EQ(ScoreBatchFinalStage(latent, batch, DmcKernelResults{}, lss, {}, 1, scores.data()).code(),
            absl::StatusCode::kInvalidArgument);
  DmcFinalStageParams bad;
  bad.tps_min_pairs = 2;
  const int n = batch.num_cylinders;
  std::vector<int16_t> best(n);
  std::vector<float> sim(n), quality(n);
  std::vector<uint8_t> count(n), members(static_cast<size_t>(n) * kDmcMaxClusterSize);
  const DmcKernelResults r{best.data(), sim.data(), quality.data(), count.data(), members.data()};
  EXPECT_EQ(ScoreBatchFinalStage(latent, batch, r, lss, bad, 1, scores.data()).code(),
            absl::StatusCode::kInvalidArgument);
  DmcMatcherOptions o;
  o.batch_templates = 0;
  EXPECT_FALSE(DmcMatcher::Create(o).ok());
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
