// The CUDA parity tests' one way to run a solver on a stream: y and the start
// x0 in the stream's memory (used in place on the CPU, uploaded for CUDA),
// the solution read back to the host with the residual history.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_SOLVERS_SOLVE_ON_STREAM_H_
#define TESSERA_KERNELS_RECONSTRUCTION_SOLVERS_SOLVE_ON_STREAM_H_

#include <gtest/gtest.h>

#include <vector>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "common/testing/device_array.h"
#include "kernels/reconstruction/solvers/solver_options.h"

namespace tessera {
namespace recon {
namespace solvers {
namespace testing {

struct Solution {
  std::vector<float> x;
  std::vector<double> residuals;
};

// solve(y, x) -> StatusOr<SolverReport>, on pointers in the stream's memory.
template <typename Solve>
Solution SolveOnStream(const Stream& stream, const std::vector<float>& y, const std::vector<float>& x0,
                       Solve solve) {
  Solution out;
  absl::StatusOr<SolverReport> report;
  if (stream.backend() == Backend::kCpu) {
    out.x = x0;
    report = solve(y.data(), out.x.data());
  } else {
    auto dy = ::tessera::testing::DeviceArray<float>::FromHost(y, stream);
    auto dx = ::tessera::testing::DeviceArray<float>::FromHost(x0, stream);
    report = solve(dy.data(), dx.data());
    out.x = dx.Download();
  }
  EXPECT_TRUE(report.ok()) << report.status();
  if (report.ok()) out.residuals = report->residual_norms;
  return out;
}

}  // namespace testing
}  // namespace solvers
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_SOLVERS_SOLVE_ON_STREAM_H_
