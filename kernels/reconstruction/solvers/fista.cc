#include "kernels/reconstruction/solvers/fista.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/memory_kind_for.h"
#include "common/status.h"
#include "kernels/reconstruction/solvers/solver_util.h"
#include "kernels/reconstruction/vector_ops.h"

namespace tessera {
namespace recon {
namespace solvers {
absl::StatusOr<SolverReport> Fista(const Stream& stream, const FistaProblem& problem, const FistaOptions& options,
                                   float* x) {
  if (problem.size < 1) return absl::InvalidArgumentError(absl::StrCat("fista: size must be >= 1, got ", problem.size));
  if (!(problem.step > 0) || !std::isfinite(problem.step)) {
    return absl::InvalidArgumentError(absl::StrCat("fista: step must be positive and finite, got ", problem.step));
  }
  if (!problem.gradient || !problem.prox) return absl::InvalidArgumentError("fista: gradient and prox are required");
  if (options.iterations < 0) {
    return absl::InvalidArgumentError(absl::StrCat("fista: iterations must be >= 0, got ", options.iterations));
  }
  if (x == nullptr) return absl::InvalidArgumentError("fista: x is null");
  const int64_t n = problem.size;
  TESSERA_ASSIGN_OR_RETURN(FloatArray y, FloatArray::Allocate(stream, n));
  TESSERA_ASSIGN_OR_RETURN(FloatArray g, FloatArray::Allocate(stream, n));
  TESSERA_ASSIGN_OR_RETURN(FloatArray previous, FloatArray::Allocate(stream, n));
  TESSERA_RETURN_IF_ERROR(CopyFloats(stream, x, y.data(), n));

  SolverReport report;
  double t = 1;
  for (int it = 1; it <= options.iterations; ++it) {
    TESSERA_RETURN_IF_ERROR(problem.gradient(y.data(), g.data()));
    TESSERA_RETURN_IF_ERROR(CopyFloats(stream, x, previous.data(), n));
    // x = prox(y - s g)
    TESSERA_RETURN_IF_ERROR(CopyFloats(stream, y.data(), x, n));
    TESSERA_RETURN_IF_ERROR(Axpy(stream, static_cast<float>(-problem.step), g.data(), x, n));
    TESSERA_RETURN_IF_ERROR(problem.prox(problem.step, x));
    // Restart test before `previous` becomes the update: y - x_k is the
    // generalised gradient step; a positive product with x_k - x_{k-1} means
    // the momentum carried the iterate uphill.
    bool restart = false;
    if (options.adaptive_restart) {
      TESSERA_RETURN_IF_ERROR(Subtract(stream, y.data(), x, g.data(), n));          // g = y - x_k
      TESSERA_RETURN_IF_ERROR(Subtract(stream, x, previous.data(), y.data(), n));   // y = x_k - x_{k-1}
      TESSERA_ASSIGN_OR_RETURN(const double uphill, Dot(stream, g.data(), y.data(), n));
      restart = uphill > 0;
    }
    TESSERA_RETURN_IF_ERROR(Subtract(stream, x, previous.data(), previous.data(), n));  // d = x_k - x_{k-1}
    TESSERA_ASSIGN_OR_RETURN(const double dd, Dot(stream, previous.data(), previous.data(), n));
    TESSERA_ASSIGN_OR_RETURN(const double xx, Dot(stream, x, x, n));
    double beta = 0;
    if (restart) {
      t = 1;
    } else {
      const double t_next = 0.5 * (1 + std::sqrt(1 + 4 * t * t));
      beta = (t - 1) / t_next;
      t = t_next;
    }
    // y = x_k + beta d
    TESSERA_RETURN_IF_ERROR(CopyFloats(stream, x, y.data(), n));
    if (beta != 0) TESSERA_RETURN_IF_ERROR(Axpy(stream, static_cast<float>(beta), previous.data(), y.data(), n));
    report.iterations = it;
    report.residual_norms.push_back(xx > 0 ? std::sqrt(dd / xx) : std::sqrt(dd));
    if (options.progress) TESSERA_RETURN_IF_ERROR(options.progress(it, options.iterations, report.residual_norms.back()));
  }
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return report;
}

absl::StatusOr<double> EstimateLipschitz(const Stream& stream, int64_t size,
                                         const std::function<absl::Status(const float* x, float* out)>& normal,
                                         int iterations) {
  TESSERA_ASSIGN_OR_RETURN(const LipschitzEstimate e, EstimateLipschitzWithResidual(stream, size, normal, iterations));
  return e.rayleigh;
}

absl::StatusOr<LipschitzEstimate> EstimateLipschitzWithResidual(
    const Stream& stream, int64_t size, const std::function<absl::Status(const float* x, float* out)>& normal,
    int iterations) {
  if (size < 1) return absl::InvalidArgumentError(absl::StrCat("lipschitz: size must be >= 1, got ", size));
  if (!normal) return absl::InvalidArgumentError("lipschitz: the normal operator is required");
  if (iterations < 1) return absl::InvalidArgumentError(absl::StrCat("lipschitz: iterations must be >= 1, got ", iterations));
  // A fixed seed: the same operator gives the same step, run after run.
  std::vector<float> start(static_cast<size_t>(size));
  std::mt19937 rng(12345);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (float& v : start) v = uniform(rng);
  TESSERA_ASSIGN_OR_RETURN(FloatArray v, FloatArray::Allocate(stream, size));
  TESSERA_ASSIGN_OR_RETURN(FloatArray w, FloatArray::Allocate(stream, size));
  TESSERA_RETURN_IF_ERROR(CopyBytes(v.data(), MemoryKindFor(stream), start.data(), MemoryKind::kHost,
                                    start.size() * sizeof(float), stream));
  TESSERA_ASSIGN_OR_RETURN(double vv, Dot(stream, v.data(), v.data(), size));
  LipschitzEstimate estimate;
  for (int it = 0; it < iterations; ++it) {
    TESSERA_RETURN_IF_ERROR(normal(v.data(), w.data()));
    TESSERA_ASSIGN_OR_RETURN(const double vw, Dot(stream, v.data(), w.data(), size));
    TESSERA_ASSIGN_OR_RETURN(const double ww, Dot(stream, w.data(), w.data(), size));
    estimate.rayleigh = vw / vv;  // Rayleigh quotient (||v|| taken as 1 after the first step)
    // ||w - rho v||^2 / ||v||^2 = (ww - vw^2 / v.v) / v.v with v.v measured:
    // the float v is unit only to rounding, which the difference would amplify.
    TESSERA_ASSIGN_OR_RETURN(const double v2, Dot(stream, v.data(), v.data(), size));
    estimate.residual = v2 > 0 ? std::sqrt(std::max(0.0, (ww - vw * vw / v2) / v2)) : 0.0;
    if (!(ww > 0)) return LipschitzEstimate{};  // v in the null space: any step works
    TESSERA_RETURN_IF_ERROR(CopyFloats(stream, w.data(), v.data(), size));
    TESSERA_RETURN_IF_ERROR(Scale(stream, static_cast<float>(1 / std::sqrt(ww)), v.data(), size));
    vv = 1;
  }
  if (!std::isfinite(estimate.rayleigh) || !std::isfinite(estimate.residual)) {
    return absl::InvalidArgumentError("lipschitz: the operator produced a non-finite value");
  }
  return estimate;
}

}  // namespace solvers
}  // namespace recon
}  // namespace tessera
