// SART and OS-SART (seed section 2.1): for each subset s in turn,
//   x += lambda * A_s^T((y_s - A_s x) / R_s) / C_s,   R_s = A_s 1,  C_s = A_s^T 1,
// optionally followed by x = max(x, 0). With one subset (all views per
// update) this is SIRT-like SART; with S interleaved subsets (the operator's
// num_subsets(), views s, s + S, ...) it is OS-SART, ~S times faster per pass
// early on. Rays with R = 0 and voxels with C = 0 (nothing sees them) are
// left out of the update.
//
// Memory beyond x and y (stream backend memory): the row sums (one full
// range), each subset's column sums (S x domain floats) and the compact
// copies of y, all computed once per call, plus one range and one domain of
// work space.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_SOLVERS_SART_H_
#define TESSERA_KERNELS_RECONSTRUCTION_SOLVERS_SART_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/reconstruction/linear_operator.h"
#include "kernels/reconstruction/solvers/solver_options.h"
#include "kernels/reconstruction/solvers/solver_util.h"

namespace tessera {
namespace recon {
namespace solvers {

// `y`: the full range (all views); `x`: the initial guess, updated in place
// (both in the operator's stream memory). Residual norms: with one subset
// ||y - A x|| is exact at no extra cost (the next update reuses it); with
// more, see SolverOptions::exact_residual.
absl::StatusOr<SolverReport> Sart(LinearOperator& op, const float* y, float* x, const SolverOptions& options);

// Sart's set-up (row and column sums, compact copies of y, work space) kept
// for passes one at a time, for methods that alternate a SART pass with
// something else (ASD-POCS: SART, then TV steepest descent). `op` and `y`
// must outlive the plan. options.iterations and options.progress are not
// used; the rest as for Sart.
class SartPlan {
 public:
  static absl::StatusOr<std::unique_ptr<SartPlan>> Create(LinearOperator& op, const float* y,
                                                           const SolverOptions& options);
  // One pass over every subset, x updated in place; returns the residual
  // norm Sart reports for an iteration. `x_unchanged`: x is exactly what the
  // previous Pass left (one subset then reuses that pass's residual, saving a
  // forward projection); pass false after changing x in between.
  absl::StatusOr<double> Pass(float* x, bool x_unchanged = false);
  // The relaxation of the next passes (ASD-POCS lowers it as it goes), in (0, 2).
  absl::Status SetRelaxation(float lambda);

 private:
  SartPlan(LinearOperator& op, const float* y, const SolverOptions& options) : op_(op), y_(y), options_(options) {}
  absl::StatusOr<double> Residual(int s, const float* ys, const float* x, float* r);
  LinearOperator& op_;
  const float* y_;
  SolverOptions options_;
  std::vector<int> ids_;
  std::vector<int64_t> offset_, size_;
  FloatArray row_sums_, col_sums_, work_, back_, y_compact_, full_;
  bool have_residual_ = false;  // work_ holds y - A x of the last pass (one subset)
};

}  // namespace solvers
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_SOLVERS_SART_H_
