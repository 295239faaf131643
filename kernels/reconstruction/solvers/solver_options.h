// Options, progress callback and report shared by the iterative solvers
// (SART / OS-SART, CGLS) that run on a recon::LinearOperator.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_SOLVERS_SOLVER_OPTIONS_H_
#define TESSERA_KERNELS_RECONSTRUCTION_SOLVERS_SOLVER_OPTIONS_H_

#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "kernels/reconstruction/execution_mode.h"

namespace tessera {
namespace recon {
namespace solvers {

// Called after every iteration with the 1-based iteration number, the total
// asked for and the residual norm ||y - A x|| (see each solver for how it is
// measured). An error (e.g. CANCELLED) stops the solver after that
// iteration and is returned; x then holds that iteration's result.
using SolverProgress = std::function<absl::Status(int iteration, int total, double residual_norm)>;

struct SolverOptions {
  int iterations = 10;
  // Ordered subsets (OS-SART): 1 uses all views per update; otherwise it must
  // equal the operator's num_subsets(). CGLS takes 1 only.
  int subsets = 1;
  float lambda = 1.0f;        // SART relaxation, in (0, 2)
  bool non_negative = false;  // SART: clamp x at 0 after each update; CGLS: projected (cgls.h)
  // OS-SART (subsets > 1): true spends one extra forward projection per
  // iteration to report the exact ||y - A x||; false reports the residual
  // measured during the pass (each subset's residual before its update).
  bool exact_residual = true;
  // The mode the caller built the operator with (the solver's own
  // reductions, recon::Dot, are deterministic in both).
  ExecutionMode mode = ExecutionMode::kDefault;
  SolverProgress progress;
};

struct SolverReport {
  int iterations = 0;                   // iterations completed
  std::vector<double> residual_norms;   // one per completed iteration
};

}  // namespace solvers
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_SOLVERS_SOLVER_OPTIONS_H_
