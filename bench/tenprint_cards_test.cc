#include "bench/tenprint_cards.h"

#include <cmath>
#include <limits>
#include <memory>
#include <set>

#include "gtest/gtest.h"

namespace tessera::fingerprint {
namespace {

SearchCandidate Cand(const std::string& id, float score, const std::string& subject, int fgp) {
  auto m = std::make_shared<TemplateMetadata>();
  m->subject_id = subject;
  m->finger_position = fgp;
  return {id, score, m};
}

TEST(TenPrintCardsTest, CardPairsAreEveryOrderedPairOfDistinctImpressions) {
  const auto pairs = CardPairs(8);
  EXPECT_EQ(pairs.size(), 56u);
  std::set<std::pair<int, int>> seen(pairs.begin(), pairs.end());
  EXPECT_EQ(seen.size(), 56u);
  for (const auto& [g, p] : pairs) {
    EXPECT_NE(g, p);
    EXPECT_GE(g, 1);
    EXPECT_LE(p, 8);
  }
  EXPECT_EQ(pairs.front(), std::make_pair(1, 2));
  EXPECT_EQ(pairs.back(), std::make_pair(8, 7));
  EXPECT_TRUE(CardPairs(1).empty());
}

TEST(TenPrintCardsTest, MasksAndNames) {
  EXPECT_EQ(MaskFingers(0b1011), (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(SubsetName(0b1010, {"DB1", "DB2", "DB3", "DB4"}), "DB2+DB4");
  EXPECT_EQ(SubsetName(0b1, {"DB1"}), "DB1");
}

// Finger 0 (position 1): B 0.6 beats the true subject A 0.5; finger 1
// (position 2): A 0.4, B 0.1. Finger 1 alone ranks A first, finger 0 alone
// second; the sum (A 0.9, B 0.7) ranks A first, the max (B 0.6, A 0.5) B.
TEST(TenPrintCardsTest, SubsetFusionAndRankOfTheSubject) {
  const std::vector<int> positions = {1, 2};
  const std::vector<std::vector<SearchCandidate>> lists = {
      {Cand("b1", 0.6f, "B", 1), Cand("a1", 0.5f, "A", 1), Cand("c1", 0.2f, "C", 1)},
      {Cand("a2", 0.4f, "A", 2), Cand("b2", 0.1f, "B", 2)}};
  EXPECT_EQ(SubjectRank(FuseSubset(positions, lists, 0b01, TenPrintFusion::kSum), "A").rank, 2);
  EXPECT_EQ(SubjectRank(FuseSubset(positions, lists, 0b10, TenPrintFusion::kSum), "A").rank, 1);
  const MateRank sum = SubjectRank(FuseSubset(positions, lists, 0b11, TenPrintFusion::kSum), "A");
  EXPECT_TRUE(sum.found);
  EXPECT_EQ(sum.rank, 1);
  EXPECT_FLOAT_EQ(sum.mate_score, 0.9f);
  EXPECT_FLOAT_EQ(sum.best_nonmate, 0.7f);
  EXPECT_EQ(sum.best_nonmate_id, "B");
  EXPECT_EQ(SubjectRank(FuseSubset(positions, lists, 0b11, TenPrintFusion::kMax), "A").rank, 2);
  // Every subject is kept (no top-k cut): C is ranked too.
  EXPECT_EQ(FuseSubset(positions, lists, 0b11, TenPrintFusion::kSum).size(), 3u);
}

TEST(TenPrintCardsTest, TiesCountAgainstTheSubjectAndAbsentIsAMiss) {
  const std::vector<int> positions = {1};
  const std::vector<std::vector<SearchCandidate>> lists = {{Cand("a", 0.5f, "A", 1), Cand("b", 0.5f, "B", 1)}};
  // FuseBySubject puts A first (ties by subject id); the rank counts B's tie.
  const std::vector<SubjectMatch> fused = FuseSubset(positions, lists, 0b1, TenPrintFusion::kSum);
  ASSERT_EQ(fused.size(), 2u);
  EXPECT_EQ(fused[0].subject_id, "A");
  const MateRank a = SubjectRank(fused, "A");
  EXPECT_EQ(a.rank, 2);
  EXPECT_EQ(a.ties, 1);
  const MateRank z = SubjectRank(fused, "Z");
  EXPECT_FALSE(z.found);
  EXPECT_EQ(z.rank, 3);  // a lower bound: candidates + 1
}

TEST(TenPrintCardsTest, SignTestAndErrorReduction) {
  EXPECT_DOUBLE_EQ(SignTestP(0, 0), 1.0);
  EXPECT_NEAR(SignTestP(5, 0), 2.0 / 32, 1e-12);   // both tails of Binomial(5, 1/2)
  EXPECT_NEAR(SignTestP(0, 5), 2.0 / 32, 1e-12);
  EXPECT_NEAR(SignTestP(1, 1), 1.0, 1e-12);
  EXPECT_NEAR(SignTestP(8, 2), 112.0 / 1024, 1e-12);  // 2 * (1 + 10 + 45) / 2^10
  EXPECT_LT(SignTestP(60, 20), 1e-4);
  EXPECT_DOUBLE_EQ(ErrorReduction(10, 4), 0.6);
  EXPECT_DOUBLE_EQ(ErrorReduction(4, 10), -1.5);
  EXPECT_DOUBLE_EQ(ErrorReduction(0, 3), 0.0);
}

TEST(TenPrintCardsTest, TpirAtFpirThresholdsOnTheNonMatedTops) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // 10 non-mated tops 0.1 .. 1.0; FPIR 10 %: one may pass, t = 0.9 (the
  // second highest), scores must be above it.
  std::vector<float> nonmated;
  for (int i = 1; i <= 10; ++i) nonmated.push_back(0.1f * i);
  const std::vector<float> mated = {0.95f, 0.9f, 2.0f, nan, 0.5f};
  float t = 0;
  EXPECT_DOUBLE_EQ(TpirAtFpir(mated, nonmated, 0.1, &t), 2.0 / 5);  // 0.95 and 2.0
  EXPECT_FLOAT_EQ(t, 0.9f);
  // FPIR 0: above the highest non-mate.
  EXPECT_DOUBLE_EQ(TpirAtFpir(mated, nonmated, 0.0, &t), 1.0 / 5);
  EXPECT_FLOAT_EQ(t, 1.0f);
  // FPIR 1: every rank-1 card counts (NaN never does).
  EXPECT_DOUBLE_EQ(TpirAtFpir(mated, nonmated, 1.0, &t), 4.0 / 5);
  EXPECT_TRUE(std::isinf(t) && t < 0);
  // Missing non-mates (-inf, or NaN) are the lowest tops.
  EXPECT_DOUBLE_EQ(TpirAtFpir({0.1f}, {-std::numeric_limits<float>::infinity(), nan}, 0.5, &t), 1.0);
  EXPECT_TRUE(std::isinf(t) && t < 0);
}

}  // namespace
}  // namespace tessera::fingerprint
