// The lean deformable stage (memory_mode "lean", deformable_stage.h) against
// the standard loop on the registrar tests' cases (Colin27 at 2 mm against
// known synthetic deformations, CPU backend): same Dice within 0.005, final
// losses within 1%, displacement fields within 2% RMS of each other (the
// algorithms are the same; only float summation orders differ). Plus the
// option's validation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "common/nifti_io.h"
#include "kernels/registration/label_metrics.h"
#include "kernels/registration/pipeline/registrar.h"
#include "kernels/registration/pipeline/testing/colin_problem.h"
#include "kernels/registration/pipeline/synthetic.h"

namespace tessera::registration {
namespace {


using Problem = ColinProblem;

Problem MakeProblem(IntensityChange intensity, uint64_t seed) { return MakeColinProblem(intensity, seed, 2); }

// The lean and standard loops compared at full precision (mixed precision,
// the default for lncc, has its own test: deformable_stage_mixed_test).
RegistrationOptions QuickOptions(const std::string& metric) {
  RegistrationOptions o = QuickColinOptions(ParseOption<Metric>(metric, "metric").value());
  o.precision = Precision::kFull;
  return o;
}

struct Outcome {
  double dice = 0;
  double final_loss = 0;
  NDArray displacement;
};

Outcome Run(const Problem& p, RegistrationOptions o, const std::string& mode) {
  o.memory_mode = ParseOption<MemoryMode>(mode, "memory_mode").value();
  auto result = Register(p.fixed, p.pair.moving, o);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return {};
  bool lean_line = false;
  for (const std::string& line : result->log) lean_line |= line.find("(lean") != std::string::npos;
  EXPECT_EQ(lean_line, mode == "lean") << "the " << mode << " loop did not run";
  auto warped = WarpLabels(*p.pair.moving_labels, p.fixed, *result, "cpu");
  EXPECT_TRUE(warped.ok()) << warped.status();
  LabelMetricsOptions lm;
  lm.hausdorff = false;
  Outcome out;
  out.dice = ComputeLabelMetrics(p.fixed_labels.data, *warped, lm).value().mean_dice;
  out.final_loss = result->final_loss;
  out.displacement = result->displacement_ras;
  return out;
}

void ExpectLeanEqualsStandard(const Problem& p, const RegistrationOptions& o) {
  const Outcome standard = Run(p, o, "standard");
  const Outcome lean = Run(p, o, "lean");
  ASSERT_EQ(standard.displacement.num_elements(), lean.displacement.num_elements());
  double diff2 = 0, norm2 = 0;
  const float* a = standard.displacement.data<float>();
  const float* b = lean.displacement.data<float>();
  for (int64_t i = 0; i < standard.displacement.num_elements(); ++i) {
    diff2 += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm2 += double(a[i]) * a[i];
  }
  const double rel_rms = std::sqrt(diff2 / std::max(norm2, 1e-30));
  std::printf("%s/%s: Dice standard %.4f lean %.4f, final loss %.6f vs %.6f, displacement rms difference %.2e of its rms\n",
              OptionName(o.metric), OptionName(o.deformable_step), standard.dice, lean.dice, standard.final_loss,
              lean.final_loss, rel_rms);
  EXPECT_NEAR(lean.dice, standard.dice, 0.005);
  EXPECT_NEAR(lean.final_loss, standard.final_loss, 0.01 * std::abs(standard.final_loss));
  EXPECT_LT(rel_rms, 0.02);
  EXPECT_GT(standard.dice, 0.75);  // a registration happened at all (from ~0.59; mse with a gamma change: 0.81)
}

TEST(LeanDeformable, LnccEqualsStandard) {
  ExpectLeanEqualsStandard(MakeProblem(IntensityChange::kGamma, 7), QuickOptions("lncc"));
}

TEST(LeanDeformable, MutualInformationEqualsStandard) {
  ExpectLeanEqualsStandard(MakeProblem(IntensityChange::kNonMonotonic, 11), QuickOptions("mi"));
}

TEST(LeanDeformable, MseEqualsStandard) {
  ExpectLeanEqualsStandard(MakeProblem(IntensityChange::kGamma, 3), QuickOptions("mse"));
}

// The grid jitter (MI's default; grid_jitter.h): both loops draw the same
// shifts and sample the shifted fixed image alike.
TEST(LeanDeformable, JitteredGridEqualsStandard) {
  RegistrationOptions o = QuickOptions("mi");
  o.metric_options.mi_grid_jitter = true;
  ExpectLeanEqualsStandard(MakeProblem(IntensityChange::kNonMonotonic, 11), o);
}

// Per-voxel jitter (MetricOptions::mi_voxel_jitter): both loops draw the same keys.
TEST(LeanDeformable, VoxelJitterEqualsStandard) {
  RegistrationOptions o = QuickOptions("mi");
  o.metric_options.mi_grid_jitter = true;
  o.metric_options.mi_voxel_jitter = true;
  ExpectLeanEqualsStandard(MakeProblem(IntensityChange::kNonMonotonic, 11), o);
}

TEST(LeanDeformable, StepHalvingEqualsStandard) {
  RegistrationOptions o = QuickOptions("mi");
  o.deformable_halve_after = 2;  // often enough that both loops halve several times
  ExpectLeanEqualsStandard(MakeProblem(IntensityChange::kNonMonotonic, 11), o);
}

TEST(LeanDeformable, AdamStepEqualsStandard) {
  RegistrationOptions o = QuickOptions("lncc");
  o.deformable_step = DeformableStep::kAdam;
  ExpectLeanEqualsStandard(MakeProblem(IntensityChange::kGamma, 7), o);
}

TEST(LeanDeformable, RejectsUnknownMemoryMode) {
  const absl::Status r = ParseOption<MemoryMode>("tiny", "memory_mode").status();
  EXPECT_EQ(r.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(r.message()).find("memory_mode"), std::string::npos) << r;
}

}  // namespace
}  // namespace tessera::registration
