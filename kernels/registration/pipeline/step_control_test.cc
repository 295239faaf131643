#include "kernels/registration/pipeline/step_control.h"

#include "gtest/gtest.h"

namespace tessera::registration {
namespace {

TEST(StepControlTest, HalvesAfterARunWithoutANewBest) {
  StepControl control(/*lr=*/0.5, /*halve_after=*/2, /*min_fraction=*/0.25);
  EXPECT_DOUBLE_EQ(control.Update(-1.0), 0.5);
  EXPECT_DOUBLE_EQ(control.Update(-0.9), 0.5);  // one worse iteration: no change
  EXPECT_DOUBLE_EQ(control.Update(-1.1), 0.5);  // a new best resets the run
  EXPECT_DOUBLE_EQ(control.Update(-1.0), 0.5);
  EXPECT_DOUBLE_EQ(control.Update(-1.05), 0.25);  // two in a row without a new best
  EXPECT_DOUBLE_EQ(control.Update(-1.0), 0.25);
  EXPECT_DOUBLE_EQ(control.Update(-1.0), 0.125);  // the floor: 0.25 * 0.5
  EXPECT_DOUBLE_EQ(control.Update(-1.0), 0.125);
  EXPECT_DOUBLE_EQ(control.Update(-1.0), 0.125);  // never below it
  EXPECT_DOUBLE_EQ(control.lr(), 0.125);
}

TEST(StepControlTest, AlternatingLossShrinksTheStep) {
  // The overshoot pattern of a fixed normalized step: every other iteration worse.
  StepControl control(1.0, 3, 1.0 / 64);
  double lr = 1.0;
  for (int i = 0; i < 40; ++i) lr = control.Update(i % 2 == 0 ? -0.77 : -0.74);
  EXPECT_LT(lr, 1.0);
}

TEST(StepControlTest, ZeroHalveAfterKeepsAFixedStep) {
  StepControl control(0.5, 0, 0.125);
  for (int i = 0; i < 20; ++i) EXPECT_DOUBLE_EQ(control.Update(1.0 + i), 0.5);
}

}  // namespace
}  // namespace tessera::registration
