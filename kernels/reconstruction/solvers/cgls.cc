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
  if (options.non_negative) {
    return absl::InvalidArgumentError("cgls: non_negative is not supported (CGLS is unconstrained; use SART)");
  }
  const Stream& stream = op.stream();
  const int64_t n = op.domain_size(), m = op.range_size(kAllSubsets);
  TESSERA_ASSIGN_OR_RETURN(FloatArray r, FloatArray::Allocate(stream, m));
  TESSERA_ASSIGN_OR_RETURN(FloatArray q, FloatArray::Allocate(stream, m));
  TESSERA_ASSIGN_OR_RETURN(FloatArray s, FloatArray::Allocate(stream, n));
  TESSERA_ASSIGN_OR_RETURN(FloatArray p, FloatArray::Allocate(stream, n));

  TESSERA_RETURN_IF_ERROR(op.Forward(x, q.data()));
  TESSERA_RETURN_IF_ERROR(Subtract(stream, y, q.data(), r.data(), m));
  TESSERA_RETURN_IF_ERROR(op.Back(r.data(), s.data()));
  const MemoryKind kind = stream.backend() == Backend::kCuda ? MemoryKind::kDevice : MemoryKind::kHost;
  TESSERA_RETURN_IF_ERROR(CopyBytes(p.data(), kind, s.data(), kind, static_cast<size_t>(n) * sizeof(float), stream));
  TESSERA_ASSIGN_OR_RETURN(double gamma, Dot(stream, s.data(), s.data(), n));

  SolverReport report;
  for (int it = 1; it <= options.iterations && gamma > 0; ++it) {
    TESSERA_RETURN_IF_ERROR(op.Forward(p.data(), q.data()));
    TESSERA_ASSIGN_OR_RETURN(const double qq, Dot(stream, q.data(), q.data(), m));
    if (!(qq > 0)) break;  // p is in A's null space: nothing left to gain
    const double alpha = gamma / qq;
    TESSERA_RETURN_IF_ERROR(Axpy(stream, static_cast<float>(alpha), p.data(), x, n));
    TESSERA_RETURN_IF_ERROR(Axpy(stream, static_cast<float>(-alpha), q.data(), r.data(), m));
    TESSERA_RETURN_IF_ERROR(op.Back(r.data(), s.data()));
    TESSERA_ASSIGN_OR_RETURN(const double gamma_next, Dot(stream, s.data(), s.data(), n));
    TESSERA_RETURN_IF_ERROR(Xpby(stream, s.data(), static_cast<float>(gamma_next / gamma), p.data(), n));
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
