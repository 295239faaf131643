#include "kernels/registration/pipeline/label_dice.h"

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

// Counts accumulated over uneven z-slabs give ComputeDiceMeans of the whole
// maps bit for bit (random labels 0..40 with a biased copy: partial overlaps).
TEST(LabelDiceTest, SlabCountsEqualWholeVolumeDice) {
  const int64_t nx = 23, ny = 19, nz = 17, n = nx * ny * nz;
  NDArray fixed = *NDArray::Allocate({nx, ny, nz}, DType::kUInt8);
  NDArray moving = *NDArray::Allocate({nx, ny, nz}, DType::kInt32);
  uint32_t state = 12345;
  auto next = [&] { return state = state * 1664525u + 1013904223u, state >> 8; };
  for (int64_t v = 0; v < n; ++v) {
    fixed.data<uint8_t>()[v] = static_cast<uint8_t>(next() % 41);
    moving.data<int32_t>()[v] = next() % 3 == 0 ? static_cast<int32_t>(next() % 41) : fixed.data<uint8_t>()[v];
  }
  LabelOverlapCounts total;
  for (int64_t z0 : {0, 5, 6, 13}) {
    const int64_t z1 = z0 == 13 ? nz : z0 == 0 ? 5 : z0 == 5 ? 6 : 13;
    LabelOverlapCounts slab;
    for (int64_t v = z0 * nx * ny; v < z1 * nx * ny; ++v) slab.Add(fixed.data<uint8_t>()[v], moving.data<int32_t>()[v]);
    total.Merge(slab);
  }
  for (int64_t min_voxels : {int64_t{0}, int64_t{120}, kLargeLabelMinVoxels}) {
    absl::StatusOr<DiceMeans> whole = ComputeDiceMeans(fixed, moving, Geometry(), min_voxels);
    ASSERT_TRUE(whole.ok());
    const DiceMeans slabbed = SummarizeDice(total, min_voxels);
    EXPECT_EQ(slabbed.labels, whole->labels);
    EXPECT_EQ(slabbed.large_labels, whole->large_labels);
    EXPECT_EQ(slabbed.mean_all, whole->mean_all);  // exactly, not within a tolerance
    if (whole->large_labels > 0) EXPECT_EQ(slabbed.mean_large, whole->mean_large);
  }
  EXPECT_EQ(SummarizeDice(total).labels, 40);
  EXPECT_LT(SummarizeDice(total).mean_all, 0.9);  // the copy really differs
}

}  // namespace
}  // namespace tessera::registration
