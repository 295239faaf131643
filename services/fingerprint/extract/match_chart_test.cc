// The match chart: an RGB PNG of the expected size that the image decoder
// reads, pair lines that colour the gap between the prints, blank canvases
// sized to the minutiae, and INVALID_ARGUMENT for what it cannot draw.
#include "services/fingerprint/extract/match_chart.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "services/fingerprint/extract/synthetic_print.h"
#include "services/fingerprint/image/image_decode.h"

namespace tessera {
namespace fingerprint {
namespace {

Image8 GrayOf(const GrayImage& g) {
  Image8 out = Image8::Make(g.width, g.height, 1);
  out.pixels = g.pixels;
  return out;
}

// Two 300 x 300 prints with minutiae on a diagonal, paired one to one.
MatchChart Chart(int pairs) {
  MatchChart c;
  SyntheticPrintOptions o;
  o.width = o.height = 300;
  c.probe.image = GrayOf(SyntheticPrint(o));
  o.finger = 2;
  c.candidate.image = GrayOf(SyntheticPrint(o));
  c.probe.label = "probe a.tif";
  c.candidate.label = "candidate b.iso";
  for (int i = 0; i < 8; ++i) {
    c.probe.minutiae.push_back({40 + 25 * i, 50 + 20 * i, 0.3 * i, MinutiaType::kEnding, 0});
    c.candidate.minutiae.push_back({30 + 27 * i, 60 + 18 * i, 0.3 * i + 0.1, MinutiaType::kBifurcation, 0});
  }
  for (int i = 0; i < pairs; ++i) c.pairs.push_back({i, i});
  c.score = 0.4321f;
  c.aligned = pairs >= 2;
  c.rms_residual = 3.25;
  c.rotation = 0.1;
  return c;
}

TEST(MatchChartTest, PngDecodesWithTheExpectedSize) {
  for (int scale : {1, 2}) {
    absl::StatusOr<std::string> png = MatchChartPng(Chart(6), {scale});
    ASSERT_TRUE(png.ok()) << png.status();
    EXPECT_EQ(DetectImageFormat(*png), ImageFormat::kPng);
    EXPECT_EQ(static_cast<uint8_t>((*png)[25]), 2) << "PNG colour type 2: RGB";
    absl::StatusOr<GrayImage> decoded = DecodeGrayImage(*png);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    // margin 10 + 300 s + gap 30 + 300 s + margin 10; margin 10 + label
    // 7 t + 8 + 300 s + margin 10 + caption 3 x 7 t + 24 (text size t = 2).
    EXPECT_EQ(decoded->width, 50 + 600 * scale);
    EXPECT_EQ(decoded->height, 10 + 22 + 300 * scale + 10 + 66);
  }
}

TEST(MatchChartTest, PairLinesChangePixels) {
  absl::StatusOr<Image8> without = DrawMatchChart(Chart(0));
  absl::StatusOr<Image8> with = DrawMatchChart(Chart(6));
  ASSERT_TRUE(without.ok()) << without.status();
  ASSERT_TRUE(with.ok()) << with.status();
  ASSERT_EQ(without->width, with->width);
  ASSERT_EQ(without->height, with->height);
  // The gap between the prints (x 310-340) holds nothing but the lines.
  const int panels_top = 32, panels_bottom = 332;
  int gap_changed = 0, changed = 0;
  for (int y = panels_top; y < panels_bottom; ++y) {
    for (int x = 0; x < with->width; ++x) {
      bool differs = false;
      for (int ch = 0; ch < 3; ++ch) differs |= with->at(x, y, ch) != without->at(x, y, ch);
      changed += differs;
      if (x >= 312 && x < 338) {
        gap_changed += differs;
        if (!differs) EXPECT_EQ(without->at(x, y, 0), 245) << x << "," << y;  // the background
      }
    }
  }
  EXPECT_GE(gap_changed, 6 * 26);  // each of the 6 lines crosses the 26 columns
  EXPECT_GT(changed, 6 * 300);     // lines, rings and numbers
  // A pair's colour (not gray) in the gap.
  bool coloured = false;
  for (int y = panels_top; y < panels_bottom && !coloured; ++y) {
    coloured = with->at(325, y, 0) != with->at(325, y, 1) || with->at(325, y, 1) != with->at(325, y, 2);
  }
  EXPECT_TRUE(coloured);
}

TEST(MatchChartTest, BlankCanvasesReachPastTheMinutiae) {
  MatchChart c = Chart(3);
  c.probe.image = Image8();
  c.candidate.image = Image8();
  absl::StatusOr<Image8> img = DrawMatchChart(c);
  ASSERT_TRUE(img.ok()) << img.status();
  // Probe minutiae reach x 215, y 190 (blank 231 x 206); candidate x 219,
  // y 186 (235 x 202): panels 10 + 231 + 30 + 235 + 10 = 516 wide, but the
  // legend line (48 characters at size 2: 574 px + 2 margins) is wider.
  EXPECT_EQ(img->width, 594);
  EXPECT_EQ(img->height, 10 + 22 + 206 + 10 + 66);
  EXPECT_EQ(img->at(10 + 230, 32 + 205, 0), 228);  // the probe's blank canvas, last pixel
  EXPECT_EQ(img->at(10 + 231, 32 + 100, 0), 245);  // the background just right of it
}

TEST(MatchChartTest, WhatCannotBeDrawnIsInvalidArgument) {
  MatchChart c = Chart(2);
  EXPECT_EQ(DrawMatchChart(c, {0}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DrawMatchChart(c, {5}).status().code(), absl::StatusCode::kInvalidArgument);
  MatchChart bad_pair = c;
  bad_pair.pairs.push_back({0, 8});
  absl::StatusOr<Image8> r = DrawMatchChart(bad_pair);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("pair 3"), absl::string_view::npos) << r.status();
  MatchChart rgb = c;
  rgb.probe.image = Image8::Make(20, 20, 3);
  EXPECT_EQ(DrawMatchChart(rgb).status().code(), absl::StatusCode::kInvalidArgument);
  MatchChart short_buffer = c;
  short_buffer.candidate.image.pixels.resize(10);
  EXPECT_EQ(DrawMatchChart(short_buffer).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
