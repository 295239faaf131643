#include "bench/gigavoxel_label_scoring.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/registration/pipeline/registrar.h"

namespace tessera::registration {
namespace {

constexpr Mat4 kIdentity = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};

// A 1 mm label map of 3-voxel blocks with random labels 0..max_label (int32).
Volume BlockLabels(std::array<int64_t, 3> dims, int max_label, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> label(0, max_label);
  Volume v;
  v.data = *NDArray::Allocate({dims[0], dims[1], dims[2]}, DType::kInt32);
  std::vector<int> block((dims[0] / 3 + 1) * (dims[1] / 3 + 1) * (dims[2] / 3 + 1));
  for (int& b : block) b = label(rng);
  for (int64_t k = 0; k < dims[2]; ++k) {
    for (int64_t j = 0; j < dims[1]; ++j) {
      for (int64_t i = 0; i < dims[0]; ++i) {
        v.data.data<int32_t>()[i + dims[0] * (j + dims[1] * k)] =
            block[i / 3 + (dims[0] / 3 + 1) * (j / 3 + (dims[1] / 3 + 1) * (k / 3))];
      }
    }
  }
  v.geometry.origin = {-7.0, -8.5, -5.0};
  return v;
}

// A finer, slightly rotated grid over the same field of view, as the bench's cube.
Volume FineGrid() {
  Volume v;
  v.data = *NDArray::Allocate({26, 29, 21}, DType::kUInt8);
  v.geometry.spacing = {0.55, 0.6, 0.52};
  v.geometry.origin = {-6.8, -8.1, -5.3};
  const double c = std::cos(0.05), s = std::sin(0.05);
  v.geometry.direction = {c, -s, 0, s, c, 0, 0, 0, 1};
  return v;
}

TEST(GigavoxelLabelScoringTest, SlabbedScoresEqualTheWholeVolumePathExactly) {
  const Volume src_fixed = BlockLabels({15, 18, 12}, 40, 1), src_moving = BlockLabels({15, 18, 12}, 40, 2);
  const Volume grid = FineGrid();
  const GridSpace space = SpaceOf(grid);
  RegistrationResult identity, result;
  identity.affine_ras = kIdentity;
  result.affine_ras = {0.98, 0.05, -0.02, 0.7, -0.04, 1.03, 0.01, -0.4, 0.02, 0.0, 0.97, 0.3, 0, 0, 0, 1};
  result.displacement_ras = *NDArray::Allocate({26, 29, 21, 3}, DType::kFloat32);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> mm(-1.2f, 1.2f);
  for (int64_t e = 0; e < result.displacement_ras.num_elements(); ++e) result.displacement_ras.data<float>()[e] = mm(rng);

  // The old path: whole int32 maps from WarpLabels, the moving labels kept as uint8.
  auto fixed_labels = WarpLabels(src_fixed, grid, identity, "cpu");
  auto moving32 = WarpLabels(src_moving, grid, identity, "cpu");
  ASSERT_TRUE(fixed_labels.ok() && moving32.ok());
  Volume moving{*moving32->AsType(DType::kUInt8), grid.geometry, ""};
  auto resampled = ResampleLabelsUint8(src_moving, space);
  ASSERT_TRUE(resampled.ok()) << resampled.status();
  int64_t differ = 0, labelled = 0;
  for (int64_t v = 0; v < moving.data.num_elements(); ++v) {
    differ += resampled->data<uint8_t>()[v] != moving.data.data<uint8_t>()[v];
    labelled += moving.data.data<uint8_t>()[v] != 0;
  }
  EXPECT_EQ(differ, 0);
  EXPECT_GT(labelled, moving.data.num_elements() / 2);

  DiceMeans want[2];
  for (int r = 0; r < 2; ++r) {
    auto warped = WarpLabels(moving, grid, r == 0 ? identity : result, "cpu");
    ASSERT_TRUE(warped.ok());
    auto means = ComputeDiceMeans(*fixed_labels, *warped, grid.geometry);
    ASSERT_TRUE(means.ok());
    want[r] = *means;
  }
  auto got = ScoreLabelsBySlab(src_fixed, moving, space, result.affine_ras, &result.displacement_ras);
  ASSERT_TRUE(got.ok()) << got.status();
  for (auto [g, w] : {std::make_pair(got->before, want[0]), std::make_pair(got->after, want[1])}) {
    EXPECT_EQ(g.labels, w.labels);
    EXPECT_EQ(g.mean_all, w.mean_all);  // exactly: same voxels, same counts, same sums
    EXPECT_EQ(g.large_labels, w.large_labels);
  }
  EXPECT_GT(want[0].labels, 30);
  EXPECT_NE(want[0].mean_all, want[1].mean_all);  // the transform matters, so the check can fail
  EXPECT_LT(want[1].mean_all, 0.95);
}

TEST(GigavoxelLabelScoringTest, LabelsBeyondUint8AreRefusedByName) {
  Volume src = BlockLabels({6, 6, 6}, 3, 4);
  src.data.data<int32_t>()[5] = 300;
  const Volume grid = FineGrid();
  auto r = ResampleLabelsUint8(src, SpaceOf(grid));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("300"), std::string::npos) << r.status();
  NDArray bad_field = *NDArray::Allocate({3, 3, 3, 3}, DType::kFloat32);
  auto s = ScoreLabelsBySlab(BlockLabels({6, 6, 6}, 3, 5), Volume{*ResampleLabelsUint8(BlockLabels({6, 6, 6}, 3, 6), SpaceOf(grid)), grid.geometry, ""},
                             SpaceOf(grid), kIdentity, &bad_field);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::registration
