// Sharded greedy iterations on H CPU ranks against the single-rank iteration
// of registrar.cc's standard loop (restated here with the same kernels on
// whole arrays; the sharded step composes in place by slabs, lean_compose.h):
// per-iteration losses and the final displacement, for each metric and rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "common/status.h"
#include "kernels/parallel/in_process_communicator.h"
#include "kernels/parallel/parallel_test_util.h"
#include "kernels/registration/sharded/ring_sampler.h"
#include "kernels/registration/sharded/sharded_greedy_step.h"
#include "kernels/parallel/slab.h"
#include "kernels/registration/adam.h"
#include "kernels/registration/field_ops.h"
#include "kernels/registration/gaussian_smooth.h"
#include "kernels/registration/grid_sampler.h"
#include "kernels/registration/lncc.h"
#include "kernels/registration/mse.h"
#include "kernels/registration/mutual_info.h"

namespace tessera {
namespace parallel {
namespace {

using namespace ::tessera::registration;  // NOLINT: the kernels of the single-rank loop
using testing::SmoothRandomVolume;

constexpr float kAffine[12] = {1.02f, 0.01f, 0.f, 0.01f, 0.f, 0.99f, 0.02f, -0.02f, 0.f, -0.01f, 1.01f, 0.03f};

// registrar.cc's deformable loop body on whole arrays (CPU); returns losses.
std::vector<double> SingleRankIterations(const NDArray& fixed, const NDArray& moving, const GreedyStepOptions& o,
                                         int iterations, NDArray* u_out) {
  const Stream cpu = Stream::Cpu();
  const Dims3 d = testing::DimsOf(fixed), md = testing::DimsOf(moving);
  const Shape fs = {d.nx, d.ny, d.nz, 3};
  NDArray u = NDArray::Allocate(fs, DType::kFloat32).value(), m = u.Clone().value(), v = u.Clone().value();
  NDArray grad_u = u.Clone().value(), step = u.Clone().value();
  for (NDArray* a : {&u, &m, &v}) EXPECT_TRUE(FillZero(*a, cpu).ok());
  NDArray warped = NDArray::Allocate({d.nx, d.ny, d.nz}, DType::kFloat32).value(), grad_w = warped.Clone().value();
  const int64_t voxels = d.size();
  AdamOptions adam;
  adam.lr = o.lr_voxels;
  std::vector<double> losses;
  for (int it = 1; it <= iterations; ++it) {
    GridSampleArgs args;
    args.image = moving.data<float>();
    args.image_dims = md;
    args.affine = kAffine;
    args.disp = u.data<float>();
    args.out_dims = d;
    args.padding = Padding::kZeros;
    EXPECT_TRUE(GridSample(cpu, args, warped.data<float>()).ok());
    float loss = 0;
    if (o.metric == GreedyMetric::kLncc) {
      loss = static_cast<float>(cpu::Lncc(fixed.data<float>(), warped.data<float>(), d, o.lncc, grad_w.data<float>()));
    } else if (o.metric == GreedyMetric::kMi) {
      loss = static_cast<float>(MattesMutualInformation(fixed, warped, nullptr, o.mi, &grad_w, cpu).value().loss);
    } else {
      loss = static_cast<float>(cpu::Mse(fixed.data<float>(), warped.data<float>(), d, grad_w.data<float>()));
    }
    losses.push_back(loss);
    GridSampleGrads grads;
    grads.grad_disp = grad_u.data<float>();
    EXPECT_TRUE(GridSampleBackward(cpu, args, grad_w.data<float>(), grads).ok());
    const double gs = o.smooth_grad_sigma, ws = o.smooth_warp_sigma;
    EXPECT_TRUE(GaussianSmooth(grad_u, &grad_u, {gs, gs, gs}, cpu).ok());
    EXPECT_TRUE(FillZero(step, cpu).ok());
    if (o.rule == GreedyRule::kAdam) {
      EXPECT_TRUE(AdamStep(step, grad_u, m, v, adam, it, cpu).ok());
    } else {  // the registrar's normalized step: the largest component moves lr
      const std::vector<float> g = testing::ToVector(grad_u);
      float largest = 0;
      for (float x : g) largest = std::max(largest, std::abs(x));
      if (largest > 0) EXPECT_TRUE(Axpy(static_cast<float>(-o.lr_voxels / largest), grad_u, step, cpu).ok());
    }
    EXPECT_TRUE(ScaleComponents(step, {2.f / (d.nx - 1), 2.f / (d.ny - 1), 2.f / (d.nz - 1)}, cpu).ok());
    NDArray& composed = grad_u;
    for (int c = 0; c < 3; ++c) {
      GridSampleArgs compose;
      compose.image = u.data<float>() + c * voxels;
      compose.image_dims = d;
      compose.disp = step.data<float>();
      compose.out_dims = d;
      compose.padding = Padding::kBorder;
      EXPECT_TRUE(GridSample(cpu, compose, composed.data<float>() + c * voxels).ok());
    }
    EXPECT_TRUE(Axpy(1.f, step, composed, cpu).ok());
    std::swap(u, composed);
    EXPECT_TRUE(GaussianSmooth(u, &u, {ws, ws, ws}, cpu).ok());
  }
  *u_out = u;
  return losses;
}

struct Case {
  int ranks;
  int64_t nz;
  GreedyMetric metric;
  GreedyRule rule = GreedyRule::kAdam;
  bool whole_moving = false;  // the GPU ranks' sampler (whole moving image per rank), here on CPU ranks
  int64_t compose_slab_voxels = 0;  // 1: composition slabs of the halo's depth (the out-of-core stage's kind)
};

class ShardedGreedyStepTest : public ::testing::TestWithParam<Case> {};

TEST_P(ShardedGreedyStepTest, IterationsEqualTheSingleRankOnes) {
  const Case c = GetParam();
  const Dims3 d{20, 18, c.nz}, md{22, 19, c.nz + 3};
  const NDArray fixed = SmoothRandomVolume(d, 71, 0.02);
  const NDArray moving = SmoothRandomVolume(md, 72, 0.02);
  GreedyStepOptions o;
  o.metric = c.metric;
  o.rule = c.rule;
  o.lncc.window = 5;
  o.compose_slab_voxels = c.compose_slab_voxels;
  const int iterations = 4;
  NDArray expect_u;
  const std::vector<double> expect = SingleRankIterations(fixed, moving, o, iterations, &expect_u);

  NDArray got_u = NDArray::Allocate(expect_u.shape(), DType::kFloat32).value();
  const SlabPartition p = SlabPartition::Make(d.nz, c.ranks).value();
  const absl::Status s = RunInProcessRanks(c.ranks, [&](Communicator& comm) -> absl::Status {
    const Stream cpu = Stream::Cpu();
    TESSERA_ASSIGN_OR_RETURN(SlabLayout l, p.Layout(d, comm.rank(), GreedyStepHalo(o)));
    TESSERA_ASSIGN_OR_RETURN(SlabLayout ml, RingMovingLayout(md, comm.rank(), c.ranks));
    TESSERA_ASSIGN_OR_RETURN(NDArray f, ExtractSlab(fixed, l, MemoryKind::kHost, cpu));
    TESSERA_ASSIGN_OR_RETURN(NDArray mv, ExtractSlab(moving, ml, MemoryKind::kHost, cpu));
    ShardedGreedyState state;
    if (c.whole_moving) {
      TESSERA_ASSIGN_OR_RETURN(state, MakeShardedGreedyStateWholeMoving(l, f, moving, kAffine, o, cpu));
    } else {
      TESSERA_ASSIGN_OR_RETURN(state, MakeShardedGreedyState(l, f, ml, mv, kAffine, o));
    }
    for (int it = 0; it < iterations; ++it) {
      TESSERA_ASSIGN_OR_RETURN(double loss, ShardedGreedyStep(comm, state, o, cpu));
      // Losses: float vs double box sums (LNCC), float rounding of u.
      EXPECT_NEAR(loss, expect[it], 2e-5 * std::abs(expect[it])) << "iteration " << it + 1;
    }
    return InsertOwnSlices(state.u, l, &got_u, cpu);
  });
  ASSERT_TRUE(s.ok()) << s;
  const std::vector<float> a = testing::ToVector(got_u), b = testing::ToVector(expect_u);
  double rms_diff = 0, rms = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    rms_diff += (a[i] - b[i]) * double(a[i] - b[i]);
    rms += double(b[i]) * b[i];
  }
  rms_diff = std::sqrt(rms_diff / a.size());
  rms = std::sqrt(rms / a.size());
  ASSERT_GT(rms, 1e-4);  // the field moved
  std::printf("H=%d nz=%lld: displacement rms %.3g, rms difference %.3g, max rel %.3g\n", c.ranks,
              static_cast<long long>(c.nz), rms, rms_diff, testing::MaxRelError(a, b));
  // The composition samples the slab in its own normalized coordinates and
  // LNCC's box sums are double here (float in the reference): the last bits
  // differ. Measured: rms difference <= 1.6e-6 of the rms, max 3.1e-5 of max |u|.
  // MI: the joint histogram is summed per rank then over ranks (another
  // order than one pass), and Adam divides tiny gradients by their own RMS,
  // which magnifies those last bits. Measured: rms difference 4e-5 (normalized)
  // and 1.1e-4 (Adam) of the rms, max rel 1.3e-3.
  const bool mi = c.metric == GreedyMetric::kMi;
  EXPECT_LE(rms_diff, (mi ? 5e-4 : 1e-5) * rms) << "rms " << rms;
  EXPECT_LE(testing::MaxRelError(a, b), mi ? 1e-2 : 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Cases, ShardedGreedyStepTest,
                         ::testing::Values(Case{1, 24, GreedyMetric::kLncc}, Case{2, 24, GreedyMetric::kLncc},
                                           Case{3, 24, GreedyMetric::kMse}, Case{4, 32, GreedyMetric::kLncc},
                                           Case{4, 37, GreedyMetric::kMse},
                                           Case{2, 24, GreedyMetric::kLncc, GreedyRule::kNormalized},
                                           Case{3, 25, GreedyMetric::kMse, GreedyRule::kNormalized},
                                           Case{4, 32, GreedyMetric::kMi, GreedyRule::kNormalized},
                                           Case{2, 24, GreedyMetric::kMi},
                                           Case{3, 25, GreedyMetric::kMse, GreedyRule::kNormalized, true},
                                           Case{4, 32, GreedyMetric::kLncc, GreedyRule::kAdam, true},
                                           Case{2, 24, GreedyMetric::kLncc, GreedyRule::kAdam, false, 1},
                                           Case{3, 25, GreedyMetric::kMse, GreedyRule::kNormalized, false, 1}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           const GreedyMetric m = info.param.metric;
                           return "H" + std::to_string(info.param.ranks) + "_nz" + std::to_string(info.param.nz) +
                                  (m == GreedyMetric::kLncc ? "_lncc" : m == GreedyMetric::kMse ? "_mse" : "_mi") +
                                  (info.param.rule == GreedyRule::kAdam ? "_adam" : "_normalized") +
                                  (info.param.whole_moving ? "_whole_moving" : "") +
                                  (info.param.compose_slab_voxels > 0 ? "_thin_compose" : "");
                         });

}  // namespace
}  // namespace parallel
}  // namespace tessera
