// The out-of-core deformable stage (issue 13, out_of_core_stage.h) on the CPU
// backend, host buffers standing in for device memory: Register with the
// stage forced out of core on H shards against the in-core sharded stage on
// H ranks (sharded_deformable_stage.h), Colin27 at 3 mm against a known
// synthetic warp. Both run the same phases with the same halos and the same
// rank-order reductions, so the displacements agree to 1e-5 mm (measured:
// identical) and the Dice within 0.005 (the budget). Plus the choice
// of in/out of core from a budget, and the staged communicator's reductions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/parallel/staged_communicator.h"
#include "kernels/registration/lean_compose.h"
#include "kernels/registration/lncc.h"
#include "kernels/registration/storage16.h"
#include "kernels/registration/workspace.h"
#include "kernels/registration/label_metrics.h"
#include "kernels/registration/pipeline/testing/colin_problem.h"
#include "kernels/registration/pipeline/out_of_core_stage.h"
#include "kernels/registration/pipeline/registrar.h"

namespace tessera::registration {
namespace {

struct Outcome {
  double dice = 0;
  NDArray displacement;
  std::vector<std::string> log;
};

Outcome Run(const ColinProblem& p, const RegistrationOptions& o) {
  auto result = Register(p.fixed, p.pair.moving, o);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return {};
  auto warped = WarpLabels(*p.pair.moving_labels, p.fixed, *result, "cpu");
  EXPECT_TRUE(warped.ok()) << warped.status();
  LabelMetricsOptions lm;
  lm.hausdorff = false;
  return {ComputeLabelMetrics(p.fixed_labels.data, *warped, lm).value().mean_dice, result->displacement_ras,
          result->log};
}

using ::tessera::registration::LogHas;  // colin_problem.h; the overload below adds this test's type
bool LogHas(const Outcome& o, const std::string& text) { return LogHas(o.log, text); }

void ExpectOutOfCoreMatchesInCore(const ColinProblem& p, RegistrationOptions o, int shards) {
  o.shards = shards;
  const Outcome in_core = Run(p, o);
  ASSERT_TRUE(LogHas(in_core, absl::StrCat("sharded over ", shards, " cpu ranks")));
  o.force_out_of_core = true;
  const Outcome out = Run(p, o);
  ASSERT_TRUE(LogHas(out, absl::StrCat("out of core: ", shards, " shards in turn"))) << "the out-of-core stage did not run";
  ASSERT_EQ(in_core.displacement.num_elements(), out.displacement.num_elements());
  double max_diff = 0;
  const float* a = in_core.displacement.data<float>();
  const float* b = out.displacement.data<float>();
  for (int64_t i = 0; i < in_core.displacement.num_elements(); ++i) {
    max_diff = std::max(max_diff, std::abs(double(a[i]) - b[i]));
  }
  std::printf("%s/%s H=%d: Dice out of core %.4f, in core %.4f; displacement max |diff| %.3g mm\n", OptionName(o.metric),
              OptionName(o.deformable_step), shards, out.dice, in_core.dice, max_diff);
  for (const std::string& line : out.log) {
    if (line.rfind("deformable", 0) == 0) std::printf("  %s\n", line.c_str());
  }
  EXPECT_NEAR(out.dice, in_core.dice, 0.005);
  EXPECT_LE(max_diff, 1e-5) << "the out-of-core stage left the in-core sharded algorithm";
  EXPECT_GT(out.dice, 0.7);  // a registration happened at all
}

TEST(OutOfCoreStage, LnccMatchesInCoreShards) {
  ExpectOutOfCoreMatchesInCore(MakeColinProblem(IntensityChange::kGamma, 7, 3), QuickColinOptions(Metric::kLncc, {40, 20}), 2);
}

TEST(OutOfCoreStage, MseMatchesInCoreShards) {
  ExpectOutOfCoreMatchesInCore(MakeColinProblem(IntensityChange::kGamma, 3, 3), QuickColinOptions(Metric::kMse, {40, 20}), 3);
}

TEST(OutOfCoreStage, MutualInformationMatchesInCoreShards) {
  ExpectOutOfCoreMatchesInCore(MakeColinProblem(IntensityChange::kNonMonotonic, 11, 3), QuickColinOptions(Metric::kMi, {40, 20}), 4);
}

TEST(OutOfCoreStage, AdamMatchesInCoreShards) {
  RegistrationOptions o = QuickColinOptions(Metric::kLncc, {40, 20});
  o.deformable_step = DeformableStep::kAdam;
  ExpectOutOfCoreMatchesInCore(MakeColinProblem(IntensityChange::kGamma, 7, 3), o, 3);
}

TEST(OutOfCoreStage, BudgetChoosesOutOfCore) {
  RegistrationOptions o;
  o.precision = Precision::kFull;  // the need counted below: 36 B per voxel and the composition's slabs
  const Dims3 d{512, 512, 512};
  const Stream cpu = Stream::Cpu();
  // Two slabs of 32 slices, 3 floats a voxel: 201 MB.
  const int64_t slabs = int64_t{2} * 3 * 32 * 512 * 512 * 4;
  EXPECT_EQ(LeanStageDeviceBytes(o, d, Backend::kCuda), 36 * d.size() + slabs);
  // The CPU's LNCC keeps five float volumes (issue 38).
  const int64_t need = 56 * d.size() + slabs;
  EXPECT_EQ(LeanStageDeviceBytes(o, d, Backend::kCpu), need);
  // No budget: in core (the CPU has no free-memory query).
  EXPECT_EQ(ChooseOutOfCore(o, cpu, d, d).value().shards, 0);
  // A budget of the need: in core.
  o.device_memory_budget_bytes = need;
  EXPECT_EQ(ChooseOutOfCore(o, cpu, d, d).value().shards, 0);
  // 57 B per voxel covers the per-voxel model but not the slabs: out of core.
  o.device_memory_budget_bytes = 57 * d.size();
  EXPECT_GE(ChooseOutOfCore(o, cpu, d, d).value().shards, 2);
  // 2 GB for a 4.8 GB need: the fewest shards whose working set fits, logged.
  o.device_memory_budget_bytes = int64_t{2} << 30;
  const OutOfCoreChoice c = ChooseOutOfCore(o, cpu, d, d).value();
  EXPECT_GE(c.shards, 2);
  EXPECT_LE(OutOfCoreWorkingSetBytes(o, d, d, c.shards), o.device_memory_budget_bytes);
  EXPECT_GT(OutOfCoreWorkingSetBytes(o, d, d, c.shards - 1), o.device_memory_budget_bytes);
  EXPECT_NE(c.reason.find("out of core on"), std::string::npos) << c.reason;
  std::printf("512^3, 2 GiB budget: %s\n", c.reason.c_str());
  // Too small for any slab: RESOURCE_EXHAUSTED naming the budget.
  o.device_memory_budget_bytes = 1 << 20;
  const auto tiny = ChooseOutOfCore(o, cpu, d, d);
  EXPECT_EQ(tiny.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(std::string(tiny.status().message()).find("device_memory_budget_bytes"), std::string::npos);
  o.device_memory_budget_bytes = -1;
  EXPECT_EQ(ChooseOutOfCore(o, cpu, d, d).status().code(), absl::StatusCode::kInvalidArgument);
  // The B-spline model stays in core.
  o.device_memory_budget_bytes = 1 << 20;
  o.deformable_model = DeformableModel::kBspline;
  EXPECT_EQ(ChooseOutOfCore(o, cpu, d, d).value().shards, 0);
}

// The in-core need counts the composition's slab buffers exactly as the
// composition reserves them: a CPU composition of the stage's largest step
// (LeanStageStepBoundVoxels) leaves its workspace at LeanStageDeviceBytes
// less the per-voxel model (rounded up to the Workspace's 256 bytes). Grids
// where the depth is the 2^21-voxel minimum, the halo (a long step) and the
// whole grid (BudgetChoosesOutOfCore: the u / 8 cap at 512^3).
TEST(OutOfCoreStage, LeanStageDeviceBytesCountsCompositionSlabs) {
  const Stream cpu = Stream::Cpu();
  struct Case {
    Dims3 dims;
    double lr;
    int64_t depth;  // slices per slab the composition takes
  };
  for (const Case& c : {Case{{256, 256, 48}, 0.5, 32}, Case{{128, 64, 400}, 300.0, 301}, Case{{64, 32, 48}, 0.5, 48}}) {
    for (const bool adam : {false, true}) {
      const Dims3 d = c.dims;
      SCOPED_TRACE(DimsToString(d) + (adam ? " adam" : " scaled") + " lr " + std::to_string(c.lr));
      RegistrationOptions o;
      o.precision = Precision::kFull;
      o.deformable_lr_voxels = c.lr;
      o.deformable_step = adam ? DeformableStep::kAdam : DeformableStep::kNormalized;
      const int64_t per_voxel = adam ? 60 : 36;
      const int64_t slabs = LeanStageDeviceBytes(o, d, Backend::kCuda) - per_voxel * d.size();
      if (!adam) EXPECT_EQ(slabs, 2 * 3 * c.depth * d.nx * d.ny * 4);
      // The composition of the stage's largest step, as deformable_stage.cc sets it up.
      std::vector<float> u(3 * d.size(), 0.f), g(3 * d.size(), 0.25f);
      std::vector<float> m(adam ? 3 * d.size() : 0, 0.f), v(adam ? 3 * d.size() : 0, 0.f);
      GreedyStep step;
      if (adam) {
        step.rule = GreedyStep::Rule::kAdam;
        step.adam.lr = o.deformable_lr_voxels;
        step.t = int64_t{1} << 30;
        step.m = m.data();
        step.v = v.data();
      } else {
        step.max_abs_grad = 0.25f;
        step.scale = static_cast<float>(-o.deformable_lr_voxels / 0.25);
      }
      EXPECT_LE(GreedyStepBoundVoxels(step), LeanStageStepBoundVoxels(o));
      Workspace ws;
      ASSERT_TRUE(ComposeGreedyStepInPlace(cpu, u.data(), g.data(), d, step, &ws).ok());
      EXPECT_EQ(static_cast<int64_t>(ws.capacity()), static_cast<int64_t>(ScratchCarver::Align(slabs)));
    }
  }
  // Adam's bound grows with t, so a late step bounds every step of a run.
  RegistrationOptions o;
  o.deformable_step = DeformableStep::kAdam;
  GreedyStep step;
  step.rule = GreedyStep::Rule::kAdam;
  step.adam.lr = o.deformable_lr_voxels;
  double last = 0;
  for (step.t = 1; step.t <= 100000; ++step.t) {
    const double bound = GreedyStepBoundVoxels(step);
    ASSERT_GE(bound, last) << "t " << step.t;
    last = bound;
  }
  EXPECT_LE(last, LeanStageStepBoundVoxels(o));
}

// On the CPU the count holds the LNCC's kept volumes exactly as the stage's
// metric reserves them (its LnccWorkspace after a dispatcher call on a CPU
// stream), float and mixed precision; nothing for MI or on CUDA.
TEST(OutOfCoreStage, LeanStageDeviceBytesCountsCpuLnccScratch) {
  for (const Dims3 d : {Dims3{37, 29, 23}, Dims3{64, 48, 40}}) {
    SCOPED_TRACE(DimsToString(d));
    RegistrationOptions o;  // lncc, mixed precision
    const int64_t kept = LeanStageDeviceBytes(o, d, Backend::kCpu) - LeanStageDeviceBytes(o, d, Backend::kCuda);
    EXPECT_EQ(kept, LeanMetricCpuScratchBytes(o, Backend::kCpu, d));
    EXPECT_GE(kept, 20 * d.size());
    std::vector<float> f(d.size()), w(d.size());
    std::vector<Half> f16(d.size());
    for (int64_t i = 0; i < d.size(); ++i) {
      f[i] = static_cast<float>((i * 37) % 101) / 101.f;
      w[i] = static_cast<float>((i * 53) % 97) / 97.f;
      f16[i] = FromFloat<Half>(f[i]);
    }
    LnccOptions lncc;
    lncc.window = o.metric_options.lncc_window;
    LnccWorkspace mixed, full;
    float loss = 0;
    std::vector<float> coefficients(3 * d.size());
    ASSERT_TRUE(LnccHalfFixed(Stream::Cpu(), f16.data(), w.data(), d, lncc, &loss, w.data(), nullptr, &mixed).ok());
    EXPECT_EQ(static_cast<int64_t>(mixed.host.capacity()), kept);
    EXPECT_EQ(mixed.device.capacity(), 0u);
    ASSERT_TRUE(LnccWithCoefficients(Stream::Cpu(), f.data(), w.data(), d, lncc, &loss, w.data(), coefficients.data(),
                                     &full)
                    .ok());
    EXPECT_EQ(full.device.capacity(), 0u);
    o.precision = Precision::kFull;
    EXPECT_EQ(static_cast<int64_t>(full.host.capacity()),
              LeanStageDeviceBytes(o, d, Backend::kCpu) - LeanStageDeviceBytes(o, d, Backend::kCuda));
    o.metric = Metric::kMi;
    EXPECT_EQ(LeanStageDeviceBytes(o, d, Backend::kCpu), LeanStageDeviceBytes(o, d, Backend::kCuda));
  }
}

TEST(StagedCommunicator, ReducesInRankOrderAndHandsOutPublishedValues) {
  const Stream cpu = Stream::Cpu();
  parallel::StagedGroup group(3);
  const double values[3] = {0.1, 0.2, 0.3};
  for (int r = 0; r < 3; ++r) {
    parallel::StagedCommunicator comm(&group, r);
    double v = values[r];
    ASSERT_TRUE(comm.AllReduce(&v, 1, parallel::ReduceOp::kSum, cpu).ok());
    EXPECT_EQ(v, values[r]);  // contributing leaves the data as is
    double m[2] = {values[r], -values[r]};
    ASSERT_TRUE(comm.AllReduce(m, 2, parallel::ReduceOp::kMax, cpu).ok());
  }
  EXPECT_EQ(group.reduced(0).at(0), (0.1 + 0.2) + 0.3);  // rank order, as the in-process communicator
  EXPECT_EQ(group.reduced(1).at(0), 0.3);
  EXPECT_EQ(group.reduced(1).at(1), -0.1);
  // Out of order: an error, not a silently different sum.
  parallel::StagedCommunicator late(&group, 1);
  double v = 1;
  EXPECT_FALSE(late.AllReduce(&v, 1, parallel::ReduceOp::kSum, cpu).ok());
  // Published: every shard receives the values.
  parallel::StagedGroup next(2);
  next.Publish(0, {4.0, 5.0});
  parallel::StagedCommunicator c(&next, 1);
  float f[2] = {0, 0};
  ASSERT_TRUE(c.AllReduce(f, 2, parallel::ReduceOp::kSum, cpu).ok());
  EXPECT_EQ(f[0], 4.f);
  EXPECT_EQ(f[1], 5.f);
}

}  // namespace
}  // namespace tessera::registration
