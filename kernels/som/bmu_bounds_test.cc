// BMU search with distance bounds (bmu_bounds.h), CPU backend: the bound
// arithmetic and skip decision, the score error bound against exact scores,
// the update's node shifts against the true moves, and searches over moving
// codebooks against the exhaustive search (same BMUs and scores, bit for bit,
// ties included).
#include "kernels/som/bmu_bounds.h"

#include <gtest/gtest.h>

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

TEST(BoundArithmetic, RoundsOutwardsAndDecides) {
  const double x = 1.0 / 3.0;
  EXPECT_GE(static_cast<double>(bounds::RoundUp(x)), x);
  EXPECT_LE(static_cast<double>(bounds::RoundDown(x)), x);
  EXPECT_EQ(bounds::RoundUp(0.5), 0.5f);  // exact values stay
  EXPECT_EQ(bounds::RoundDown(0.5), 0.5f);
  EXPECT_GE(bounds::ShiftedUpper(1.0f, 0.25f), 1.25f);
  EXPECT_LE(bounds::ShiftedLower(1.0f, 0.25f), 0.75f);
  EXPECT_LT(bounds::ShiftedLower(0.1f, 0.25f), 0.0f);

  const double err = bounds::ScoreErrorBound(10, 4.0f);
  EXPECT_GT(err, 0.0);
  EXPECT_LT(err, 1e-4);
  EXPECT_TRUE(bounds::CanSkip(1.0f, 2.0f, err));
  EXPECT_FALSE(bounds::CanSkip(1.0f, 1.0f, err));        // a tie never skips
  EXPECT_FALSE(bounds::CanSkip(1.0f, 1.0000001f, err));  // inside the margin
  EXPECT_FALSE(bounds::CanSkip(1.0f, 0.0f, err));
  EXPECT_FALSE(bounds::CanSkip(0.5f, -2.0f, err));  // lower below 0: its square says nothing
  EXPECT_FALSE(bounds::CanSkip(1.0f, std::numeric_limits<float>::quiet_NaN(), err));
  EXPECT_FALSE(bounds::CanSkip(std::numeric_limits<float>::infinity(), 2.0f, err));
  EXPECT_FALSE(bounds::CanSkip(1.0f, 2.0f, bounds::ScoreErrorBound(10, std::numeric_limits<float>::infinity())));
  // An empty document against an all-zero map: every score is 0, no skip.
  EXPECT_FALSE(bounds::CanSkip(0.0f, 0.0f, bounds::ScoreErrorBound(0, 0.0f)));

  // The step: largest shift and the largest of the others.
  std::vector<float> shift = {0.5f, 2.0f, 1.5f, 2.0f}, norms = {1, 3, 2, 0.5f};
  auto step = MakeBoundStep(Stream::Cpu(), shift.data(), norms.data(), 4);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_TRUE(step->have_bounds);
  EXPECT_EQ(step->max_node, 1);
  EXPECT_EQ(step->max_shift, 2.0f);
  EXPECT_EQ(step->other_max_shift, 2.0f);
  EXPECT_EQ(step->max_sq_norm, 3.0f);
  EXPECT_EQ(bounds::OtherShift(*step, 1), 2.0f);
  shift[3] = 1.0f;
  step = MakeBoundStep(Stream::Cpu(), shift.data(), norms.data(), 4);
  EXPECT_EQ(bounds::OtherShift(*step, 1), 1.5f);
  EXPECT_EQ(bounds::OtherShift(*step, 0), 2.0f);
  step = MakeBoundStep(Stream::Cpu(), nullptr, norms.data(), 4);
  EXPECT_FALSE(step->have_bounds);
}

// The margin covers the rounding of every computed score: the kernels' score
// (NodeScore gives the same bits) against the exact one in double, on
// weights of both signs (PCA initial maps) and on long documents.
TEST(BoundArithmetic, ScoreErrorBoundCoversComputedScores) {
  std::mt19937 rng(37);
  const HostDocs docs = ZipfTopicDocs(400, 300, 6, 20, rng);
  for (float lo : {0.0f, -1.0f}) {
    HostCodebook cb = RandomCodebook(64, 300, rng, lo, 1.0f);
    const CodebookView view = cb.view();
    float max_norm = 0;
    for (float n : cb.norms) max_norm = std::max(max_norm, n);
    double worst = 0;
    for (int64_t d = 0; d < docs.rows(); ++d) {
      const int64_t nnz = docs.offsets[d + 1] - docs.offsets[d];
      const double err = bounds::ScoreErrorBound(nnz, max_norm);
      for (int32_t i = 0; i < 64; ++i) {
        const double exact = testutil::Dist2(docs, d, cb, i) - nnz;  // ||w||^2 - 2 x.w
        const double computed = cpu::NodeScore(docs.view(), view, d, i);
        ASSERT_LE(std::abs(computed - exact), err) << "document " << d << " node " << i;
        worst = std::max(worst, std::abs(computed - exact) / err);
        // The bounds from the computed score hold the true distance.
        const double dist = std::sqrt(testutil::Dist2(docs, d, cb, i));
        ASSERT_GE(bounds::UpperFromScore(nnz, static_cast<float>(computed), err), dist);
        ASSERT_LE(bounds::LowerFromScore(nnz, static_cast<float>(computed), err), dist);
      }
    }
    std::printf("weights from %.0f: largest |score error| / bound %.3f\n", lo, worst);
  }
}

struct Search {
  std::vector<int32_t> bmu, second;
  std::vector<float> score;
  BmuOutput out() { return BmuOutput{bmu.data(), second.data(), score.data()}; }
  explicit Search(int64_t n) : bmu(n, -7), second(n, -7), score(n, 0) {}
};

// Training-like sequences: the codebook is updated from the BMUs (the batch
// update with node shifts), and every search with bounds must return the
// exhaustive search's BMUs and scores, bit for bit. Dyadic weights make ties
// (searched in full, lowest index); the update's shifts must bound the moves.
void CheckSequence(HostCodebook cb, const HostDocs& docs, const GridShape& grid, int epochs, double* skipped_late) {
  const int64_t n = docs.rows(), m = cb.nodes;
  auto set = DocumentSet::Create(docs.view(), Stream::Cpu(), DocumentParts{false, true});
  ASSERT_TRUE(set.ok()) << set.status();
  Search bounded(n), full(n);
  std::vector<float> upper(n), lower(n), shift(m);
  const BmuBounds bounds{upper.data(), lower.data()};
  bool have = false;
  int64_t skipped_total = 0, late_docs = 0;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    auto step = MakeBoundStep(Stream::Cpu(), have ? shift.data() : nullptr, cb.norms.data(), m);
    ASSERT_TRUE(step.ok());
    int64_t searched = -1;
    ASSERT_TRUE(FindBmusBounded(Stream::Cpu(), *set, cb.view(), bounded.out(), bounds, *step, nullptr, BmuTuning(),
                                BmuHints(), &searched)
                    .ok());
    have = true;
    ASSERT_TRUE(FindBmus(Stream::Cpu(), BmuAlgorithm::kFeatureMajor, *set, cb.view(), full.out()).ok());
    for (int64_t d = 0; d < n; ++d) {
      ASSERT_EQ(bounded.bmu[d], full.bmu[d]) << "epoch " << epoch << " document " << d;
      ASSERT_EQ(std::memcmp(&bounded.score[d], &full.score[d], 4), 0) << "epoch " << epoch << " document " << d;
      // The bounds hold the true distances of the current codebook.
      const double to_bmu = std::sqrt(testutil::Dist2(docs, d, cb, full.bmu[d]));
      ASSERT_GE(upper[d], to_bmu * (1 - 1e-12)) << d;
      if (full.second[d] >= 0) {
        ASSERT_LE(lower[d], std::sqrt(testutil::Dist2(docs, d, cb, full.second[d])) * (1 + 1e-12)) << d;
      }
    }
    if (epoch == 0) {
      EXPECT_EQ(searched, n);
    }
    if (epoch >= epochs / 2) {
      skipped_total += n - searched;
      late_docs += n;
    }
    std::printf("  epoch %d: searched %lld of %lld\n", epoch, static_cast<long long>(searched),
                static_cast<long long>(n));
    // The update: radius shrinking to the 3-tap kernel (k-means-like).
    const HostCodebook before = cb;
    BoxBlur blur = BoxBlurForRadius(epoch < 2 ? 1.5 : 0.45, 3);
    UpdateOptions options;
    options.node_shift = shift.data();
    ASSERT_TRUE(BatchUpdate(Stream::Cpu(), set->csc(), bounded.bmu.data(), grid, blur, cb.view(), nullptr, options)
                    .ok());
    for (int64_t i = 0; i < m; ++i) {
      double moved = 0;
      for (int64_t v = 0; v < cb.features; ++v) {
        const double delta = static_cast<double>(cb.Weight(v, i)) - before.Weight(v, i);
        moved += delta * delta;
      }
      ASSERT_GE(shift[i], std::sqrt(moved)) << "node " << i;
      ASSERT_LE(shift[i], std::sqrt(moved) * (1 + 1e-6) + 1e-30) << "node " << i;
    }
  }
  *skipped_late = late_docs > 0 ? static_cast<double>(skipped_total) / late_docs : 0;
}

TEST(BoundedSearch, MatchesExhaustiveOverTrainingLikeUpdates) {
  std::mt19937 rng(7);
  const HostDocs docs = ZipfTopicDocs(3000, 200, 8, 6, rng);
  const GridShape grid{8, 6, Topology::kPlanar};
  double skipped = 0;
  CheckSequence(RandomCodebook(grid.nodes(), 200, rng, 0.0f, 0.2f), docs, grid, 10, &skipped);
  // Few skips on such maps (a few nodes move far each epoch; the largest move
  // bounds every other node): the point here is the bits.
  std::printf("random start: %.1f%% of late searches skipped\n", 100 * skipped);
}

TEST(BoundedSearch, TiesGoThroughTheFullSearch) {
  std::mt19937 rng(11);
  const HostDocs docs = ZipfTopicDocs(1500, 64, 4, 4, rng);
  const GridShape grid{4, 4, Topology::kToroidal};
  double skipped = 0;
  // Dyadic weights: many exactly equal scores; the update's means are not
  // dyadic, so later epochs check ordinary rounding.
  CheckSequence(DyadicCodebook(grid.nodes(), 64, rng, 2), docs, grid, 6, &skipped);
  std::printf("dyadic start: %.1f%% of late searches skipped\n", 100 * skipped);
}

// A codebook that does not move at all: every tie-free document is skipped,
// and a document tied between two nodes never is.
TEST(BoundedSearch, StillCodebookSkipsAllButTies) {
  std::mt19937 rng(5);
  const HostDocs docs = ZipfTopicDocs(800, 48, 4, 5, rng);
  HostCodebook cb = DyadicCodebook(12, 48, rng, 4);
  auto set = DocumentSet::Create(docs.view(), Stream::Cpu(), DocumentParts{false, false});
  ASSERT_TRUE(set.ok());
  const int64_t n = docs.rows();
  Search s(n), full(n);
  std::vector<float> upper(n), lower(n), shift(cb.nodes, 0.0f);
  const BmuBounds bounds{upper.data(), lower.data()};
  auto first = MakeBoundStep(Stream::Cpu(), nullptr, cb.norms.data(), cb.nodes);
  ASSERT_TRUE(FindBmusBounded(Stream::Cpu(), *set, cb.view(), s.out(), bounds, *first).ok());
  ASSERT_TRUE(FindBmus(Stream::Cpu(), BmuAlgorithm::kFeatureMajor, *set, cb.view(), full.out()).ok());
  int64_t ties = 0;
  for (int64_t d = 0; d < n; ++d) {
    ties += full.second[d] >= 0 && full.score[d] == cpu::NodeScore(docs.view(), cb.view(), d, full.second[d]);
  }
  ASSERT_GT(ties, 0);
  auto still = MakeBoundStep(Stream::Cpu(), shift.data(), cb.norms.data(), cb.nodes);
  int64_t searched = -1;
  ASSERT_TRUE(FindBmusBounded(Stream::Cpu(), *set, cb.view(), s.out(), bounds, *still, nullptr, BmuTuning(),
                              BmuHints(), &searched)
                  .ok());
  EXPECT_EQ(searched, ties);
  EXPECT_EQ(s.bmu, full.bmu);
  EXPECT_EQ(s.second, full.second);
  EXPECT_EQ(std::memcmp(s.score.data(), full.score.data(), 4 * n), 0);
}

}  // namespace
}  // namespace som
}  // namespace tessera
