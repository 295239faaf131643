#include "bench/latent_rank.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace tessera::fingerprint {
namespace {

bool IsMate(const std::string& id) { return id.rfind("mate", 0) == 0; }

TEST(LatentRankTest, CountsNonMatesAbove) {
  const MateRank r = RankOfMate({{"a", 0.9f}, {"mate", 0.5f}, {"b", 0.7f}, {"c", 0.1f}}, IsMate);
  EXPECT_TRUE(r.found);
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.ties, 0);
  EXPECT_EQ(r.candidates, 4);
  EXPECT_EQ(r.mates, 1);
  EXPECT_FLOAT_EQ(r.mate_score, 0.5f);
  EXPECT_FLOAT_EQ(r.best_nonmate, 0.9f);
  EXPECT_EQ(r.best_nonmate_id, "a");
}

TEST(LatentRankTest, TiesCountAgainstTheMate) {
  // Listed before the ties, as the searcher would for an earlier enrolment:
  // the rank still counts both tied non-mates.
  const MateRank r = RankOfMate({{"mate", 0.5f}, {"a", 0.5f}, {"b", 0.5f}, {"c", 0.4f}}, IsMate);
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.ties, 2);
}

TEST(LatentRankTest, RankOneWhenBestAndNoTie) {
  const MateRank r = RankOfMate({{"a", 0.2f}, {"mate", 0.6f}}, IsMate);
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.ties, 0);
}

TEST(LatentRankTest, BestOfSeveralMates) {
  const MateRank r = RankOfMate({{"mate1", 0.1f}, {"a", 0.5f}, {"mate2", 0.6f}, {"b", 0.7f}}, IsMate);
  EXPECT_EQ(r.mates, 2);
  EXPECT_FLOAT_EQ(r.mate_score, 0.6f);
  EXPECT_EQ(r.rank, 2);
}

TEST(LatentRankTest, MissingMateGivesALowerBound) {
  const MateRank r = RankOfMate({{"a", 0.9f}, {"b", 0.8f}}, IsMate);
  EXPECT_FALSE(r.found);
  EXPECT_EQ(r.rank, 3);
  EXPECT_TRUE(std::isnan(r.mate_score));
  EXPECT_EQ(r.best_nonmate_id, "a");
}

TEST(LatentRankTest, SubsetLeavesOthersOut) {
  const std::vector<SearchCandidate> all = {{"real1", 0.3f}, {"syn1", 0.9f}, {"mate", 0.5f}, {"syn2", 0.8f},
                                            {"real2", 0.6f}};
  const MateRank whole = RankOfMate(all, IsMate);
  EXPECT_EQ(whole.rank, 4);
  const MateRank real = RankOfMate(all, IsMate, [](const std::string& id) { return id.rfind("syn", 0) != 0; });
  EXPECT_EQ(real.rank, 2);
  EXPECT_EQ(real.candidates, 3);
  EXPECT_EQ(real.best_nonmate_id, "real2");
  // A subset without the mate: not found.
  const MateRank syn = RankOfMate(all, IsMate, [](const std::string& id) { return id.rfind("syn", 0) == 0; });
  EXPECT_FALSE(syn.found);
  EXPECT_EQ(syn.rank, 3);
}

TEST(LatentRankTest, NanScoresRankLast) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const MateRank r = RankOfMate({{"a", nan}, {"mate", 0.1f}, {"b", nan}}, IsMate);
  EXPECT_EQ(r.rank, 1);
  const MateRank m = RankOfMate({{"a", 0.0f}, {"mate", nan}, {"b", nan}}, IsMate);
  // A NaN mate ties with NaN non-mates and is below every number.
  EXPECT_EQ(m.rank, 3);
  EXPECT_EQ(m.ties, 1);
}

TEST(LatentRankTest, EmptyList) {
  const MateRank r = RankOfMate({}, IsMate);
  EXPECT_FALSE(r.found);
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.candidates, 0);
  EXPECT_TRUE(r.best_nonmate_id.empty());
}

}  // namespace
}  // namespace tessera::fingerprint
