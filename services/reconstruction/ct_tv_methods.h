// The engine's side of the TV-regularised CT methods (issue 36): fista-tv
// and asd-pocs on the job's DdProjector, one slice (or one 3-D problem) at a
// time, with what they need beyond the solver: FISTA-TV's Lipschitz constant
// (estimated once per projector, shared by every slice) and ASD-POCS's data
// tolerance, TIGRE's default 0.2 ||A FBP(y) - y|| (FBP/FDK of the job's
// geometry, Ram-Lak; the plan and its scratch made once, used per slice); 0
// where FBP refuses the geometry (limited-angle scans).
#ifndef TESSERA_SERVICES_RECONSTRUCTION_CT_TV_METHODS_H_
#define TESSERA_SERVICES_RECONSTRUCTION_CT_TV_METHODS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/buffer.h"
#include "kernels/reconstruction/fbp/fbp.h"
#include "kernels/reconstruction/geometry.h"
#include "kernels/reconstruction/linear_operator.h"
#include "kernels/reconstruction/solvers/solver_options.h"
#include "services/reconstruction/reconstruction_request.h"

namespace tessera::reconstruction {

class CtTvSolver {
 public:
  // `method`: kFistaTv or kAsdPocs; `op` built with ct.subsets subsets for
  // asd-pocs (1 for fista-tv). `op` must outlive the solver.
  CtTvSolver(CtMethod method, const CtSpec& ct, const recon::CtGeometry& geometry, recon::LinearOperator& op,
             recon::ExecutionMode mode)
      : method_(method), ct_(ct), geometry_(geometry), op_(op), mode_(mode) {}

  // y (one slice's full range) -> x (starts as given), on op's stream.
  absl::StatusOr<recon::solvers::SolverReport> Solve(const float* y, float* x,
                                                     const recon::solvers::SolverProgress& progress);

 private:
  absl::StatusOr<double> FbpDataTolerance(const float* y);

  CtMethod method_;
  CtSpec ct_;
  recon::CtGeometry geometry_;
  recon::LinearOperator& op_;
  recon::ExecutionMode mode_;
  double lipschitz_ = 0;  // fista-tv, after the first slice
  // asd-pocs, after the first slice: FBP(y) and A FBP(y) - y.
  std::unique_ptr<recon::fbp::FbpPlan> fbp_;
  std::shared_ptr<Buffer> fbp_image_, fbp_residual_;
};

}  // namespace tessera::reconstruction

#endif  // TESSERA_SERVICES_RECONSTRUCTION_CT_TV_METHODS_H_
