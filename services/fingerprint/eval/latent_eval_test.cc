#include "services/fingerprint/eval/latent_eval.h"

#include <gtest/gtest.h>

#include <memory>
#include <cmath>
#include <set>
#include <vector>

#include "kernels/fingerprint/mcc.h"
#include "kernels/fingerprint/test_templates.h"
#include "services/fingerprint/search/alfi_dmc_matcher.h"
#include "services/fingerprint/search/alfi_pipeline.h"
#include "services/fingerprint/formats/fvc_data.h"

namespace tessera {
namespace fingerprint {
namespace {

TEST(CropLatent, SizeSubsetAndDeterminism) {
  const auto pts = testing::SyntheticTemplates(1, 77)[0];
  ASSERT_GE(pts.size(), 15u);
  LatentCropParams p;
  for (int trial = 0; trial < 50; ++trial) {
    SplitMix64 a(trial), b(trial);
    const auto crop = CropLatent(pts, p, a);
    const auto again = CropLatent(pts, p, b);
    ASSERT_EQ(crop.size(), again.size());
    EXPECT_GE(crop.size(), std::min<size_t>(12, pts.size()));
    EXPECT_LE(crop.size(), std::min<size_t>(30, pts.size()));
    // A subset, in the template's order.
    size_t k = 0;
    for (const MinutiaPoint& m : crop) {
      while (k < pts.size() && !(pts[k].x == m.x && pts[k].y == m.y && pts[k].theta == m.theta)) ++k;
      ASSERT_LT(k, pts.size()) << "not a subset in order";
      ++k;
    }
    for (size_t i = 0; i < crop.size(); ++i) EXPECT_EQ(crop[i].x, again[i].x);
  }
  SplitMix64 r(1);
  EXPECT_TRUE(CropLatent({}, p, r).empty());
  const std::vector<MinutiaPoint> few(pts.begin(), pts.begin() + 5);
  EXPECT_EQ(CropLatent(few, p, r).size(), 5u);
}

// Nearest-neighbour crop: every kept minutia is at least as close to some
// point as... checked indirectly: a crop is compact (its diameter is well
// below the template's).
TEST(CropLatent, CropsAreCompact) {
  auto pts = testing::SyntheticTemplates(1, 78)[0];
  while (pts.size() < 60) pts.push_back({static_cast<float>(pts.size() * 4 % 280), 50.0f, 1.0f});
  LatentCropParams p;
  p.min_minutiae = p.max_minutiae = 12;
  auto diameter = [](const std::vector<MinutiaPoint>& v) {
    double d = 0;
    for (const auto& a : v) {
      for (const auto& b : v) d = std::max<double>(d, std::hypot(a.x - b.x, a.y - b.y));
    }
    return d;
  };
  double sum = 0;
  for (int t = 0; t < 20; ++t) {
    SplitMix64 rng(100 + t);
    sum += diameter(CropLatent(pts, p, rng));
  }
  EXPECT_LT(sum / 20, 0.8 * diameter(pts));
}

TEST(EvaluateLatents, RanksFromCandidates) {
  const auto pts = testing::SyntheticTemplates(30, 5);
  auto gallery = std::make_shared<MccGallery>();
  std::vector<int64_t> identity;
  std::vector<MccTemplate> templates;
  for (size_t i = 0; i < pts.size(); ++i) {
    templates.push_back(cpu::BuildMccTemplate(pts[i]));
    gallery->Append(templates.back());
    identity.push_back(static_cast<int64_t>(i));  // every template its own finger
  }
  // Probes 0..4 are gallery templates 0..4: with the source kept (-1) the
  // mate is the template itself (rank 1); with it left out there is no mate
  // (rank 0).
  std::vector<MccTemplate> probes(templates.begin(), templates.begin() + 5);
  std::vector<int64_t> pid = {0, 1, 2, 3, 4};
  LatentEvalOptions o;
  o.max_rank = 10;
  o.latents_per_search = 2;
  o.pipeline.batch_templates = 7;
  LssBatchMatcher matcher;
  auto kept = EvaluateLatents(probes, pid, {-1, -1, -1, -1, -1}, gallery, identity, o, matcher);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->ranks, std::vector<int>(5, 1));
  EXPECT_DOUBLE_EQ(kept->rank1, 1.0);
  EXPECT_DOUBLE_EQ(kept->rank20, 1.0);  // max_rank 10 < 20: the last rank
  auto left_out = EvaluateLatents(probes, pid, {0, 1, 2, 3, 4}, gallery, identity, o, matcher);
  ASSERT_TRUE(left_out.ok());
  EXPECT_EQ(left_out->ranks, std::vector<int>(5, 0));
  EXPECT_DOUBLE_EQ(left_out->rank1, 0.0);
  EXPECT_EQ(left_out->stats.latents, 5);
  // Bad inputs.
  EXPECT_FALSE(EvaluateLatents(probes, {0}, {-1}, gallery, identity, o, matcher).ok());
  EXPECT_FALSE(EvaluateLatents(probes, pid, {-1, -1, -1, -1, -1}, gallery, {0}, o, matcher).ok());
  EXPECT_FALSE(EvaluateLatents(probes, pid, {-1, -1, -1, -1, -1}, nullptr, identity, o, matcher).ok());
  o.max_rank = 0;
  EXPECT_FALSE(EvaluateLatents(probes, pid, {-1, -1, -1, -1, -1}, gallery, identity, o, matcher).ok());
}

// The real protocol on DB1 with a small padding (skipped without the data).
TEST(RunLatentEvaluation, Db1SmallPadding) {
  auto dir = FindFingerprintDataDir();
  if (!dir.ok()) GTEST_SKIP() << "FVC2002 data not found";
  LatentEvalOptions o;
  o.dbs = {1};
  o.padding = 300;
  o.pipeline.batch_templates = 128;
  LssBatchMatcher matcher;
  auto r = RunLatentEvaluation(*dir, o, matcher);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->probes, 80);
  EXPECT_EQ(r->real_templates, 80);
  EXPECT_EQ(r->gallery_templates, 380);
  EXPECT_GE(r->mean_probe_minutiae, 12);
  EXPECT_LE(r->mean_probe_minutiae, 30);
  for (size_t k = 1; k < r->cmc.size(); ++k) EXPECT_GE(r->cmc[k], r->cmc[k - 1]);
  std::printf("DB1 + 300 non-mates, LSS-R: rank-1 %.3f, rank-20 %.3f, probes without cylinders %d\n", r->rank1,
              r->rank20, r->probes_without_cylinders);
  // Partial prints still find their finger often (floor well below the
  // measured value, see bench/results/2026-11-30-cpu-fingerprint-latent.md).
  EXPECT_GT(r->rank20, 0.3);
  o.crops_per_impression = 0;
  EXPECT_FALSE(RunLatentEvaluation(*dir, o, matcher).ok());
  o.crops_per_impression = 1;
  o.crop.min_minutiae = 40;
  EXPECT_FALSE(RunLatentEvaluation(*dir, o, matcher).ok());
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
