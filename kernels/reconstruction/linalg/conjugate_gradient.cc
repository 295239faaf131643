// The CG recurrence on the host, vectors on the stream:
//   r = b - A x, p = r, rho = r.r
//   repeat: q = A p; alpha = rho / p.q; x += alpha p; r -= alpha q;
//           rho' = r.r; stop if sqrt(rho') <= tol ||b||; p = r + (rho'/rho) p
#include "kernels/reconstruction/linalg/conjugate_gradient.h"

#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/memory_kind_for.h"
#include "common/status.h"
#include "kernels/reconstruction/vector_ops.h"

namespace tessera {
namespace recon {
namespace linalg {

absl::StatusOr<CgResult> ConjugateGradient(const Stream& stream, const Matvec& matvec, const float* b, float* x,
                                           int64_t n, const CgOptions& options) {
  if (n <= 0) return absl::InvalidArgumentError(absl::StrCat("cg: n must be positive, got ", n));
  if (b == nullptr || x == nullptr) return absl::InvalidArgumentError("cg: b or x is null");
  if (!matvec) return absl::InvalidArgumentError("cg: no matvec");
  if (options.max_iterations < 0) {
    return absl::InvalidArgumentError(absl::StrCat("cg: max_iterations must be >= 0, got ", options.max_iterations));
  }
  if (!(options.tolerance >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("cg: tolerance must be >= 0, got ", options.tolerance));
  }
  const MemoryKind kind = MemoryKindFor(stream);
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> scratch,
                           Buffer::Allocate(kind, 3 * static_cast<size_t>(n) * sizeof(float), stream.ordinal()));
  float* r = static_cast<float*>(scratch->data());
  float* p = r + n;
  float* q = p + n;

  CgResult result;
  TESSERA_ASSIGN_OR_RETURN(const double bb, Dot(stream, b, b, n));
  if (!std::isfinite(bb)) return absl::InvalidArgumentError("cg: b has a non-finite element");
  const double b_norm = std::sqrt(bb);
  if (b_norm == 0) {
    TESSERA_RETURN_IF_ERROR(Fill(stream, x, n, 0.0f));
    result.converged = true;
    result.residual_history.push_back(0.0);
    return result;
  }
  // r = b - A x (or b when x starts at 0).
  if (options.zero_initial_guess) {
    TESSERA_RETURN_IF_ERROR(Fill(stream, x, n, 0.0f));
    TESSERA_RETURN_IF_ERROR(CopyBytes(r, kind, b, kind, n * sizeof(float), stream));
  } else {
    TESSERA_RETURN_IF_ERROR(Annotate(matvec(x, q), "cg: matvec"));
    TESSERA_RETURN_IF_ERROR(Subtract(stream, b, q, r, n));
  }
  TESSERA_RETURN_IF_ERROR(CopyBytes(p, kind, r, kind, n * sizeof(float), stream));
  TESSERA_ASSIGN_OR_RETURN(double rho, Dot(stream, r, r, n));
  result.relative_residual = std::sqrt(rho) / b_norm;
  result.residual_history.push_back(result.relative_residual);
  result.converged = result.relative_residual <= options.tolerance;
  const double rho_stop = options.tolerance * options.tolerance * bb;

  for (int k = 1; k <= options.max_iterations && !result.converged; ++k) {
    TESSERA_RETURN_IF_ERROR(Annotate(matvec(p, q), absl::StrCat("cg: matvec at iteration ", k)));
    TESSERA_ASSIGN_OR_RETURN(const double pq, Dot(stream, p, q, n));
    if (!(pq > 0) || !std::isfinite(pq)) {
      return absl::FailedPreconditionError(
          absl::StrCat("cg: p^T A p = ", pq, " at iteration ", k, ": the matvec is not symmetric positive definite"));
    }
    const double alpha = rho / pq;
    TESSERA_RETURN_IF_ERROR(Axpy(stream, static_cast<float>(alpha), p, x, n));
    TESSERA_RETURN_IF_ERROR(Axpy(stream, static_cast<float>(-alpha), q, r, n));
    TESSERA_ASSIGN_OR_RETURN(const double rho_next, Dot(stream, r, r, n));
    if (!std::isfinite(rho_next)) {
      return absl::FailedPreconditionError(absl::StrCat("cg: the residual became non-finite at iteration ", k));
    }
    result.iterations = k;
    result.relative_residual = std::sqrt(rho_next) / b_norm;
    result.residual_history.push_back(result.relative_residual);
    result.converged = rho_next <= rho_stop;
    if (!result.converged) {
      TESSERA_RETURN_IF_ERROR(Xpby(stream, r, static_cast<float>(rho_next / rho), p, n));  // p = r + beta p
    }
    rho = rho_next;
    if (options.progress) {
      TESSERA_RETURN_IF_ERROR(options.progress(k, options.max_iterations, result.relative_residual));
    }
  }
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return result;
}

absl::StatusOr<CgResult> ConjugateGradientComplex(const Stream& stream, const Matvec& matvec, const float* b, float* x,
                                                  int64_t n_complex, const CgOptions& options) {
  if (n_complex <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("cg: n_complex must be positive, got ", n_complex));
  }
  return ConjugateGradient(stream, matvec, b, x, 2 * n_complex, options);
}

}  // namespace linalg
}  // namespace recon
}  // namespace tessera
