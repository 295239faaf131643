#include "services/som/labels.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tessera {
namespace som {
namespace {

// 3x2 map: "common" is strong everywhere (as a frequent term would be), the
// others peak in one region each.
Atlas SmallMap() {
  TrainResult result;
  result.model.grid = GridShape{3, 2, Topology::kPlanar};
  result.model.features = 4;
  result.model.weights_f32 = {
      0.9f, 0.95f, 0.9f, 0.9f, 0.9f, 0.85f,  // common
      0.6f, 0.1f, 0.0f, 0.0f, 0.0f, 0.0f,    // alpha
      0.0f, 0.0f, 0.0f, 0.1f, 0.2f, 0.5f,    // beta
      0.0f, 0.2f, 0.4f, 0.0f, 0.0f, 0.0f,    // gamma
  };
  auto atlas = MakeAtlas(result, {0, 5}, {"common", "alpha", "beta", "gamma"}, {}, TrainOptions());
  EXPECT_TRUE(atlas.ok()) << atlas.status();
  return *std::move(atlas);
}

TEST(LabelsTest, FeatureMeans) {
  const std::vector<double> means = FeatureMeans(SmallMap().model);
  ASSERT_EQ(means.size(), 4u);
  EXPECT_NEAR(means[0], 0.9, 1e-6);
  EXPECT_NEAR(means[1], 0.7 / 6, 1e-6);
  EXPECT_NEAR(means[3], 0.1, 1e-6);
}

TEST(LabelsTest, DistinctiveFeaturesBeatTheFrequentOne) {
  const Atlas atlas = SmallMap();
  // By raw weight every cell would be "common".
  EXPECT_EQ(TopFeatures(atlas, 0, 1)[0].feature, 0);
  EXPECT_EQ(TopFeatures(atlas, 5, 1)[0].feature, 0);
  const std::vector<CellLabel> labels = LabelCells(atlas, 2);
  ASSERT_EQ(labels.size(), 6u);
  // Node 0: common is at its mean (not distinctive); alpha 0.6 vs mean 0.7/6.
  ASSERT_EQ(labels[0].features.size(), 1u);
  EXPECT_EQ(labels[0].features[0].feature, 1);
  EXPECT_NEAR(labels[0].features[0].lift, 0.6 / (0.7 / 6), 1e-5);
  EXPECT_NEAR(labels[0].features[0].score, 0.6 * std::log(0.6 / (0.7 / 6)), 1e-5);
  EXPECT_EQ(labels[0].text, "alpha");
  // Node 1: gamma (0.2 * ln 2 = 0.139) before common (0.95 * ln(0.95 / 0.9) = 0.051).
  EXPECT_EQ(labels[1].text, "gamma; common");
  EXPECT_EQ(labels[2].text, "gamma");
  EXPECT_EQ(labels[5].text, "beta");
  EXPECT_EQ(labels[4].text, "beta");
  for (const CellLabel& label : labels) EXPECT_NE(label.text, "common");
}

TEST(LabelsTest, ConstantMapFallsBackToStrongest) {
  TrainResult result;
  result.model.grid = GridShape{2, 1, Topology::kPlanar};
  result.model.features = 3;
  result.model.weights_f32 = {0.2f, 0.2f, 0.7f, 0.7f, 0.0f, 0.0f};
  auto atlas = MakeAtlas(result, {}, {"x", "y", "z"}, {}, TrainOptions());
  ASSERT_TRUE(atlas.ok());
  const std::vector<CellLabel> labels = LabelCells(*atlas, 3);
  EXPECT_EQ(labels[0].text, "y; x");  // zero weights are not labels
  EXPECT_EQ(labels[1].features[0].score, 0.0);
}

TEST(LabelsTest, AllCellsAtOnceMatchOneByOne) {
  TrainResult result;
  result.model.grid = GridShape{5, 4, Topology::kToroidal};
  result.model.features = 30;
  uint32_t state = 12345;
  for (int k = 0; k < 30 * 20; ++k) {
    state = state * 1664525u + 1013904223u;
    result.model.weights_f32.push_back(static_cast<float>((state >> 8) % 1000) / 1000.0f);
  }
  result.model.weights_f32[7 * 20 + 3] = 0.5f;  // a tie at node 3 with whatever else scores the same
  auto atlas = MakeAtlas(result, {}, {}, {}, TrainOptions());
  ASSERT_TRUE(atlas.ok());
  const std::vector<double> means = FeatureMeans(atlas->model);
  for (int top : {1, 3, 30}) {
    const std::vector<CellLabel> all = LabelCells(*atlas, top);
    ASSERT_EQ(all.size(), 20u);
    for (int64_t i = 0; i < 20; ++i) {
      const CellLabel one = LabelCell(*atlas, means, i, top);
      ASSERT_EQ(all[i].features.size(), one.features.size()) << i;
      for (size_t j = 0; j < one.features.size(); ++j) {
        EXPECT_EQ(all[i].features[j].feature, one.features[j].feature);
        EXPECT_EQ(all[i].features[j].score, one.features[j].score);
      }
      EXPECT_EQ(all[i].text, one.text);
      EXPECT_FALSE(one.text.empty());
    }
  }
  EXPECT_TRUE(LabelCells(*atlas, 0)[4].features.empty());
}

TEST(LabelsTest, OutOfRange) {
  const Atlas atlas = SmallMap();
  const std::vector<double> means = FeatureMeans(atlas.model);
  EXPECT_TRUE(LabelCell(atlas, means, 6, 3).features.empty());
  EXPECT_TRUE(LabelCell(atlas, means, 0, 0).features.empty());
  EXPECT_TRUE(LabelCell(atlas, {1.0}, 0, 3).features.empty());
}

}  // namespace
}  // namespace som
}  // namespace tessera
