// The synthetic problem's acquisition effects keep the anatomy where it was
// in world space: reoriented and cropped grids hold, at each voxel's world
// position, the value the original grid holds there.
#include "kernels/registration/pipeline/synthetic.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tessera::registration {
namespace {

// A small volume with distinct values and a non-trivial header.
Volume Numbered(int64_t nx, int64_t ny, int64_t nz) {
  Volume v;
  v.data = NDArray::Allocate({nx, ny, nz}, DType::kInt32).value();
  for (int64_t i = 0; i < nx * ny * nz; ++i) v.data.data<int32_t>()[i] = static_cast<int32_t>(7 * i + 3);
  v.geometry.spacing = {1.5, 2.0, 2.5};
  v.geometry.origin = {-10, 4, 7};
  const double c = std::cos(0.3), s = std::sin(0.3);
  v.geometry.direction = {c, -s, 0, s, c, 0, 0, 0, 1};
  return v;
}

// World position of voxel (i, j, k).
std::array<double, 3> World(const Geometry& g, int64_t i, int64_t j, int64_t k) {
  const Mat4 m = g.IndexToWorld();
  std::array<double, 3> w{};
  for (int r = 0; r < 3; ++r) w[r] = m[r * 4] * i + m[r * 4 + 1] * j + m[r * 4 + 2] * k + m[r * 4 + 3];
  return w;
}

// Checks that every voxel of `out` holds the value of the voxel of `in` at
// the same world position.
void ExpectSameAnatomy(const Volume& in, const Volume& out) {
  const Mat4 to_index = InvertAffine(in.geometry.IndexToWorld()).value();
  for (int64_t k = 0; k < out.data.dim(2); ++k) {
    for (int64_t j = 0; j < out.data.dim(1); ++j) {
      for (int64_t i = 0; i < out.data.dim(0); ++i) {
        const auto w = World(out.geometry, i, j, k);
        int64_t idx[3];
        for (int r = 0; r < 3; ++r) {
          const double x = to_index[r * 4] * w[0] + to_index[r * 4 + 1] * w[1] + to_index[r * 4 + 2] * w[2] +
                           to_index[r * 4 + 3];
          idx[r] = std::llround(x);
          ASSERT_NEAR(x, static_cast<double>(idx[r]), 1e-6) << "not on the input grid";
        }
        const int32_t expected = in.data.data<int32_t>()[idx[0] + in.data.dim(0) * (idx[1] + in.data.dim(1) * idx[2])];
        ASSERT_EQ(out.data.data<int32_t>()[i + out.data.dim(0) * (j + out.data.dim(1) * k)], expected)
            << "voxel " << i << "," << j << "," << k;
      }
    }
  }
}

TEST(Synthetic, ReorientKeepsEveryVoxelInPlace) {
  const Volume v = Numbered(5, 4, 3);
  for (const auto& [order, flip] : {std::pair<std::array<int, 3>, std::array<bool, 3>>{{2, 0, 1}, {true, false, true}},
                                    {{1, 0, 2}, {false, true, false}},
                                    {{0, 1, 2}, {true, true, true}}}) {
    auto out = Reorient(v, order, flip);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->data.dim(0), v.data.dim(order[0]));
    ExpectSameAnatomy(v, *out);
  }
  EXPECT_EQ(Reorient(v, {0, 0, 1}, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Synthetic, CropKeepsEveryVoxelInPlace) {
  const Volume v = Numbered(6, 5, 4);
  auto out = Crop(v, {1, 0, 2}, {5, 3, 4});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->data.shape(), (Shape{4, 3, 2}));
  ExpectSameAnatomy(v, *out);
  EXPECT_EQ(Crop(v, {0, 0, 3}, {6, 5, 4}).status().code(), absl::StatusCode::kInvalidArgument);  // one slice left
}

TEST(Synthetic, PairWithEffectsIsDeterministicAndValidated) {
  auto phantom = MakePhantom(24);
  ASSERT_TRUE(phantom.ok());
  SyntheticOptions o;
  o.intensity = IntensityChange::kT2Like;
  o.noise_fraction = 0.05;
  o.bias_fraction = 0.2;
  o.crop_low = {0.1, 0, 0};
  o.axis_order = {1, 2, 0};
  o.flip = {false, true, false};
  auto a = MakeSyntheticPair(phantom->image, &phantom->labels, o), b = MakeSyntheticPair(phantom->image, &phantom->labels, o);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status();
  ASSERT_EQ(a->moving.data.shape(), (Shape{24, 24, 22}));  // x cropped by 2, then stored as (y, z, x)
  ASSERT_EQ(a->moving_labels->data.shape(), a->moving.data.shape());
  int differ = 0;
  for (int64_t i = 0; i < a->moving.data.num_elements(); ++i) {
    ASSERT_EQ(a->moving.data.data<float>()[i], b->moving.data.data<float>()[i]);
    differ += a->moving.data.data<float>()[i] != 0.f;
  }
  EXPECT_GT(differ, a->moving.data.num_elements() / 2) << "noise reaches the background too";

  o.crop_low = {0.6, 0, 0};
  o.crop_high = {0.5, 0, 0};
  EXPECT_EQ(MakeSyntheticPair(phantom->image, nullptr, o).status().code(), absl::StatusCode::kInvalidArgument);
  o.crop_low = o.crop_high = {0, 0, 0};
  o.noise_fraction = -1;
  EXPECT_EQ(MakeSyntheticPair(phantom->image, nullptr, o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Synthetic, ParsesIntensityChanges) {
  EXPECT_EQ(ParseIntensityChange("t2like").value(), IntensityChange::kT2Like);
  EXPECT_EQ(ParseIntensityChange("inverted").value(), IntensityChange::kInverted);
  auto bad = ParseIntensityChange("t1");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("nonmonotonic"), std::string::npos);
}

}  // namespace
}  // namespace tessera::registration
