// Issue 13: a run bounded by the device budget (registrar.cc RegisterBounded:
// set-up, linear stages, out-of-core deformable stage and slab-by-slab
// output) equals the in-core run, on the CPU backend (host memory standing in
// for the device). Colin27 at 3 mm with a known synthetic warp; out of core
// forced on H shards against the in-core run sharded over the same H ranks
// (the same algorithm, rank-order reductions):
//   warped image (the original intensities, slab by slab with the window
//   sampler)           max |diff| <= 1e-6 (measured: 0, bit for bit)
//   displacement (mm)  max |diff| <= 1e-5 (measured: 0)
//   Jacobian summary   voxels and folds equal, min/max det within 1e-5
//   initial/final loss relative 1e-5 (sharded sums: the order of float sums)
// and, against the default unsharded mixed-precision run, Dice within 0.005.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kernels/registration/label_metrics.h"
#include "services/registration/colin_problem.h"
#include "services/registration/registrar.h"

namespace tessera::registration {
namespace {

double MaxAbsDiff(const NDArray& a, const NDArray& b) {
  EXPECT_EQ(a.num_elements(), b.num_elements());
  if (a.num_elements() != b.num_elements()) return INFINITY;
  double worst = 0;
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    worst = std::max(worst, std::abs(double(a.data<float>()[i]) - b.data<float>()[i]));
  }
  return worst;
}

double Dice(const ColinProblem& p, const RegistrationResult& r) {
  auto warped = WarpLabels(*p.pair.moving_labels, p.fixed, r, "cpu");
  EXPECT_TRUE(warped.ok()) << warped.status();
  if (!warped.ok()) return 0;
  LabelMetricsOptions lm;
  lm.hausdorff = false;
  return ComputeLabelMetrics(p.fixed_labels.data, *warped, lm).value().mean_dice;
}

bool LogHas(const RegistrationResult& r, const std::string& text) {
  return std::any_of(r.log.begin(), r.log.end(), [&](const std::string& l) { return l.find(text) != std::string::npos; });
}

void ExpectBoundedEqualsInCore(const std::string& metric, int shards, uint64_t seed) {
  const ColinProblem p = MakeColinProblem(IntensityChange::kGamma, seed, 3);
  RegistrationOptions o = QuickColinOptions(metric, {30, 15});
  o.precision = "full";
  o.shards = shards;
  auto in_core = Register(p.fixed, p.pair.moving, o);
  ASSERT_TRUE(in_core.ok()) << in_core.status();
  ASSERT_FALSE(LogHas(*in_core, "bounded run"));
  o.force_out_of_core = true;
  auto bounded = Register(p.fixed, p.pair.moving, o);
  ASSERT_TRUE(bounded.ok()) << bounded.status();
  ASSERT_TRUE(LogHas(*bounded, "bounded run")) << "the bounded path did not run";
  ASSERT_TRUE(LogHas(*bounded, "out of core: " + std::to_string(shards) + " shards in turn"));

  const double warped_diff = MaxAbsDiff(in_core->warped.data, bounded->warped.data);
  const double field_diff = MaxAbsDiff(in_core->displacement_ras, bounded->displacement_ras);
  std::printf("%s H=%d: warped max |diff| %.3g, displacement max |diff| %.3g mm, loss %.9g -> %.9g vs %.9g -> %.9g, "
              "folds %lld vs %lld, det [%.6f, %.6f] vs [%.6f, %.6f]\n",
              metric.c_str(), shards, warped_diff, field_diff, bounded->initial_loss, bounded->final_loss,
              in_core->initial_loss, in_core->final_loss, static_cast<long long>(bounded->jacobian.nonpositive),
              static_cast<long long>(in_core->jacobian.nonpositive), bounded->jacobian.min_det,
              bounded->jacobian.max_det, in_core->jacobian.min_det, in_core->jacobian.max_det);
  for (const std::string& line : bounded->log) std::printf("  %s\n", line.c_str());
  EXPECT_LE(warped_diff, 1e-6);
  EXPECT_LE(field_diff, 1e-5);
  EXPECT_EQ(bounded->warped.data.shape(), p.fixed.data.shape());
  EXPECT_EQ(bounded->jacobian.voxels, in_core->jacobian.voxels);
  EXPECT_EQ(bounded->jacobian.nonpositive, in_core->jacobian.nonpositive);
  EXPECT_NEAR(bounded->jacobian.min_det, in_core->jacobian.min_det, 1e-5);
  EXPECT_NEAR(bounded->jacobian.max_det, in_core->jacobian.max_det, 1e-5);
  EXPECT_NEAR(bounded->initial_loss, in_core->initial_loss, 1e-5 * std::abs(in_core->initial_loss));
  EXPECT_NEAR(bounded->final_loss, in_core->final_loss, 1e-5 * std::abs(in_core->final_loss));
  for (int i = 0; i < 16; ++i) EXPECT_EQ(bounded->affine_ras[i], in_core->affine_ras[i]);
  EXPECT_LT(bounded->final_loss, bounded->initial_loss);  // a registration happened

  // Against the default run (unsharded, mixed precision): the same answer.
  RegistrationOptions d = QuickColinOptions(metric, {30, 15});
  auto standard = Register(p.fixed, p.pair.moving, d);
  ASSERT_TRUE(standard.ok()) << standard.status();
  const double dice_bounded = Dice(p, *bounded), dice_standard = Dice(p, *standard);
  std::printf("  Dice bounded %.4f, default in-core %.4f\n", dice_bounded, dice_standard);
  EXPECT_NEAR(dice_bounded, dice_standard, 0.005);
  EXPECT_GT(dice_bounded, 0.7);
}

TEST(BoundedRun, LnccEqualsInCore) { ExpectBoundedEqualsInCore("lncc", 2, 7); }
TEST(BoundedRun, MutualInformationEqualsInCore) { ExpectBoundedEqualsInCore("mi", 3, 11); }

// No deformable stage: the bounded run's warp and losses at a zero field.
TEST(BoundedRun, AffineOnlyEqualsInCore) {
  const ColinProblem p = MakeColinProblem(IntensityChange::kGamma, 5, 3);
  RegistrationOptions o = QuickColinOptions("mse");
  o.stages = {"rigid", "affine"};
  auto in_core = Register(p.fixed, p.pair.moving, o);
  ASSERT_TRUE(in_core.ok()) << in_core.status();
  o.force_out_of_core = true;
  auto bounded = Register(p.fixed, p.pair.moving, o);
  ASSERT_TRUE(bounded.ok()) << bounded.status();
  ASSERT_TRUE(LogHas(*bounded, "bounded run"));
  EXPECT_TRUE(bounded->displacement_ras.empty());
  EXPECT_EQ(bounded->jacobian.voxels, 0);
  EXPECT_LE(MaxAbsDiff(in_core->warped.data, bounded->warped.data), 1e-6);
  EXPECT_NEAR(bounded->final_loss, in_core->final_loss, 1e-5 * std::abs(in_core->final_loss));
}

}  // namespace
}  // namespace tessera::registration
