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

#include "absl/status/statusor.h"
#include "kernels/reconstruction/linear_operator.h"
#include "kernels/reconstruction/solvers/solver_options.h"

namespace tessera {
namespace recon {
namespace solvers {

// `y`: the full range (all views); `x`: the initial guess, updated in place
// (both in the operator's stream memory). Residual norms: with one subset
// ||y - A x|| is exact at no extra cost (the next update reuses it); with
// more, see SolverOptions::exact_residual.
absl::StatusOr<SolverReport> Sart(LinearOperator& op, const float* y, float* x, const SolverOptions& options);

}  // namespace solvers
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_SOLVERS_SART_H_
