#include "kernels/reconstruction/solvers/cgls.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/reconstruction/solvers/solver_util.h"
#include "kernels/reconstruction/vector_ops.h"

namespace tessera {
namespace recon {
namespace solvers {

absl::StatusOr<SolverReport> Cgls(LinearOperator& op, const float* y, float* x, const SolverOptions& options) {
  TESSERA_RETURN_IF_ERROR(CheckCommon("cgls", op, y, x, options));
  if (options.subsets != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("cgls: subsets must be 1 (CGLS uses all views), got ", options.subsets));
  }
  const bool projected = options.non_negative;
  const Stream& stream = op.stream();
  const int64_t n = op.domain_size(), m = op.range_size(kAllSubsets);
  TESSERA_ASSIGN_OR_RETURN(FloatArray r, FloatArray::Allocate(stream, m));
  TESSERA_ASSIGN_OR_RETURN(FloatArray q, FloatArray::Allocate(stream, m));
  TESSERA_ASSIGN_OR_RETURN(FloatArray s, FloatArray::Allocate(stream, n));
  TESSERA_ASSIGN_OR_RETURN(FloatArray p, FloatArray::Allocate(stream, n));
  FloatArray before;  // projected: x before the clamp, to see whether it bound
  if (projected) {
    TESSERA_ASSIGN_OR_RETURN(before, FloatArray::Allocate(stream, n));
    TESSERA_RETURN_IF_ERROR(ClampMin(stream, 0.0f, x, n));
  }

  TESSERA_RETURN_IF_ERROR(op.Forward(x, q.data()));
  TESSERA_RETURN_IF_ERROR(Subtract(stream, y, q.data(), r.data(), m));
  TESSERA_RETURN_IF_ERROR(op.Back(r.data(), s.data()));
  if (projected) TESSERA_RETURN_IF_ERROR(ZeroWhereBound(stream, 0.0f, x, s.data(), n));
  TESSERA_RETURN_IF_ERROR(CopyFloats(stream, s.data(), p.data(), n));
  TESSERA_ASSIGN_OR_RETURN(double gamma, Dot(stream, s.data(), s.data(), n));

  SolverReport report;
  for (int it = 1; it <= options.iterations && gamma > 0; ++it) {
    TESSERA_RETURN_IF_ERROR(op.Forward(p.data(), q.data()));
    TESSERA_ASSIGN_OR_RETURN(const double qq, Dot(stream, q.data(), q.data(), m));
    if (!(qq > 0)) break;  // p is in A's null space: nothing left to gain
    const double alpha = gamma / qq;
    TESSERA_RETURN_IF_ERROR(Axpy(stream, static_cast<float>(alpha), p.data(), x, n));
    bool bound = false;
    if (projected) {
      // Clamp; where that moved x the recurrence's residual is stale:
      // recompute it (one more forward projection) and restart CG.
      TESSERA_RETURN_IF_ERROR(CopyFloats(stream, x, before.data(), n));
      TESSERA_RETURN_IF_ERROR(ClampMin(stream, 0.0f, x, n));
      TESSERA_RETURN_IF_ERROR(Subtract(stream, x, before.data(), before.data(), n));
      TESSERA_ASSIGN_OR_RETURN(const double moved, Dot(stream, before.data(), before.data(), n));
      bound = moved > 0;
    }
    if (bound) {
      TESSERA_RETURN_IF_ERROR(op.Forward(x, q.data()));
      TESSERA_RETURN_IF_ERROR(Subtract(stream, y, q.data(), r.data(), m));
    } else {
      TESSERA_RETURN_IF_ERROR(Axpy(stream, static_cast<float>(-alpha), q.data(), r.data(), m));
    }
    TESSERA_RETURN_IF_ERROR(op.Back(r.data(), s.data()));
    // Projected: no ascent into the bound for voxels sitting on it.
    if (projected) TESSERA_RETURN_IF_ERROR(ZeroWhereBound(stream, 0.0f, x, s.data(), n));
    TESSERA_ASSIGN_OR_RETURN(const double gamma_next, Dot(stream, s.data(), s.data(), n));
    TESSERA_RETURN_IF_ERROR(Xpby(stream, s.data(), bound ? 0.0f : static_cast<float>(gamma_next / gamma), p.data(), n));
    gamma = gamma_next;
    TESSERA_ASSIGN_OR_RETURN(const double rr, Dot(stream, r.data(), r.data(), m));
    report.iterations = it;
    report.residual_norms.push_back(std::sqrt(rr));
    if (options.progress) TESSERA_RETURN_IF_ERROR(options.progress(it, options.iterations, report.residual_norms.back()));
  }
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return report;
}

}  // namespace solvers
}  // namespace recon
}  // namespace tessera
