// The ground truth of bench/registration_cases: the generator's map, inverted,
// must bring the moving labels back (a wrong or zero map cannot), and
// CompareMaps must report a known offset exactly.
#include "bench/registration_cases_truth.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "gtest/gtest.h"
#include "kernels/registration/pipeline/label_dice.h"
#include "kernels/registration/pipeline/registrar.h"

namespace tessera::registration {
namespace {

constexpr Mat4 kIdentity{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};

double DiceThrough(const Volume& moving_labels, const Volume& fixed_labels, NDArray displacement) {
  for (int64_t i = 0; i < displacement.num_elements(); ++i) {
    float& v = displacement.data<float>()[i];
    if (!std::isfinite(v)) v = 1e4f;  // unknown: outside
  }
  RegistrationResult r;
  r.affine_ras = kIdentity;
  r.displacement_ras = std::move(displacement);
  auto warped = WarpLabels(moving_labels, fixed_labels, r, "cpu");
  EXPECT_TRUE(warped.ok()) << warped.status();
  auto fixed32 = fixed_labels.data.AsType(DType::kInt32);
  auto dice = ComputeDiceMeans(*fixed32, *warped, fixed_labels.geometry);
  EXPECT_TRUE(dice.ok()) << dice.status();
  return dice->mean_all;
}

TEST(RegistrationCasesTruth, TrueMapBringsTheLabelsBackAndScoresZeroError) {
  auto phantom = MakePhantom(40, 2.0);
  ASSERT_TRUE(phantom.ok()) << phantom.status();
  SyntheticOptions synth;
  synth.seed = 3;
  synth.intensity = IntensityChange::kNonMonotonic;  // the truth must not depend on it
  synth.flip = {true, false, false};                 // nor on the stored orientation
  auto pair = MakeSyntheticPair(phantom->image, &phantom->labels, synth);
  ASSERT_TRUE(pair.ok()) << pair.status();
  auto truth = TrueDisplacement(phantom->image, synth);
  ASSERT_TRUE(truth.ok()) << truth.status();

  const double dice_truth = DiceThrough(*pair->moving_labels, phantom->labels, *truth->AsType(DType::kFloat32));
  auto zero = NDArray::Allocate(truth->shape(), DType::kFloat32);
  std::fill(zero->data<float>(), zero->data<float>() + zero->num_elements(), 0.f);
  const double dice_zero = DiceThrough(*pair->moving_labels, phantom->labels, *zero->AsType(DType::kFloat32));
  std::printf("Dice through the true map %.4f, through no map %.4f\n", dice_truth, dice_zero);
  EXPECT_GT(dice_truth, 0.97);
  EXPECT_LT(dice_zero, dice_truth - 0.05);

  // The truth scored against itself, and against itself shifted by a known
  // offset: the mean error is that offset.
  auto self = CompareMaps(*truth, *truth, phantom->labels.data, 1000);
  ASSERT_TRUE(self.ok()) << self.status();
  EXPECT_GT(self->voxels, 1000);
  EXPECT_EQ(self->rms, 0.0);
  auto shifted = truth->AsType(DType::kFloat32);
  const int64_t n = shifted->num_elements() / 3;
  for (int64_t i = 0; i < n; ++i) shifted->data<float>()[n + i] += 0.75f;  // +A
  auto err = CompareMaps(*shifted, *truth, phantom->labels.data, 1000);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_NEAR(err->mean_ras[0], 0.0, 1e-6);
  EXPECT_NEAR(err->mean_ras[1], 0.75, 1e-6);
  EXPECT_NEAR(err->rms, 0.75, 1e-6);

  // MapDisplacement of an affine-only map: R(x) - x = A x - x.
  Mat4 shift = kIdentity;
  shift[3] = 1.5;
  auto map = MapDisplacement(phantom->image.geometry, shift, *zero);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_FLOAT_EQ(map->data<float>()[123], 1.5f);
  EXPECT_FLOAT_EQ(map->data<float>()[n + 123], 0.f);
}

TEST(RegistrationCasesTruth, CompareMapsNamesMismatchedShapes) {
  auto a = NDArray::Allocate({4, 4, 4, 3}, DType::kFloat32);
  auto b = NDArray::Allocate({4, 4, 5, 3}, DType::kFloat32);
  auto l = NDArray::Allocate({4, 4, 4}, DType::kInt32);
  auto err = CompareMaps(*a, *b, *l, 1000);
  EXPECT_FALSE(err.ok());
  EXPECT_NE(err.status().message().find("shapes differ"), std::string::npos);
}

}  // namespace
}  // namespace tessera::registration
