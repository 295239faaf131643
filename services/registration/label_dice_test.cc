#include "services/registration/label_dice.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tessera::registration {
namespace {

// 20x20x10 maps: label 1 fills z < 5 (2000 voxels), label 2 fills z >= 5
// (2000 voxels) except a 2x2x2 cube of label 3 (8 voxels, "tiny").
NDArray FixedLabels() {
  NDArray a = *NDArray::Allocate({20, 20, 10}, DType::kInt32);
  int32_t* p = a.data<int32_t>();
  for (int k = 0; k < 10; ++k) {
    for (int j = 0; j < 20; ++j) {
      for (int i = 0; i < 20; ++i) {
        const bool tiny = i >= 8 && i < 10 && j >= 8 && j < 10 && k >= 6 && k < 8;
        p[i + 20 * (j + 20 * k)] = tiny ? 3 : (k < 5 ? 1 : 2);
      }
    }
  }
  return a;
}

TEST(LabelDiceTest, TinyLabelSeparatesTheTwoMeans) {
  const NDArray fixed = FixedLabels();
  NDArray moving = *fixed.Clone();
  int32_t* m = moving.data<int32_t>();
  // Shift label 1/2's border by one slice: 400 voxels of label 2 become label 1.
  for (int j = 0; j < 20; ++j) {
    for (int i = 0; i < 20; ++i) m[i + 20 * (j + 20 * 5)] = 1;
  }
  // Move the tiny cube by one voxel in x: it overlaps itself by half.
  for (int k = 6; k < 8; ++k) {
    for (int j = 8; j < 10; ++j) {
      m[8 + 20 * (j + 20 * k)] = 2;
      m[10 + 20 * (j + 20 * k)] = 3;
    }
  }
  Geometry g;
  absl::StatusOr<DiceMeans> d = ComputeDiceMeans(fixed, moving, g);
  ASSERT_TRUE(d.ok()) << d.status();
  // Label 1: |A| 2000, |B| 2400, A n B 2000 -> 4000/4400.
  // Label 2: |A| 1992, |B| 1592 (lost 400 + 4, gained 4 from label 3), A n B 1588 -> 3176/3584.
  // Label 3: |A| 8, |B| 8, A n B 4 -> 0.5.
  const double d1 = 4000.0 / 4400, d2 = 3176.0 / 3584, d3 = 0.5;
  EXPECT_EQ(d->labels, 3);
  EXPECT_EQ(d->large_labels, 2);
  EXPECT_NEAR(d->mean_all, (d1 + d2 + d3) / 3, 1e-12);
  EXPECT_NEAR(d->mean_large, (d1 + d2) / 2, 1e-12);
  EXPECT_GT(d->mean_large - d->mean_all, 0.1);

  // The size is the fixed map's: a threshold of 9 voxels still drops label 3.
  absl::StatusOr<DiceMeans> nine = ComputeDiceMeans(fixed, moving, g, 9);
  ASSERT_TRUE(nine.ok());
  EXPECT_EQ(nine->large_labels, 2);
  absl::StatusOr<DiceMeans> eight = ComputeDiceMeans(fixed, moving, g, 8);
  ASSERT_TRUE(eight.ok());
  EXPECT_EQ(eight->large_labels, 3);
  EXPECT_NEAR(eight->mean_large, eight->mean_all, 1e-12);
}

TEST(LabelDiceTest, NoLabelsGiveNaN) {
  NDArray zeros = *NDArray::Allocate({4, 4, 4}, DType::kInt32);
  std::fill(zeros.data<int32_t>(), zeros.data<int32_t>() + 64, 0);
  absl::StatusOr<DiceMeans> d = ComputeDiceMeans(zeros, zeros, Geometry());
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(std::isnan(d->mean_all));
  EXPECT_TRUE(std::isnan(d->mean_large));
  EXPECT_EQ(ComputeDiceMeans(zeros, *NDArray::Allocate({4, 4, 5}, DType::kInt32), Geometry()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::registration
