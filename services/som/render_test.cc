#include "services/som/render.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/png_io.h"

namespace tessera {
namespace som {
namespace {

using Rgb = std::array<uint8_t, 3>;

Rgb Pixel(const Image8& image, int x, int y) { return {image.at(x, y, 0), image.at(x, y, 1), image.at(x, y, 2)}; }

// A 3x2 map over `features` features with weights w[v * 6 + i].
Atlas MapOf(std::vector<float> weights, int features, Topology topology, std::vector<int32_t> bmu = {0}) {
  TrainResult result;
  result.model.grid = GridShape{3, 2, topology};
  result.model.features = features;
  result.model.weights_f32 = std::move(weights);
  std::vector<std::string> names;
  for (int v = 0; v < features; ++v) names.push_back(absl::StrCat("GO:000", v, " term ", v));
  auto atlas = MakeAtlas(result, bmu, names, {}, TrainOptions());
  EXPECT_TRUE(atlas.ok()) << atlas.status();
  return *std::move(atlas);
}

TEST(ViridisTest, EndsMiddleAndInterpolation) {
  EXPECT_EQ(Viridis(0), (Rgb{68, 1, 84}));
  EXPECT_EQ(Viridis(0.5), (Rgb{33, 144, 140}));
  EXPECT_EQ(Viridis(1), (Rgb{253, 231, 37}));
  EXPECT_EQ(Viridis(-3), Viridis(0));
  EXPECT_EQ(Viridis(7), Viridis(1));
  EXPECT_EQ(Viridis(NAN), Viridis(0));
  // Halfway between the first two anchors (#440154, #472d7b): 69.5, 23, 103.5.
  EXPECT_EQ(Viridis(1.0 / 16), (Rgb{70, 23, 104}));
}

TEST(UMatrixTest, PlanarByHand) {
  // One feature: row 0 = 0 1 3, row 1 = 0 1 5.
  const Atlas atlas = MapOf({0, 1, 3, 0, 1, 5}, 1, Topology::kPlanar);
  const std::vector<double> u = UMatrix(atlas.model);
  ASSERT_EQ(u.size(), 6u);
  EXPECT_DOUBLE_EQ(u[0], (1 + 0) / 2.0);      // right 1, down 0
  EXPECT_DOUBLE_EQ(u[1], (1 + 2 + 0) / 3.0);  // left, right, down
  EXPECT_DOUBLE_EQ(u[2], (2 + 2) / 2.0);      // left 2, down 2
  EXPECT_DOUBLE_EQ(u[3], (1 + 0) / 2.0);
  EXPECT_DOUBLE_EQ(u[4], (1 + 4 + 0) / 3.0);
  EXPECT_DOUBLE_EQ(u[5], (4 + 2) / 2.0);
}

TEST(UMatrixTest, ToroidalWrapsAndIsEuclidean) {
  // Two features: node 0 = (0, 0), node 1 = (3, 4) (distance 5), the rest 0.
  const Atlas atlas = MapOf({0, 3, 0, 0, 0, 0, /**/ 0, 4, 0, 0, 0, 0}, 2, Topology::kToroidal);
  const std::vector<double> u = UMatrix(atlas.model);
  // Node 1 (1,0): left 0 (5), right 2 (5), down 4 (5), up = down wraps to 4 (5).
  EXPECT_DOUBLE_EQ(u[1], 5.0);
  // Node 0 (0,0): right 1 (5), left wraps to 2 (0), down 3 (0), up 3 (0).
  EXPECT_DOUBLE_EQ(u[0], 5.0 / 4);
  // Node 5 (2,1): left 4, right wraps to 3, up 2, down 2: all equal, 0.
  EXPECT_DOUBLE_EQ(u[5], 0.0);
  // Planar: node 0 has right (5) and down (0) only.
  const Atlas planar = MapOf({0, 3, 0, 0, 0, 0, /**/ 0, 4, 0, 0, 0, 0}, 2, Topology::kPlanar);
  EXPECT_DOUBLE_EQ(UMatrix(planar.model)[0], 2.5);
}

TEST(RenderTest, UMatrixPixels) {
  const Atlas atlas = MapOf({0, 1, 3, 0, 1, 5}, 1, Topology::kPlanar);
  RenderOptions options;
  options.cell_pixels = 4;
  auto image = RenderUMatrix(atlas, options);
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->width, 12);
  EXPECT_EQ(image->height, 8);
  EXPECT_EQ(image->channels, 3);
  // u = 0.5 1 2 / 0.5 5/3 3: minimum 0.5 (purple), maximum 3 (yellow) at (2, 1).
  EXPECT_EQ(Pixel(*image, 0, 0), Viridis(0));
  EXPECT_EQ(Pixel(*image, 3, 7), Viridis(0));
  EXPECT_EQ(Pixel(*image, 8, 4), Viridis(1));
  EXPECT_EQ(Pixel(*image, 11, 7), Viridis(1));
  EXPECT_EQ(Pixel(*image, 4, 0), Viridis((1 - 0.5) / 2.5));
  EXPECT_EQ(Pixel(*image, 7, 3), Viridis(0.2));
  EXPECT_EQ(Pixel(*image, 8, 3), Viridis(0.6));  // (2 - 0.5) / 2.5
  // Through a PNG file and back.
  const std::string path = absl::StrCat(std::getenv("TEST_TMPDIR"), "/u.png");
  ASSERT_TRUE(WritePng(*image, path).ok());
  auto back = ReadPng(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->pixels, image->pixels);
}

TEST(RenderTest, HitMapIsLogScaled) {
  // Hits per node: 2 3 0 / 0 1 0.
  const Atlas atlas = MapOf(std::vector<float>(6, 0.5f), 1, Topology::kPlanar, {1, 0, 1, 4, 1, 0});
  RenderOptions options;
  options.cell_pixels = 1;
  auto image = RenderHitMap(atlas, options);
  ASSERT_TRUE(image.ok()) << image.status();
  ASSERT_EQ(image->width, 3);
  EXPECT_EQ(Pixel(*image, 1, 0), Viridis(1));                            // 3 hits: the maximum
  EXPECT_EQ(Pixel(*image, 2, 0), Viridis(0));                            // empty
  EXPECT_EQ(Pixel(*image, 1, 1), Viridis(0.5));                          // log 2 / log 4
  EXPECT_EQ(Pixel(*image, 0, 0), Viridis(std::log(3.0) / std::log(4.0)));  // 2 hits
}

TEST(RenderTest, ComponentPlaneAndColourBar) {
  // Feature 1 rises along x: 0 1 2 / 0 1 2; feature 0 constant.
  const Atlas atlas = MapOf({1, 1, 1, 1, 1, 1, /**/ 0, 1, 2, 0, 1, 2}, 2, Topology::kPlanar);
  RenderOptions options;
  options.cell_pixels = 2;
  options.colour_bar = true;
  auto image = RenderComponentPlane(atlas, 1, options);
  ASSERT_TRUE(image.ok()) << image.status();
  // map 6 px, gap 1 px (white), bar 4 px.
  ASSERT_EQ(image->width, 6 + 1 + 4);
  ASSERT_EQ(image->height, 4);
  EXPECT_EQ(Pixel(*image, 0, 3), Viridis(0));
  EXPECT_EQ(Pixel(*image, 2, 0), Viridis(0.5));
  EXPECT_EQ(Pixel(*image, 5, 1), Viridis(1));
  EXPECT_EQ(Pixel(*image, 6, 0), (Rgb{255, 255, 255}));
  EXPECT_EQ(Pixel(*image, 7, 0), Viridis(1));   // bar: high at the top
  EXPECT_EQ(Pixel(*image, 10, 3), Viridis(0));  // low at the bottom
  // A constant plane is drawn at the bottom of the scale.
  auto flat = RenderComponentPlane(atlas, 0, options);
  ASSERT_TRUE(flat.ok());
  EXPECT_EQ(Pixel(*flat, 5, 3), Viridis(0));
  EXPECT_EQ(RenderComponentPlane(atlas, 2, options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RenderTest, BadOptions) {
  const Atlas atlas = MapOf(std::vector<float>(6, 0.5f), 1, Topology::kPlanar);
  RenderOptions options;
  options.cell_pixels = 0;
  EXPECT_EQ(RenderUMatrix(atlas, options).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RenderNodeValues({1, 2}, atlas.model.grid, 0, RenderOptions()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(FindFeatureTest, NameFirstWordOrIndex) {
  const Atlas atlas = MapOf(std::vector<float>(12, 0.5f), 2, Topology::kPlanar);
  EXPECT_EQ(*FindFeature(atlas, "GO:0001 term 1"), 1);
  EXPECT_EQ(*FindFeature(atlas, "GO:0000"), 0);
  EXPECT_EQ(*FindFeature(atlas, "f1"), 1);
  EXPECT_EQ(*FindFeature(atlas, "0"), 0);
  EXPECT_EQ(FindFeature(atlas, "f2").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(FindFeature(atlas, "nucleus").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(FindFeature(atlas, "").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace som
}  // namespace tessera
