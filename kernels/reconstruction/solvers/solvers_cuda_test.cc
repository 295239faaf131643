// The solvers on a CUDA stream (DdProjector's CUDA kernels, the CUDA vector
// ops) against the same solvers on the CPU, from one analytic fan-beam
// sinogram: SART, OS-SART (4 subsets), CGLS and projected (non-negative)
// CGLS after a few iterations agree
// to 2e-3 relative L2 (the CPU projector accumulates in double, the CUDA one
// in float), and the residual histories to 1e-3. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/device.h"
#include "common/testing/device_array.h"
#include "common/testing/gpu_test.h"
#include "kernels/reconstruction/ct/dd_projector.h"
#include "kernels/reconstruction/fbp/analytic_phantom.h"
#include "kernels/reconstruction/solvers/solve_on_stream.h"
#include "kernels/reconstruction/solvers/cgls.h"
#include "kernels/reconstruction/solvers/sart.h"

namespace tessera {
namespace recon {
namespace solvers {
namespace {

using ::tessera::testing::RelL2;

constexpr double kPi = 3.14159265358979323846;

enum class Method { kSart, kOsSart, kCgls, kCglsNonNegative };

using testing::Solution;

Solution Solve(const CtGeometry& g, const Stream& stream, Method method, const std::vector<float>& y) {
  ct::DdProjectorOptions po;
  po.num_subsets = method == Method::kOsSart ? 4 : 1;
  auto op = ct::DdProjector::Create(g, stream, po);
  EXPECT_TRUE(op.ok()) << op.status();
  Solution out;
  if (!op.ok()) return out;
  SolverOptions o;
  const bool cgls = method == Method::kCgls || method == Method::kCglsNonNegative;
  o.iterations = cgls ? 6 : 4;
  o.subsets = po.num_subsets;
  o.non_negative = method != Method::kCgls;
  auto solve = [&](const float* dy, float* dx) { return cgls ? Cgls(**op, dy, dx, o) : Sart(**op, dy, dx, o); };
  const std::vector<float> x0(g.volume.size(), 0.1f);
  return testing::SolveOnStream(stream, y, x0, solve);
}

TEST(SolversCudaTest, MatchCpuThroughDdProjector) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok());
  const CtGeometry g{CenteredVolume(48, 40), FanBeam2D(EvenAngles(64, 2 * kPi), 1.5, 72, 150, 100)};
  const std::vector<float> y =
      recon::testing::AnalyticSinogram(g.projection, {{{2, -3, 0}, {16, 12, 1}, 0.3, 1.0}, {{-4, 2, 0}, {5, 5, 1}, 0, 0.7}});
  const Stream cpu = Stream::Cpu();
  for (Method m : {Method::kSart, Method::kOsSart, Method::kCgls, Method::kCglsNonNegative}) {
    const Solution ref = Solve(g, cpu, m, y), gpu = Solve(g, *stream, m, y);
    EXPECT_LT(RelL2(gpu.x, ref.x), 2e-3) << static_cast<int>(m);
    ASSERT_EQ(gpu.residuals.size(), ref.residuals.size());
    for (size_t i = 0; i < ref.residuals.size(); ++i) {
      EXPECT_NEAR(gpu.residuals[i], ref.residuals[i], 1e-3 * ref.residuals[i]) << static_cast<int>(m) << " " << i;
    }
  }
}

}  // namespace
}  // namespace solvers
}  // namespace recon
}  // namespace tessera
