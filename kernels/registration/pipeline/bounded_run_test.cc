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
// The bounded run reads the caller's volumes slab by slab (SlabImage): with
// uint16 inputs too the result equals the in-core run's bit for bit. And the
// stage's residency (which whole arrays stay in "device" memory) does not
// change its result: all resident vs none, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "kernels/registration/gaussian_smooth.h"
#include "kernels/registration/label_metrics.h"
#include "kernels/registration/pipeline/testing/colin_problem.h"
#include "kernels/registration/pipeline/host_setup.h"
#include "kernels/registration/pipeline/out_of_core_stage.h"
#include "kernels/registration/pipeline/registrar.h"

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

using ::tessera::registration::LogHas;  // colin_problem.h; the overload below adds this test's type
bool LogHas(const RegistrationResult& r, const std::string& text) { return LogHas(r.log, text); }

// The volume's intensities as uint16 (scaled to 0..60000, rounded): the
// registrar's input type for the largest pairs.
Volume AsUint16(const Volume& v) {
  Volume out = v;
  const NDArray f = v.data.AsType(DType::kFloat32).value();
  out.data = NDArray::Allocate(v.data.shape(), DType::kUInt16).value();
  float hi = 0;
  for (int64_t i = 0; i < f.num_elements(); ++i) hi = std::max(hi, f.data<float>()[i]);
  for (int64_t i = 0; i < f.num_elements(); ++i) {
    out.data.data<uint16_t>()[i] = static_cast<uint16_t>(std::lround(std::max(0.f, f.data<float>()[i]) / hi * 60000));
  }
  return out;
}

void ExpectBoundedEqualsInCore(const std::string& metric, int shards, uint64_t seed, bool uint16_inputs = false) {
  ColinProblem p = MakeColinProblem(IntensityChange::kGamma, seed, 3);
  if (uint16_inputs) {
    p.fixed = AsUint16(p.fixed);
    p.pair.moving = AsUint16(p.pair.moving);
  }
  RegistrationOptions o = QuickColinOptions(ParseOption<Metric>(metric, "metric").value(), {30, 15});
  o.precision = Precision::kFull;
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
  RegistrationOptions d = QuickColinOptions(ParseOption<Metric>(metric, "metric").value(), {30, 15});
  auto standard = Register(p.fixed, p.pair.moving, d);
  ASSERT_TRUE(standard.ok()) << standard.status();
  const double dice_bounded = Dice(p, *bounded), dice_standard = Dice(p, *standard);
  std::printf("  Dice bounded %.4f, default in-core %.4f\n", dice_bounded, dice_standard);
  EXPECT_NEAR(dice_bounded, dice_standard, 0.005);
  EXPECT_GT(dice_bounded, 0.7);
}

TEST(BoundedRun, LnccEqualsInCore) { ExpectBoundedEqualsInCore("lncc", 2, 7); }
TEST(BoundedRun, MutualInformationEqualsInCore) { ExpectBoundedEqualsInCore("mi", 3, 11); }
TEST(BoundedRun, Uint16InputsEqualInCore) { ExpectBoundedEqualsInCore("lncc", 3, 13, /*uint16_inputs=*/true); }

// The stage with every array resident (the limit allows all) against none
// resident (limit 0, the all-host stage): the same field bit for bit; the
// images read through normalising SlabImages of uint16 volumes.
TEST(BoundedRun, ResidencyDoesNotChangeTheStage) {
  ColinProblem p = MakeColinProblem(IntensityChange::kGamma, 17, 3);
  const Volume fixed = AsUint16(p.fixed), moving = AsUint16(p.pair.moving);
  RegistrationOptions o = QuickColinOptions(Metric::kLncc, {20, 10});
  o.precision = Precision::kFull;
  IntensityMap fm, mm;
  const NDArray fixed_norm = NormalizedIntensitiesParallel(fixed, "fixed", MemoryKind::kHost, &fm).value();
  const NDArray moving_norm = NormalizedIntensitiesParallel(moving, "moving", MemoryKind::kHost, &mm).value();
  // ConvertSlab reproduces the normalised image exactly.
  std::vector<float> converted(fixed_norm.num_elements());
  ASSERT_TRUE(ConvertSlab(SlabImage{fixed.data, fm.low, fm.scale, true}, 0, fixed_norm.num_elements(), converted.data()).ok());
  for (int64_t i = 0; i < fixed_norm.num_elements(); ++i) ASSERT_EQ(converted[i], fixed_norm.data<float>()[i]) << i;
  EXPECT_FALSE(ConvertSlab(SlabImage{fixed.data}, 1, fixed_norm.num_elements(), converted.data()).ok());

  OutOfCoreLevel coarse, full;
  const GridSpace fs = SpaceOf(fixed), ms = SpaceOf(moving);
  NDArray fc = NDArray::Allocate(DownsampledShape(fixed.data.shape(), 2), DType::kFloat32).value();
  NDArray mc = NDArray::Allocate(DownsampledShape(moving.data.shape(), 2), DType::kFloat32).value();
  ASSERT_TRUE(DownsampleVolume(fixed_norm, &fc, Stream::Cpu()).ok());
  ASSERT_TRUE(DownsampleVolume(moving_norm, &mc, Stream::Cpu()).ok());
  coarse = {2, DownsampledSpace(fs, fc.shape()), DownsampledSpace(ms, mc.shape()), SlabImage{fc}, SlabImage{mc}};
  full = {1, fs, ms, SlabImage{fixed.data, fm.low, fm.scale, true}, SlabImage{moving.data, mm.low, mm.scale, true}};
  const Mat4 t = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
  NDArray u[2];
  std::vector<std::string> logs[2];
  const int64_t limits[2] = {0, std::numeric_limits<int64_t>::max()};
  for (int i = 0; i < 2; ++i) {
    auto r = RunOutOfCoreDeformableStage(Stream::Cpu(), o, {}, t, {coarse, full}, 3, &logs[i], true, limits[i]);
    ASSERT_TRUE(r.ok()) << r.status();
    u[i] = *r;
    for (const std::string& line : logs[i]) std::printf("  %s\n", line.c_str());
  }
  EXPECT_TRUE(LogHas(logs[0], "resident none"));
  EXPECT_TRUE(LogHas(logs[1], "resident grad, u, warped"));
  EXPECT_EQ(MaxAbsDiff(u[0], u[1]), 0.0);
  double largest = 0;
  for (int64_t i = 0; i < u[1].num_elements(); ++i) largest = std::max(largest, std::abs(double(u[1].data<float>()[i])));
  EXPECT_GT(largest, 1e-3) << "the stage moved nothing";
}

// The residency choice: the largest arrays that fit beside the working set.
TEST(BoundedRun, ChooseResidencyKeepsTheLargestThatFit) {
  RegistrationOptions o;
  o.precision = Precision::kFull;
  const Dims3 d{200, 200, 200};
  const int64_t n = d.size(), ws = OutOfCoreWorkingSetBytes(o, d, d, 8);
  const OutOfCoreResidency none = ChooseResidency(o, d, d, 8, 0);
  EXPECT_FALSE(none.grad || none.u || none.warped);
  EXPECT_EQ(none.host_bytes, 28 * n);
  const OutOfCoreResidency grad_warped = ChooseResidency(o, d, d, 8, ws + 16 * n + 1);
  EXPECT_TRUE(grad_warped.grad && grad_warped.warped && !grad_warped.u) << grad_warped.ToString();
  EXPECT_EQ(grad_warped.device_bytes, 16 * n);
  const OutOfCoreResidency all = ChooseResidency(o, d, d, 8, ws + 28 * n + 12 * n / 8);
  EXPECT_TRUE(all.grad && all.u && all.warped) << all.ToString();
  EXPECT_EQ(all.host_bytes, 0);
}

// No deformable stage: the bounded run's warp and losses at a zero field.
TEST(BoundedRun, AffineOnlyEqualsInCore) {
  const ColinProblem p = MakeColinProblem(IntensityChange::kGamma, 5, 3);
  RegistrationOptions o = QuickColinOptions(Metric::kMse);
  o.stages = {Stage::kRigid, Stage::kAffine};
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
