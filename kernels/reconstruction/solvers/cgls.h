// CGLS: conjugate gradients on the normal equations A^T A x = A^T y, i.e.
// minimising ||A x - y||^2, without forming A^T A (Hestenes-Stiefel / Paige
// & Saunders' CGLS recurrences). One forward and one back projection per
// iteration; every inner product is recon::Dot (double, deterministic).
//
//   r = y - A x,  s = A^T r,  p = s,  gamma = |s|^2
//   repeat:  q = A p,  alpha = gamma / |q|^2,  x += alpha p,  r -= alpha q,
//            s = A^T r,  gamma' = |s|^2,  p = s + (gamma' / gamma) p
//
// The reported residual norm is |r| from the recurrence (equal to
// ||y - A x|| up to rounding). Stops early, with OK, when gamma or |q|^2
// reaches 0 (x is then a least-squares solution).
//
// non_negative (projected CGLS, min ||A x - y|| over x >= 0): the initial
// guess is clamped at 0; s is replaced by its free part (0 where x_i = 0
// and s_i < 0, i.e. where the bound stops the descent), so the direction
// keeps off the bound; after each step x is clamped at 0, and where that
// moved any voxel r is recomputed as y - A x (one more forward projection)
// and the direction restarted (p = s), because the clamp broke CG's
// recurrences. Voxels that leave the bound rejoin through s. The
// residual norms are then exact but need not decrease monotonically less
// than plain CGLS's; the result has no negative voxel.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_SOLVERS_CGLS_H_
#define TESSERA_KERNELS_RECONSTRUCTION_SOLVERS_CGLS_H_

#include "absl/status/statusor.h"
#include "kernels/reconstruction/linear_operator.h"
#include "kernels/reconstruction/solvers/solver_options.h"

namespace tessera {
namespace recon {
namespace solvers {

// `y`: the full range; `x`: the initial guess, updated in place. Options:
// iterations, progress, non_negative; subsets must be 1 (INVALID_ARGUMENT
// otherwise: CGLS uses all views).
absl::StatusOr<SolverReport> Cgls(LinearOperator& op, const float* y, float* x, const SolverOptions& options);

}  // namespace solvers
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_SOLVERS_CGLS_H_
