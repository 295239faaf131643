// Pruning of LSS / LSS-R comparisons by an upper bound of the score
// (lss_impl.h ScoreUpperBound): the bound is >= the exact score on every pair
// (real and random templates, crops, the paper's parameters and others),
// ScoreOrPrune returns the exact score bit for bit or prunes only scores
// below the threshold (ties at the threshold are never pruned), and a
// running-threshold top-k search gives the same top-k lists as scoring all.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/fingerprint/lss.h"
#include "kernels/fingerprint/test_templates.h"

namespace tessera {
namespace fingerprint {
namespace {

using testing::TestTemplates;

std::vector<MccTemplate> Build(const std::vector<std::vector<MinutiaPoint>>& pts, size_t keep_max = 0,
                               uint32_t crop_seed = 0) {
  std::vector<MccTemplate> out;
  std::mt19937 rng(crop_seed);
  for (auto p : pts) {
    // Crops (latent-like partial prints): a random subset of 12-30 minutiae.
    if (keep_max > 0 && p.size() > 12) {
      std::shuffle(p.begin(), p.end(), rng);
      p.resize(std::min(p.size(), 12 + rng() % (keep_max - 11)));
    }
    out.push_back(cpu::BuildMccTemplate(p));
  }
  return out;
}

std::vector<LssParams> ParamSets() {
  std::vector<LssParams> sets(4);
  sets[1].relaxation_iterations = 1;
  sets[2].relaxation_iterations = 8;
  sets[2].w_r = 0.3f;
  sets[3].w_r = 0.9f;
  sets[3].min_np = 2;
  sets[3].max_np = 20;
  return sets;
}

TEST(LssPrune, BoundIsAtLeastTheScoreOnEveryPair) {
  int pairs = 0, tight = 0;
  for (int db = 1; db <= 2; ++db) {
    const auto full = Build(TestTemplates(db, 30, 31 + db));
    const auto crops = Build(TestTemplates(db, 30, 41 + db), 30, 7 + db);
    for (const LssParams& params : ParamSets()) {
      const LssConstants c = MakeLssConstants(params);
      for (size_t i = 0; i < crops.size(); i += 5) {
        for (size_t j = 0; j < full.size(); j += 2) {
          for (MccScore kind : {MccScore::kLssR, MccScore::kLss}) {
            const float score = cpu::ReferenceScore(crops[i], full[j], kind, c);
            const double bound = cpu::ScoreUpperBound(crops[i], full[j], kind, c);
            ASSERT_GE(bound, score) << "DB" << db << " crop " << i << " template " << j << " relax "
                                    << params.relaxation_iterations << " wR " << params.w_r;
            ++pairs;
            tight += bound < score + 0.05;
          }
        }
        // Self-comparison (the largest scores, nearest the bound).
        const double bound = cpu::ScoreUpperBound(full[i], full[i], MccScore::kLssR, c);
        ASSERT_GE(bound, cpu::ReferenceScore(full[i], full[i], MccScore::kLssR, c));
      }
    }
  }
  std::printf("%d pairs: bound >= score on all; %d within 0.05\n", pairs, tight);
  EXPECT_GT(pairs, 1000);
}

// A threshold equal to the exact score must never prune (the bound would be
// below the score): this checks both bounds ScoreOrPrune applies (from the
// histogram, and from rho's row sums before the relaxation).
TEST(LssPrune, ScoreOrPruneIsExactOrBelowThreshold) {
  for (const LssParams& params : ParamSets()) {
  const LssConstants c = MakeLssConstants(params);
  const auto full = Build(TestTemplates(1, 40, 51));
  const auto crops = Build(TestTemplates(1, 40, 52), 30, 9);
  MccGallery g;
  for (const auto& t : full) g.Append(t);
  std::mt19937 rng(3);
  int pruned = 0, kept = 0, at_threshold = 0;
  for (size_t i = 0; i < crops.size(); i += 3) {
    const LssProbe probe = PrepareProbe(crops[i]);
    for (int t = 0; t < g.num_templates(); ++t) {
      for (MccScore kind : {MccScore::kLssR, MccScore::kLss}) {
        const float exact = cpu::Score(probe, g, t, kind, c);
        // Thresholds around the score: equal (a tie must survive), just
        // above and below, and random.
        const float thresholds[] = {exact, std::nextafter(exact, 2.0f), std::nextafter(exact, -1.0f),
                                    std::uniform_real_distribution<float>(0.0f, 0.6f)(rng)};
        for (float th : thresholds) {
          const float got = cpu::ScoreOrPrune(probe, g, t, kind, c, th);
          if (got == kLssPrunedScore) {
            ASSERT_LT(exact, th) << "crop " << i << " template " << t;
            ++pruned;
          } else {
            ASSERT_EQ(got, exact) << "crop " << i << " template " << t;
            ++kept;
            at_threshold += th == exact;
          }
        }
      }
    }
  }
  std::printf("relax %d wR %.1f: %d pruned, %d exact (%d at a threshold equal to the score)\n",
              params.relaxation_iterations, params.w_r, pruned, kept, at_threshold);
  EXPECT_GT(pruned, kept / 10);  // the bounds prune something
  }
}

TEST(LssPrune, RunningThresholdTopKEqualsFullTopK) {
  const LssConstants c = MakeLssConstants(LssParams());
  // Duplicated templates make exact ties between gallery entries.
  auto full = Build(TestTemplates(2, 60, 61));
  const size_t n0 = full.size();
  for (size_t i = 0; i < n0; i += 4) full.push_back(full[i]);
  const auto crops = Build(TestTemplates(2, 60, 62), 30, 11);
  MccGallery g;
  for (const auto& t : full) g.Append(t);
  const int k = 10;
  int lists = 0, pruned = 0;
  for (size_t i = 0; i < crops.size(); i += 6) {
    const LssProbe probe = PrepareProbe(crops[i]);
    std::vector<std::pair<float, int>> all;
    for (int t = 0; t < g.num_templates(); ++t) all.push_back({cpu::Score(probe, g, t, MccScore::kLssR, c), t});
    auto before = [](const std::pair<float, int>& a, const std::pair<float, int>& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    };
    std::sort(all.begin(), all.end(), before);
    all.resize(k);
    // Running top-k, the threshold its k-th score once full.
    std::vector<std::pair<float, int>> top;
    for (int t = 0; t < g.num_templates(); ++t) {
      const float th = static_cast<int>(top.size()) == k ? top.back().first : 0.0f;
      const float s = cpu::ScoreOrPrune(probe, g, t, MccScore::kLssR, c, th);
      if (s == kLssPrunedScore) {
        ++pruned;
        continue;
      }
      top.push_back({s, t});
      std::sort(top.begin(), top.end(), before);
      if (static_cast<int>(top.size()) > k) top.pop_back();
    }
    ASSERT_EQ(top, all) << "crop " << i;
    ++lists;
  }
  std::printf("%d top-%d lists identical; %d comparisons pruned\n", lists, k, pruned);
  EXPECT_GT(pruned, 0);
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
