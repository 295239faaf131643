// FISTA-TV and ASD-POCS on a CUDA stream (DdProjector's CUDA kernels, the
// CUDA TV passes and vector ops) against the same solvers on the CPU, from
// one analytic fan-beam sinogram: after 10 FISTA-TV iterations (x >= 0) and
// 5 ASD-POCS iterations (4 subsets) the images agree to 2e-3 / 5e-3 relative
// L2 and the residual histories to 1e-3 / 5e-3 (the CPU projector
// accumulates in double, the CUDA one in float; ASD-POCS's step rule
// compares norms, so a tie could flip a branch: its tolerance is wider). In
// deterministic mode two GPU runs are bit-identical. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/device.h"
#include "common/testing/device_array.h"
#include "common/testing/gpu_test.h"
#include "kernels/reconstruction/ct/dd_projector.h"
#include "kernels/reconstruction/fbp/analytic_phantom.h"
#include "kernels/reconstruction/solvers/solve_on_stream.h"
#include "kernels/reconstruction/solvers/asd_pocs.h"
#include "kernels/reconstruction/solvers/fista_tv.h"

namespace tessera {
namespace recon {
namespace solvers {
namespace {

using ::tessera::testing::RelL2;

constexpr double kPi = 3.14159265358979323846;

using testing::Solution;

Solution Solve(const CtGeometry& g, const Stream& stream, bool asd, const std::vector<float>& y,
               ExecutionMode mode = ExecutionMode::kDefault) {
  ct::DdProjectorOptions po;
  po.num_subsets = asd ? 4 : 1;
  po.mode = mode;
  auto op = ct::DdProjector::Create(g, stream, po);
  EXPECT_TRUE(op.ok()) << op.status();
  Solution out;
  if (!op.ok()) return out;
  const regularizers::TvShape shape{g.volume.nx, g.volume.ny, 1, 1};
  auto solve = [&](const float* dy, float* dx) -> absl::StatusOr<SolverReport> {
    if (asd) {
      AsdPocsOptions o;
      o.iterations = 5;
      o.subsets = 4;
      o.epsilon = 0;
      o.mode = mode;
      return AsdPocs(**op, shape, dy, dx, o);
    }
    FistaTvOptions o;
    o.iterations = 10;
    o.tv_weight = 0.002;
    o.non_negative = true;
    return FistaTv(**op, shape, dy, dx, o);
  };
  const std::vector<float> x0(g.volume.size(), 0.0f);
  return testing::SolveOnStream(stream, y, x0, solve);
}

TEST(TvSolversCudaTest, MatchCpuThroughDdProjector) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok());
  const CtGeometry g{CenteredVolume(48, 40), FanBeam2D(EvenAngles(64, 2 * kPi), 1.5, 72, 150, 100)};
  const std::vector<float> y = recon::testing::AnalyticSinogram(
      g.projection, {{{2, -3, 0}, {16, 12, 1}, 0.3, 1.0}, {{-4, 2, 0}, {5, 5, 1}, 0, 0.7}});
  const Stream cpu = Stream::Cpu();
  for (bool asd : {false, true}) {
    const Solution ref = Solve(g, cpu, asd, y), gpu = Solve(g, *stream, asd, y);
    const double tolerance = asd ? 5e-3 : 2e-3;
    EXPECT_LT(RelL2(gpu.x, ref.x), tolerance) << (asd ? "asd-pocs" : "fista-tv");
    ASSERT_EQ(gpu.residuals.size(), ref.residuals.size());
    for (size_t i = 0; i < ref.residuals.size(); ++i) {
      EXPECT_NEAR(gpu.residuals[i], ref.residuals[i], (asd ? 5e-3 : 1e-3) * ref.residuals[i]) << asd << " " << i;
    }
  }
}

TEST(TvSolversCudaTest, DeterministicRerunsAreBitIdentical) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok());
  const CtGeometry g{CenteredVolume(48, 40), FanBeam2D(EvenAngles(64, 2 * kPi), 1.5, 72, 150, 100)};
  const std::vector<float> y =
      recon::testing::AnalyticSinogram(g.projection, {{{2, -3, 0}, {16, 12, 1}, 0.3, 1.0}});
  for (bool asd : {false, true}) {
    const Solution a = Solve(g, *stream, asd, y, ExecutionMode::kDeterministic);
    const Solution b = Solve(g, *stream, asd, y, ExecutionMode::kDeterministic);
    EXPECT_EQ(a.x, b.x) << (asd ? "asd-pocs" : "fista-tv");
    EXPECT_EQ(a.residuals, b.residuals);
  }
}

}  // namespace
}  // namespace solvers
}  // namespace recon
}  // namespace tessera
