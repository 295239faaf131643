#include "services/fingerprint/eval/cmc_plot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

namespace tessera {
namespace fingerprint {
namespace {

TEST(Cmc, CumulativeRates) {
  // Ranks 1, 1, 3, not found (0), 120 (beyond max_rank).
  const auto cmc = ComputeCmc({1, 1, 3, 0, 120}, 100);
  ASSERT_EQ(cmc.size(), 100u);
  EXPECT_DOUBLE_EQ(cmc[0], 0.4);
  EXPECT_DOUBLE_EQ(cmc[1], 0.4);
  EXPECT_DOUBLE_EQ(cmc[2], 0.6);
  EXPECT_DOUBLE_EQ(cmc[99], 0.6);
  EXPECT_EQ(ComputeCmc({}, 5), std::vector<double>(5, 0.0));
}

int CountColor(const Image8& img, const uint8_t rgb[3]) {
  int n = 0;
  for (int y = 0; y < img.height; ++y) {
    for (int x = 0; x < img.width; ++x) {
      n += img.at(x, y, 0) == rgb[0] && img.at(x, y, 1) == rgb[1] && img.at(x, y, 2) == rgb[2];
    }
  }
  return n;
}

TEST(CmcPlot, DrawsEachCurveWhereItBelongs) {
  CmcCurve perfect{"perfect", std::vector<double>(100, 1.0)};
  CmcCurve half{"half", std::vector<double>(100, 0.5)};
  auto img = RenderCmcPlot({perfect, half});
  ASSERT_TRUE(img.ok()) << img.status();
  EXPECT_EQ(img->width, 640);
  EXPECT_EQ(img->channels, 3);
  uint8_t c0[3], c1[3];
  CmcCurveColor(0, c0);
  CmcCurveColor(1, c1);
  EXPECT_GT(CountColor(*img, c0), 500);
  EXPECT_GT(CountColor(*img, c1), 500);
  // The perfect curve runs along the top of the plot (y = 20), the half one
  // through the middle (y = 20 + (440 - 20) / 2 = 230); sample x = 300.
  auto is = [&](int x, int y, const uint8_t rgb[3]) {
    return img->at(x, y, 0) == rgb[0] && img->at(x, y, 1) == rgb[1] && img->at(x, y, 2) == rgb[2];
  };
  EXPECT_TRUE(is(300, 20, c0));
  EXPECT_TRUE(is(300, 230, c1));
  EXPECT_FALSE(is(300, 330, c1));
  // The axes are black.
  const uint8_t black[3] = {0, 0, 0};
  EXPECT_TRUE(is(50, 300, black));
  EXPECT_TRUE(is(400, 440, black));
}

TEST(CmcPlot, ZoomedAxis) {
  CmcCurve c{"c", std::vector<double>(100, 0.95)};
  CmcPlotOptions o;
  o.y_min = 0.9;
  auto img = RenderCmcPlot({c}, o);
  ASSERT_TRUE(img.ok()) << img.status();
  uint8_t c0[3];
  CmcCurveColor(0, c0);
  // 0.95 is halfway up the 0.9..1 axis: y = 230 (see above).
  EXPECT_TRUE(img->at(300, 230, 0) == c0[0] && img->at(300, 230, 1) == c0[1] && img->at(300, 230, 2) == c0[2]);
  o.y_min = 1.0;
  EXPECT_FALSE(RenderCmcPlot({c}, o).ok());
}

TEST(CmcPlot, WritesAReadablePng) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/cmc.png";
  CmcCurve rising{"rising", {}};
  for (int r = 1; r <= 100; ++r) rising.rates.push_back(1.0 - std::exp(-r / 20.0));
  ASSERT_TRUE(WriteCmcPlot({rising}, path).ok());
  auto back = ReadPng(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->width, 640);
  EXPECT_EQ(back->height, 480);
  auto direct = RenderCmcPlot({rising});
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(back->pixels, direct->pixels);
}

TEST(CmcPlot, BadInput) {
  CmcCurve ok{"ok", {0.1, 0.2}};
  EXPECT_EQ(RenderCmcPlot({}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RenderCmcPlot({CmcCurve{"bad", {0.5, 1.5}}}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RenderCmcPlot({CmcCurve{"nan", {std::nan("")}}}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RenderCmcPlot({CmcCurve{"empty", {}}}).status().code(), absl::StatusCode::kInvalidArgument);
  CmcPlotOptions tiny;
  tiny.width = 50;
  EXPECT_EQ(RenderCmcPlot({ok}, tiny).status().code(), absl::StatusCode::kInvalidArgument);
  CmcPlotOptions one_rank;
  one_rank.max_rank = 1;
  EXPECT_EQ(RenderCmcPlot({ok}, one_rank).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(WriteCmcPlot({ok}, "/nonexistent-dir/x.png").ok());
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
