// ASD-POCS (Sidky & Pan, Phys. Med. Biol. 53, 2008), as TIGRE runs it
// (ASD_POCS, defaults alpha 0.002, ng 20, alpha_red 0.95, r_max 0.95,
// relaxation reduced by 0.99 per iteration): each outer iteration
//   1. one SART / OS-SART pass (SartPlan) with positivity: x >= 0 after
//      every subset update (the POCS part; always on);
//   2. dd = ||A x - y||, dp = ||x - x_before_SART||; on the first iteration
//      the TV step size is set to dtvg = alpha * dp;
//   3. ng steps of steepest descent on TV: x -= dtvg * g / ||g||, g the
//      gradient of the smoothed TV (regularizers/tv.h, epsilon tv_epsilon);
//   4. dg = ||x - x_after_SART||; if dg > r_max * dp and dd > epsilon the TV
//      step is reduced, dtvg *= alpha_red (the adaptive step that keeps TV
//      from undoing the data step); the relaxation beta *= beta_red;
//   5. stop after `iterations`, or when beta < 0.005, or when the TV and data
//      steps point against each other (cos < -0.99) with dd <= epsilon.
// epsilon is the data tolerance; TIGRE's default is 0.2 ||A FDK(y) - y||
// (the engine computes that from its FBP/FDK; callers here pass it).
//
// The reported residual of each iteration is dd (after the SART pass, before
// the TV steps, as TIGRE's stopping rule sees it).
#ifndef TESSERA_KERNELS_RECONSTRUCTION_SOLVERS_ASD_POCS_H_
#define TESSERA_KERNELS_RECONSTRUCTION_SOLVERS_ASD_POCS_H_

#include "absl/status/statusor.h"
#include "kernels/reconstruction/linear_operator.h"
#include "kernels/reconstruction/regularizers/tv.h"
#include "kernels/reconstruction/solvers/solver_options.h"

namespace tessera {
namespace recon {
namespace solvers {

struct AsdPocsOptions {
  int iterations = 20;      // at most; TIGRE's stopping rules may end earlier
  double alpha = 0.002;     // first TV step relative to the first SART step, > 0
  int tv_iterations = 20;   // ng, >= 1
  double alpha_red = 0.95;  // in (0, 1]
  double r_max = 0.95;      // > 0
  double relaxation = 1.0;  // SART's beta at the start, in (0, 2)
  double relaxation_red = 0.99;  // in (0, 1]
  double epsilon = 0;       // data tolerance ||A x - y||, >= 0
  double tv_epsilon = 1e-8; // TV smoothing (TIGRE: 1e-8 beside its square root), > 0
  int subsets = 1;          // 1: SART; the operator's num_subsets(): OS-SART (OS-ASD-POCS)
  ExecutionMode mode = ExecutionMode::kDefault;
  SolverProgress progress;  // (iteration, iterations, dd)
};

// `shape`: the volume as TV sees it (channels 1, size op.domain_size()).
// `y`: the full range; `x`: the start (clamped at 0 by the first pass),
// result out. Errors: INVALID_ARGUMENT naming the field; whatever the
// operator or progress returns.
absl::StatusOr<SolverReport> AsdPocs(LinearOperator& op, const regularizers::TvShape& shape, const float* y, float* x,
                                     const AsdPocsOptions& options);

}  // namespace solvers
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_SOLVERS_ASD_POCS_H_
