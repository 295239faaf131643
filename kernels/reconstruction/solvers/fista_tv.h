// FISTA-TV for tomography on any LinearOperator (Beck & Teboulle's MFISTA
// setting without the monotone step):
//
//   min_x 0.5 ||A x - y||^2 + lambda TV(x)   [x >= 0 with non_negative]
//
// through solvers/fista.h: gradient A^T (A x - y), step 1 / L with L the
// largest eigenvalue of A^T A (power iteration x 1.05, or given), prox the TV
// prox of regularizers/tv.h (FGP, tv_iterations per call, its scratch kept
// for the whole solve). lambda = tv_weight * ||A^T y||_inf, so one tv_weight
// suits any scaling of y (TIGRE's FISTA takes lambda absolute; the relative
// form is what BART's `pics -R T:...` users expect of a default).
//
// non_negative: the prox is the exact prox of lambda TV + the indicator of
// x >= 0 (Beck & Teboulle's constrained FGP), not a clamp after the TV prox.
//
// The reported residual of iteration k is ||A y_k - y|| at the extrapolated
// point y_k the gradient was taken at (it costs nothing; ||A x_k - y|| would
// take another forward projection per iteration).
#ifndef TESSERA_KERNELS_RECONSTRUCTION_SOLVERS_FISTA_TV_H_
#define TESSERA_KERNELS_RECONSTRUCTION_SOLVERS_FISTA_TV_H_

#include "absl/status/statusor.h"
#include "kernels/reconstruction/linear_operator.h"
#include "kernels/reconstruction/regularizers/tv.h"
#include "kernels/reconstruction/solvers/solver_options.h"

namespace tessera {
namespace recon {
namespace solvers {

struct FistaTvOptions {
  int iterations = 50;
  double tv_weight = 0.002;  // lambda / ||A^T y||_inf, >= 0 and finite
  int tv_iterations = 20;    // FGP iterations per prox, >= 1
  bool non_negative = false;
  // Each prox's FGP starts from the dual field the previous one ended with
  // (regularizers/tv.h warm_start), so the inner iterations accumulate.
  bool warm_start_tv = false;
  // FISTA's gradient restart (fista.h).
  bool adaptive_restart = false;
  // ||A^T A|| (> 0) when the caller knows it (a slice stack shares one
  // operator); 0: estimated here (EstimateNormLipschitz).
  double lipschitz = 0;
  SolverProgress progress;   // (iteration, total, ||A y_k - y||)
};

// `shape`: the volume as TV sees it (nx, ny, nz; channels 1), whose size
// must be op.domain_size(). `y`: the full range; `x`: the start, result out.
// Errors: INVALID_ARGUMENT naming the field; whatever the operator or
// progress returns.
absl::StatusOr<SolverReport> FistaTv(LinearOperator& op, const regularizers::TvShape& shape, const float* y, float* x,
                                     const FistaTvOptions& options);

// L = 1.05 x the power-iteration estimate of ||A^T A|| (20 steps).
absl::StatusOr<double> EstimateNormLipschitz(LinearOperator& op);

}  // namespace solvers
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_SOLVERS_FISTA_TV_H_
