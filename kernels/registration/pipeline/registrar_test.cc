// Registration of real brain data (Colin27 `ch2` with AAL labels, from
// Debian's mricron-data) against known synthetic deformations, on the CPU
// backend at 2 mm so the suite stays quick: the same code runs on the GPU.
#include "kernels/registration/pipeline/registrar.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/nifti_io.h"
#include "kernels/registration/label_metrics.h"
#include "kernels/registration/pipeline/testing/colin_problem.h"
#include "kernels/registration/pipeline/synthetic.h"

namespace tessera::registration {
namespace {


using Problem = ColinProblem;

Problem MakeProblem(IntensityChange intensity, uint64_t seed) { return MakeColinProblem(intensity, seed, 2); }

double MeanDice(const NDArray& a, const NDArray& b) {
  LabelMetricsOptions options;
  options.hausdorff = false;
  return ComputeLabelMetrics(a, b, options).value().mean_dice;
}

// min_dice: measured after issue 17 (normalized deformable step) minus a
// margin; the per-voxel Adam step before it reached 0.941 (lncc) and 0.780 (mi).
void ExpectRegistersBack(const Problem& p, const RegistrationOptions& options, double min_gain, double min_dice) {
  const double before = MeanDice(p.fixed_labels.data, p.pair.moving_labels->data);
  int reports = 0;
  auto result = Register(p.fixed, p.pair.moving, options, [&](const RegistrationProgress&) { ++reports; });
  ASSERT_TRUE(result.ok()) << result.status();
  for (const std::string& line : result->log) std::printf("  %s\n", line.c_str());
  auto warped_labels = WarpLabels(*p.pair.moving_labels, p.fixed, *result, "cpu");
  ASSERT_TRUE(warped_labels.ok()) << warped_labels.status();
  const double after = MeanDice(p.fixed_labels.data, *warped_labels);
  const double folded = static_cast<double>(result->jacobian.nonpositive) / std::max<int64_t>(1, result->jacobian.voxels);
  std::printf("%s: mean Dice %.3f -> %.3f, loss %.4f -> %.4f, folding %.4f%%, %.1f s\n", OptionName(options.metric),
              before, after, result->initial_loss, result->final_loss, 100 * folded, result->seconds);
  EXPECT_GT(after, before + min_gain);
  EXPECT_GE(after, min_dice);
  EXPECT_LT(result->final_loss, result->initial_loss);
  EXPECT_LT(folded, 0.01);
  EXPECT_GT(reports, 10);
  EXPECT_EQ(result->warped.data.shape(), p.fixed.data.shape());
}

TEST(Registrar, LnccRegistersADeformedBrainBack) {
  Problem p = MakeProblem(IntensityChange::kGamma, 7);
  ExpectRegistersBack(p, QuickColinOptions(Metric::kLncc), 0.15, 0.95);  // measured 0.966
}

TEST(Registrar, MutualInformationHandlesANonMonotonicModality) {
  Problem p = MakeProblem(IntensityChange::kNonMonotonic, 11);
  ExpectRegistersBack(p, QuickColinOptions(Metric::kMi), 0.10, 0.90);  // measured 0.936
}

TEST(Registrar, RejectsBadInputs) {
  Volume a, b;
  a.data = NDArray::Allocate({8, 8, 8}, DType::kFloat32).value();
  b.data = NDArray::Allocate({8, 8, 1}, DType::kFloat32).value();
  for (int64_t i = 0; i < 512; ++i) a.data.data<float>()[i] = static_cast<float>(i % 7);
  for (int64_t i = 0; i < 64; ++i) b.data.data<float>()[i] = static_cast<float>(i % 5);
  RegistrationOptions o = QuickColinOptions(Metric::kLncc);
  EXPECT_EQ(Register(a, b, o).status().code(), absl::StatusCode::kInvalidArgument);  // 3-D vs 2-D

  Volume nan = a;
  nan.data = a.data.Clone().value();
  nan.data.data<float>()[5] = NAN;
  auto r = Register(a, nan, o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(r.status().message()).find("NaN"), std::string::npos) << r.status();

  Volume constant = a;
  constant.data = a.data.Clone().value();
  for (int64_t i = 0; i < 512; ++i) constant.data.data<float>()[i] = 3.f;
  EXPECT_EQ(Register(a, constant, o).status().code(), absl::StatusCode::kInvalidArgument);

  Volume far = a;  // same image 10 m away: nothing overlaps
  far.geometry.origin = {10000, 0, 0};
  o.init = Init::kNone;
  EXPECT_EQ(Register(a, far, o).status().code(), absl::StatusCode::kFailedPrecondition);

  o.init = Init::kCentreOfMass;  // centre-of-mass alignment brings it back
  EXPECT_TRUE(Register(a, far, o).ok());
  EXPECT_EQ(ParseOption<Metric>("nope", "metric").status().code(), absl::StatusCode::kInvalidArgument);

  o = QuickColinOptions(Metric::kLncc);
  o.deformable_halve_after = -1;
  r = Register(a, a, o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(r.status().message()).find("deformable_halve_after"), std::string::npos) << r.status();
  o.deformable_halve_after = 3;
  o.deformable_min_step_fraction = 0;
  r = Register(a, a, o);
  EXPECT_NE(std::string(r.status().message()).find("deformable_min_step_fraction"), std::string::npos) << r.status();
}

TEST(Registrar, HonoursCancellation) {
  Problem p = MakeProblem(IntensityChange::kGamma, 3);
  std::atomic<bool> cancel{false};
  auto result = Register(p.fixed, p.pair.moving, QuickColinOptions(Metric::kMse),
                         [&](const RegistrationProgress& progress) {
                           if (progress.iteration >= 3) cancel = true;
                         },
                         &cancel);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace tessera::registration
