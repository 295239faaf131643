#include "services/fingerprint/eval/synthetic_gallery.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "kernels/fingerprint/lss.h"
#include "kernels/fingerprint/mcc.h"
#include "kernels/fingerprint/test_templates.h"

namespace tessera {
namespace fingerprint {
namespace {

std::vector<BaseTemplate> Bases() {
  std::vector<int> fingers;
  auto pts = testing::RealTemplates(1, &fingers);
  std::vector<BaseTemplate> out;
  if (pts.empty()) {
    pts = testing::SyntheticTemplates(40, 3);
    for (size_t i = 0; i < pts.size(); ++i) fingers.push_back(static_cast<int>(i / 4));
  }
  for (size_t i = 0; i < pts.size(); ++i) out.push_back({pts[i], 1000 + fingers[i]});
  return out;
}

bool Same(const std::vector<MinutiaPoint>& a, const std::vector<MinutiaPoint>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].x != b[i].x || a[i].y != b[i].y || a[i].theta != b[i].theta) return false;
  }
  return true;
}

TEST(SyntheticGallery, DeterministicAndIndependentOfOrder) {
  SyntheticGalleryOptions o;
  o.seed = 42;
  o.size = 1000;
  auto g = SyntheticGallery::Create(Bases(), o);
  ASSERT_TRUE(g.ok()) << g.status();
  auto g2 = SyntheticGallery::Create(Bases(), o);
  ASSERT_TRUE(g2.ok());
  for (int64_t i : {999, 0, 5, 79, 80, 500}) EXPECT_TRUE(Same(g->Minutiae(i), g2->Minutiae(i))) << i;
  EXPECT_FALSE(Same(g->Minutiae(3), g->Minutiae(4)));
  o.seed = 43;
  auto g3 = SyntheticGallery::Create(Bases(), o);
  ASSERT_TRUE(g3.ok());
  EXPECT_FALSE(Same(g->Minutiae(500), g3->Minutiae(500)));
  // Valid MCC input everywhere: whole pixels, non-negative, angles in [0, 2 pi).
  for (int64_t i = 0; i < 1000; i += 7) {
    const auto m = g->Minutiae(i);
    EXPECT_TRUE(ValidateMccInput(m, MccParams()).ok()) << i;
    for (const MinutiaPoint& p : m) {
      EXPECT_EQ(p.x, std::round(p.x));
      EXPECT_GE(p.y, 0);
      EXPECT_GE(p.theta, 0);
      EXPECT_LT(p.theta, 6.2831854f);
    }
  }
}

TEST(SyntheticGallery, IdentityLayout) {
  const auto bases = Bases();
  SyntheticGalleryOptions o;
  o.size = 500;
  o.mated_templates = 2 * static_cast<int64_t>(bases.size());
  o.impressions_per_identity = 3;
  auto g = SyntheticGallery::Create(bases, o);
  ASSERT_TRUE(g.ok()) << g.status();
  for (int64_t i = 0; i < o.mated_templates; ++i) EXPECT_EQ(g->Identity(i), bases[i % bases.size()].identity);
  const int64_t m = o.mated_templates;
  EXPECT_EQ(g->Identity(m), kSyntheticIdentityBase);
  EXPECT_EQ(g->Identity(m + 2), kSyntheticIdentityBase);
  EXPECT_EQ(g->Identity(m + 3), kSyntheticIdentityBase + 1);
  // Default: one impression per base.
  o.mated_templates = -1;
  auto d = SyntheticGallery::Create(bases, o);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->mated_templates(), static_cast<int64_t>(bases.size()));
}

TEST(SyntheticGallery, ZeroDistortionIsTheBaseAndRigidMotionKeepsDistances) {
  const auto bases = Bases();
  ImpressionParams none;
  none.max_rotation = none.max_shift = none.bump_amplitude = none.jitter = none.angle_jitter = 0;
  none.bumps = 0;
  none.drop_probability = 0;
  none.max_spurious = 0;
  SplitMix64 rng(1);
  // Moved well inside the positive quadrant so no rotated point is clamped.
  std::vector<MinutiaPoint> base = bases[0].points;
  for (MinutiaPoint& m : base) {
    m.x += 300;
    m.y += 300;
  }
  const auto same = PerturbImpression(base, none, rng);
  ASSERT_EQ(same.size(), base.size());
  for (size_t i = 0; i < base.size(); ++i) {
    EXPECT_EQ(same[i].x, base[i].x);
    EXPECT_EQ(same[i].y, base[i].y);
    EXPECT_NEAR(same[i].theta, base[i].theta, 1e-5);
  }
  ImpressionParams rigid = none;
  rigid.max_rotation = 0.5;
  rigid.max_shift = 40;
  const auto moved = PerturbImpression(base, rigid, rng);
  ASSERT_EQ(moved.size(), base.size());
  double worst = 0;
  for (size_t i = 0; i < base.size(); ++i) {
    for (size_t j = i + 1; j < base.size(); ++j) {
      const double d0 = std::hypot(base[i].x - base[j].x, base[i].y - base[j].y);
      const double d1 = std::hypot(moved[i].x - moved[j].x, moved[i].y - moved[j].y);
      worst = std::max(worst, std::fabs(d0 - d1));
    }
  }
  EXPECT_LE(worst, 1.5);  // rounding to whole pixels only
  // Everything dropped: only the spurious minutiae remain.
  ImpressionParams all_dropped = none;
  all_dropped.drop_probability = 1;
  all_dropped.max_spurious = 2;
  EXPECT_LE(PerturbImpression(base, all_dropped, rng).size(), 2u);
}

TEST(SyntheticGallery, DropRateAndSpuriousCount) {
  const auto bases = Bases();
  ImpressionParams p;
  p.drop_probability = 0.25;
  p.max_spurious = 0;
  SplitMix64 rng(9);
  size_t in = 0, out = 0;
  for (int r = 0; r < 200; ++r) {
    const auto& b = bases[r % bases.size()].points;
    in += b.size();
    out += PerturbImpression(b, p, rng).size();
  }
  EXPECT_NEAR(1.0 - static_cast<double>(out) / in, 0.25, 0.03);
}

// Mated impressions must look like their finger to the matcher; synthetic
// identities must not look like the bases they were made from.
TEST(SyntheticGallery, MatesScoreHighNonMatesLow) {
  const auto bases = Bases();
  SyntheticGalleryOptions o;
  o.size = 400;
  o.mated_templates = static_cast<int64_t>(bases.size());
  auto g = SyntheticGallery::Create(bases, o);
  ASSERT_TRUE(g.ok());
  const LssConstants c = MakeLssConstants(LssParams());
  double mated = 0, synthetic = 0;
  int n_mated = 0, n_synthetic = 0;
  for (int64_t i = 0; i < 40; ++i) {
    const MccTemplate base = cpu::BuildMccTemplate(bases[i % bases.size()].points);
    mated += cpu::Score(base, cpu::BuildMccTemplate(g->Minutiae(i)), MccScore::kLssR, c);
    ++n_mated;
    // Every synthetic identity against every base: the largest score.
    const MccTemplate s = cpu::BuildMccTemplate(g->Minutiae(o.mated_templates + i));
    synthetic += cpu::Score(base, s, MccScore::kLssR, c);
    ++n_synthetic;
  }
  mated /= n_mated;
  synthetic /= n_synthetic;
  std::printf("mean LSS-R: base vs its impression %.3f, base vs a synthetic identity %.3f\n", mated, synthetic);
  EXPECT_GT(mated, 0.2);
  EXPECT_LT(synthetic, 0.1);
  EXPECT_GT(mated, 3 * synthetic);
}

TEST(SyntheticGallery, AppendToInChunksEqualsWhole) {
  SyntheticGalleryOptions o;
  o.size = 300;
  o.seed = 5;
  auto g = SyntheticGallery::Create(Bases(), o);
  ASSERT_TRUE(g.ok());
  MccGallery whole, parts;
  std::vector<int64_t> ids_whole, ids_parts;
  ASSERT_TRUE(g->AppendTo(Stream::Cpu(), 0, 300, &whole, &ids_whole).ok());
  ASSERT_TRUE(g->AppendTo(Stream::Cpu(), 0, 123, &parts, &ids_parts).ok());
  ASSERT_TRUE(g->AppendTo(Stream::Cpu(), 123, 300, &parts, &ids_parts).ok());
  EXPECT_EQ(whole.num_templates(), 300);
  EXPECT_EQ(whole.start, parts.start);
  EXPECT_EQ(whole.bits, parts.bits);
  EXPECT_EQ(whole.theta, parts.theta);
  EXPECT_EQ(ids_whole, ids_parts);
  for (int64_t i = 0; i < 300; ++i) EXPECT_EQ(ids_whole[i], g->Identity(i));
  // Template 7's descriptors are those of Minutiae(7).
  const MccTemplate t7 = cpu::BuildMccTemplate(g->Minutiae(7));
  EXPECT_EQ(whole.template_size(7), static_cast<int>(t7.cylinders.size()));
  EXPECT_FALSE(g->AppendTo(Stream::Cpu(), 200, 301, &parts, nullptr).ok());
  EXPECT_FALSE(g->AppendTo(Stream::Cpu(), 0, 1, nullptr, nullptr).ok());
}

TEST(SyntheticGallery, BadOptions) {
  SyntheticGalleryOptions o;
  o.size = 10;
  EXPECT_EQ(SyntheticGallery::Create({}, o).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SyntheticGallery::Create({BaseTemplate{}}, o).status().code(), absl::StatusCode::kInvalidArgument);
  auto bad = o;
  bad.impression.drop_probability = 1.5;
  EXPECT_FALSE(SyntheticGallery::Create(Bases(), bad).ok());
  bad = o;
  bad.impression.bump_sigma = 0;
  EXPECT_FALSE(SyntheticGallery::Create(Bases(), bad).ok());
  bad = o;
  bad.mated_templates = 11;
  EXPECT_FALSE(SyntheticGallery::Create(Bases(), bad).ok());
  bad = o;
  bad.impressions_per_identity = 0;
  EXPECT_FALSE(SyntheticGallery::Create(Bases(), bad).ok());
  bad = o;
  bad.impression.max_shift = std::nan("");
  EXPECT_FALSE(SyntheticGallery::Create(Bases(), bad).ok());
  auto nan_base = Bases();
  nan_base[0].points[0].x = std::nanf("");
  EXPECT_FALSE(SyntheticGallery::Create(nan_base, o).ok());
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
