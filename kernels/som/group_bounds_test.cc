// BMU search with score-space group bounds (group_bounds.h), CPU backend: the
// bound arithmetic, the score error bound against exact scores, the update's
// group drift against the true changes, and searches over moving codebooks
// against the exhaustive search (same BMUs and score bits every epoch, ties
// included; the bounds hold the true group minima).
#include "kernels/som/group_bounds.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/som/batch_update.h"
#include "kernels/som/test_util.h"

namespace tessera {
namespace som {
namespace {

using testutil::DyadicCodebook;
using testutil::HostCodebook;
using testutil::HostDocs;
using testutil::RandomCodebook;
using testutil::ZipfTopicDocs;
namespace gb = group_bounds;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

TEST(GroupBoundArithmetic, RoundsOutwardsAndExcludesStrictly) {
  const double x = 1.0 / 3.0;
  EXPECT_GE(static_cast<double>(gb::RoundUp(x)), x);
  EXPECT_LE(static_cast<double>(gb::RoundDown(x)), x);
  EXPECT_EQ(gb::RoundDown(0.5), 0.5f);
  EXPECT_EQ(GroupCount(64, 16), 4);
  EXPECT_EQ(GroupCount(65, 16), 5);

  const double err = gb::ScoreErrorBound(10, 4.0f);
  EXPECT_GT(err, 0.0);
  EXPECT_LT(err, 1e-4);
  EXPECT_LT(gb::BoundFromMinimum(1.0f, err), 1.0f - err * 0.99);
  EXPECT_EQ(gb::BoundFromMinimum(kNan, err), -kInf);
  EXPECT_EQ(gb::BoundFromMinimum(kInf, err), -kInf);
  EXPECT_LE(gb::BoundAfterDrift(1.0f, -0.25f, 0.125), 0.5f);
  EXPECT_GT(gb::BoundAfterDrift(1.0f, -0.25f, 0.125), 0.4999f);
  EXPECT_TRUE(gb::GroupExcluded(2.0f, err, 1.0f));
  EXPECT_FALSE(gb::GroupExcluded(1.0f, err, 1.0f));         // a tie is searched
  EXPECT_FALSE(gb::GroupExcluded(1.0000001f, err, 1.0f));   // inside the margin
  EXPECT_FALSE(gb::GroupExcluded(kNan, err, 1.0f));
  EXPECT_FALSE(gb::GroupExcluded(2.0f, err, kNan));
  EXPECT_FALSE(gb::GroupExcluded(kInf, err, 1.0f));
  EXPECT_FALSE(gb::GroupExcluded(2.0f, gb::ScoreErrorBound(10, kInf), 1.0f));
  EXPECT_EQ(gb::MinimumOrNan(1.0f, kNan), -kInf);
  EXPECT_EQ(gb::MinimumOrNan(2.0f, 1.0f), 1.0f);
  EXPECT_EQ(gb::WeightRise(-0.5), 0.0f);
  EXPECT_GE(gb::WeightRise(0.1), 0.1f);
  EXPECT_EQ(gb::WeightRise(std::nan("")), kInf);
  EXPECT_EQ(gb::NormChange(kInf, 1.0), -kInf);
  EXPECT_LE(gb::NormChange(1.0, 1.25), -0.25f);
}

// The kernels' score of one node (fp32 from 0 in ascending feature order, then n - 2 sum).
float NodeScore(const HostDocs& docs, const HostCodebook& cb, int64_t d, int64_t node) {
  float acc = 0.0f;
  for (int64_t k = docs.offsets[d]; k < docs.offsets[d + 1]; ++k) acc += cb.Weight(docs.indices[k], node);
  return cb.norms[node] - 2.0f * acc;
}

// Exact s_j = n_j - 2 x.w_j of the stored weights and norms, in double.
double ExactScore(const HostDocs& docs, const HostCodebook& cb, int64_t d, int64_t node) {
  double dot = 0;
  for (int64_t k = docs.offsets[d]; k < docs.offsets[d + 1]; ++k) dot += cb.Weight(docs.indices[k], node);
  return static_cast<double>(cb.norms[node]) - 2.0 * dot;
}

TEST(GroupBoundArithmetic, ScoreErrorBoundCoversComputedScores) {
  std::mt19937 rng(37);
  const HostDocs docs = ZipfTopicDocs(300, 300, 6, 20, rng);
  for (float lo : {0.0f, -1.0f}) {
    const HostCodebook cb = RandomCodebook(48, 300, rng, lo, 1.0f);
    const float max_norm = *std::max_element(cb.norms.begin(), cb.norms.end());
    double worst = 0;
    for (int64_t d = 0; d < docs.rows(); ++d) {
      const double err = gb::ScoreErrorBound(docs.offsets[d + 1] - docs.offsets[d], max_norm);
      for (int64_t i = 0; i < cb.nodes; ++i) {
        const double error = std::abs(NodeScore(docs, cb, d, i) - ExactScore(docs, cb, d, i));
        ASSERT_LE(error, err) << "document " << d << " node " << i;
        worst = std::max(worst, error / err);
      }
    }
    std::printf("weights from %.0f: largest |score error| / bound %.3f\n", lo, worst);
  }
}

struct Search {
  std::vector<int32_t> bmu, second;
  std::vector<float> score;
  explicit Search(int64_t n) : bmu(n, -7), second(n, -7), score(n, 0) {}
  BmuOutput out() { return BmuOutput{bmu.data(), second.data(), score.data()}; }
};

struct Bounds {
  std::vector<float> lower;
  GroupBoundsView view;
  Bounds(int64_t docs, int64_t nodes, int strip)
      : lower(static_cast<size_t>(docs * GroupCount(nodes, strip)), kNan) {
    view.strip_nodes = strip;
    view.groups = GroupCount(nodes, strip);
    view.lower = lower.data();
  }
};

struct Drift {
  std::vector<float> rise, change;
  GroupDriftView view;
  Drift(int64_t features, int64_t nodes, int strip)
      : rise(static_cast<size_t>(features * GroupCount(nodes, strip)), kNan),
        change(static_cast<size_t>(GroupCount(nodes, strip)), kNan) {
    view.strip_nodes = strip;
    view.groups = GroupCount(nodes, strip);
    view.weight_rise = rise.data();
    view.norm_change = change.data();
  }
};

// The bounds hold the exact minimum score of every group.
void ExpectBoundsHold(const HostDocs& docs, const HostCodebook& cb, const Bounds& b, int epoch) {
  const int64_t groups = b.view.groups, s = b.view.strip_nodes;
  for (int64_t d = 0; d < docs.rows(); ++d) {
    for (int64_t g = 0; g < groups; ++g) {
      double minimum = std::numeric_limits<double>::infinity();
      for (int64_t j = g * s; j < std::min(cb.nodes, (g + 1) * s); ++j) {
        minimum = std::min(minimum, ExactScore(docs, cb, d, j));
      }
      ASSERT_LE(b.lower[d * groups + g], minimum) << "epoch " << epoch << " document " << d << " group " << g;
    }
  }
}

// The drift from the two codebooks directly, exact in double (rounded outwards).
void ReferenceDrift(const HostCodebook& before, const HostCodebook& after, Drift& drift) {
  const int64_t groups = drift.view.groups, s = drift.view.strip_nodes, m = before.nodes;
  for (int64_t g = 0; g < groups; ++g) {
    double change = std::numeric_limits<double>::infinity();
    for (int64_t j = g * s; j < std::min(m, (g + 1) * s); ++j) {
      change = std::min(change, static_cast<double>(after.norms[j]) - before.norms[j]);
    }
    drift.change[g] = gb::RoundDown(change);
    for (int64_t v = 0; v < before.features; ++v) {
      double rise = 0;
      for (int64_t j = g * s; j < std::min(m, (g + 1) * s); ++j) {
        rise = std::max(rise, static_cast<double>(after.Weight(v, j)) - before.Weight(v, j));
      }
      drift.rise[v * groups + g] = gb::RoundUp(rise);
    }
  }
}

// One epoch: the group-bounded search against the exhaustive one, bit for bit.
// Returns the fraction of (document, group) pairs searched.
double CheckEpoch(const DocumentSet& set, const HostDocs& docs, HostCodebook& cb, Bounds& bounds,
                  const Drift* drift, Search& bounded, int epoch, int64_t* documents_skipped = nullptr) {
  const int64_t n = docs.rows();
  Search full(n);
  GroupSearchStats stats;
  EXPECT_TRUE(FindBmusGroupBounded(Stream::Cpu(), set, cb.view(), bounded.out(), bounds.view,
                                   drift != nullptr ? &drift->view : nullptr, nullptr, BmuHints(), &stats)
                  .ok());
  EXPECT_TRUE(FindBmus(Stream::Cpu(), BmuAlgorithm::kFeatureMajor, set, cb.view(), full.out()).ok());
  for (int64_t d = 0; d < n; ++d) {
    EXPECT_EQ(bounded.bmu[d], full.bmu[d]) << "epoch " << epoch << " document " << d;
    EXPECT_EQ(std::memcmp(&bounded.score[d], &full.score[d], 4), 0) << "epoch " << epoch << " document " << d;
    if (drift == nullptr) {
      EXPECT_EQ(bounded.second[d], full.second[d]) << "epoch " << epoch << " document " << d;
    }
    if (testing::Test::HasFailure()) return 1;
  }
  ExpectBoundsHold(docs, cb, bounds, epoch);
  EXPECT_EQ(stats.documents, n);
  EXPECT_EQ(stats.pairs, n * bounds.view.groups);
  if (drift == nullptr) {
    EXPECT_EQ(stats.pairs_searched, stats.pairs);
  }
  if (documents_skipped != nullptr) *documents_skipped = stats.documents_skipped;
  const double fraction = static_cast<double>(stats.pairs_searched) / stats.pairs;
  std::printf("  epoch %d: %.1f%% of (document, group) pairs searched, %lld documents skipped\n", epoch,
              100 * fraction, static_cast<long long>(stats.documents_skipped));
  return fraction;
}

// Training-like sequences: the batch update (with its drift) from the BMUs,
// radius shrinking to the 3-tap kernel; every epoch must give the exhaustive
// search's BMUs and scores.
void CheckTraining(HostCodebook cb, const HostDocs& docs, const GridShape& grid, int strip, int epochs) {
  const int64_t n = docs.rows();
  auto set = DocumentSet::Create(docs.view(), Stream::Cpu(), DocumentParts{false, true, false});
  ASSERT_TRUE(set.ok()) << set.status();
  Search bounded(n);
  Bounds bounds(n, cb.nodes, strip);
  Drift drift(cb.features, cb.nodes, strip);
  double late = 1;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    const double fraction = CheckEpoch(*set, docs, cb, bounds, epoch == 0 ? nullptr : &drift, bounded, epoch);
    if (testing::Test::HasFailure()) return;
    if (epoch == epochs - 1) late = fraction;
    const HostCodebook before = cb;
    UpdateOptions options;
    options.group_drift = drift.view;
    ASSERT_TRUE(BatchUpdate(Stream::Cpu(), set->csc(), bounded.bmu.data(), grid,
                            BoxBlurForRadius(epoch < 2 ? 1.5 : 0.45, 3), cb.view(), nullptr, options)
                    .ok());
    // The update's drift bounds the true changes, and tightly.
    Drift exact(cb.features, cb.nodes, strip);
    ReferenceDrift(before, cb, exact);
    for (size_t k = 0; k < drift.rise.size(); ++k) {
      ASSERT_GE(drift.rise[k], exact.rise[k]) << k;
      ASSERT_LE(drift.rise[k], exact.rise[k] * (1 + 1e-6)) << k;
    }
    for (size_t g = 0; g < drift.change.size(); ++g) {
      ASSERT_LE(drift.change[g], exact.change[g]) << g;
      ASSERT_GE(drift.change[g], exact.change[g] - 1e-6 * std::abs(exact.change[g]) - 1e-30) << g;
    }
  }
  // The point is the bits, but the bounded path must have been exercised.
  EXPECT_LT(late, 0.9);
}

TEST(GroupBoundedSearch, MatchesExhaustiveOverTrainingFp32) {
  std::mt19937 rng(7);
  const HostDocs docs = ZipfTopicDocs(2000, 200, 8, 6, rng);
  const GridShape grid{8, 6, Topology::kPlanar};
  CheckTraining(RandomCodebook(grid.nodes(), 200, rng, 0.0f, 0.2f), docs, grid, 16, 8);
}

TEST(GroupBoundedSearch, MatchesExhaustiveWithNegativeWeightsAndRaggedGroups) {
  std::mt19937 rng(8);
  const HostDocs docs = ZipfTopicDocs(1500, 150, 6, 6, rng);
  const GridShape grid{7, 5, Topology::kToroidal};  // 35 nodes: groups of 6, the last of 5
  CheckTraining(RandomCodebook(grid.nodes(), 150, rng, -0.5f, 0.5f), docs, grid, 6, 8);
}

TEST(GroupBoundedSearch, MatchesExhaustiveOverTrainingFp16) {
  std::mt19937 rng(9);
  const HostDocs docs = ZipfTopicDocs(1500, 160, 6, 6, rng);
  const GridShape grid{6, 6, Topology::kPlanar};
  CheckTraining(testutil::ToHalf(RandomCodebook(grid.nodes(), 160, rng, 0.0f, 0.3f)), docs, grid, 4, 8);
}

TEST(GroupBoundedSearch, SingleNodeGroups) {
  std::mt19937 rng(10);
  const HostDocs docs = ZipfTopicDocs(800, 100, 4, 5, rng);
  const GridShape grid{5, 4, Topology::kPlanar};
  CheckTraining(RandomCodebook(grid.nodes(), 100, rng, 0.0f, 0.3f), docs, grid, 1, 6);
}

// Dyadic codebooks (every sum exact: many tied scores) moved by dyadic steps,
// with the exact drift: ties are searched and broken by the lowest index.
TEST(GroupBoundedSearch, TiedCodebooksMatchExhaustive) {
  std::mt19937 rng(11);
  const HostDocs docs = ZipfTopicDocs(1200, 64, 4, 4, rng);
  const int64_t n = docs.rows();
  auto set = DocumentSet::Create(docs.view(), Stream::Cpu(), DocumentParts{false, false, false});
  ASSERT_TRUE(set.ok());
  HostCodebook cb = DyadicCodebook(24, 64, rng, 3);
  const int strip = 4;
  Search bounded(n);
  Bounds bounds(n, cb.nodes, strip);
  Drift drift(cb.features, cb.nodes, strip);
  std::uniform_int_distribution<int64_t> pick(0, cb.f32.size() - 1);
  std::uniform_int_distribution<int> level(0, 2);
  int64_t ties = 0;
  for (int epoch = 0; epoch < 6; ++epoch) {
    CheckEpoch(*set, docs, cb, bounds, epoch == 0 ? nullptr : &drift, bounded, epoch);
    if (HasFailure()) return;
    for (int64_t d = 0; d < n; ++d) {
      const int32_t s = bounded.second[d];
      ties += s >= 0 && NodeScore(docs, cb, d, s) == bounded.score[d];
    }
    const HostCodebook before = cb;
    for (int k = 0; k < 40; ++k) cb.f32[pick(rng)] = level(rng) / 16.0f;  // a few weights move
    cb.UpdateNorms();
    ReferenceDrift(before, cb, drift);
  }
  EXPECT_GT(ties, 0);
}

// A still codebook: every document whose BMU is not tied with a node of
// another group searches its own group only.
TEST(GroupBoundedSearch, StillCodebookSearchesOnlyTheBmuGroup) {
  std::mt19937 rng(5);
  const HostDocs docs = ZipfTopicDocs(600, 48, 4, 5, rng);
  auto set = DocumentSet::Create(docs.view(), Stream::Cpu(), DocumentParts{false, false, false});
  ASSERT_TRUE(set.ok());
  HostCodebook cb = RandomCodebook(32, 48, rng, 0.0f, 1.0f);
  const int64_t n = docs.rows();
  Search bounded(n);
  Bounds bounds(n, cb.nodes, 8);
  Drift drift(cb.features, cb.nodes, 8);
  std::fill(drift.rise.begin(), drift.rise.end(), 0.0f);
  std::fill(drift.change.begin(), drift.change.end(), 0.0f);
  CheckEpoch(*set, docs, cb, bounds, nullptr, bounded, 0);
  int64_t skipped = 0;
  CheckEpoch(*set, docs, cb, bounds, &drift, bounded, 1, &skipped);
  EXPECT_GT(skipped, n * 9 / 10);
}

TEST(GroupBoundedSearch, RefusesMismatchedTables) {
  std::mt19937 rng(3);
  const HostDocs docs = ZipfTopicDocs(10, 20, 2, 3, rng);
  auto set = DocumentSet::Create(docs.view(), Stream::Cpu(), DocumentParts{false, false, false});
  ASSERT_TRUE(set.ok());
  HostCodebook cb = RandomCodebook(16, 20, rng);
  Search s(docs.rows());
  Bounds bounds(docs.rows(), cb.nodes, 4);
  bounds.view.groups = 3;
  EXPECT_FALSE(FindBmusGroupBounded(Stream::Cpu(), *set, cb.view(), s.out(), bounds.view, nullptr).ok());
  Bounds good(docs.rows(), cb.nodes, 4);
  Drift drift(cb.features, cb.nodes, 8);
  EXPECT_FALSE(FindBmusGroupBounded(Stream::Cpu(), *set, cb.view(), s.out(), good.view, &drift.view).ok());
  EXPECT_EQ(std::string(GroupBoundsUnsupportedReason(Backend::kCuda, cb.view(), 12)).empty(), false);
  EXPECT_EQ(std::string(GroupBoundsUnsupportedReason(Backend::kCpu, cb.view(), 12)).empty(), true);
}

}  // namespace
}  // namespace som
}  // namespace tessera
