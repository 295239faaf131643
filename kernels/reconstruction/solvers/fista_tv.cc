#include "kernels/reconstruction/solvers/fista_tv.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/memory_kind_for.h"
#include "common/status.h"
#include "kernels/reconstruction/solvers/fista.h"
#include "kernels/reconstruction/solvers/solver_util.h"
#include "kernels/reconstruction/vector_ops.h"

namespace tessera {
namespace recon {
namespace solvers {
namespace {

// The power iteration approaches the eigenvalue from below.
constexpr double kLipschitzMargin = 1.05;

// max_i |x_i|, on the host (once per solve).
absl::StatusOr<double> MaxAbs(const Stream& stream, const float* x, int64_t n) {
  std::vector<float> host(static_cast<size_t>(n));
  TESSERA_RETURN_IF_ERROR(
      CopyBytes(host.data(), MemoryKind::kHost, x, MemoryKindFor(stream), host.size() * sizeof(float), stream));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  double m = 0;
  for (float v : host) m = std::max(m, static_cast<double>(std::fabs(v)));
  return m;
}

}  // namespace

absl::StatusOr<double> EstimateNormLipschitz(LinearOperator& op) {
  TESSERA_ASSIGN_OR_RETURN(FloatArray range, FloatArray::Allocate(op.stream(), op.range_size()));
  TESSERA_ASSIGN_OR_RETURN(const double eigenvalue,
                           EstimateLipschitz(op.stream(), op.domain_size(), [&](const float* v, float* out) {
                             TESSERA_RETURN_IF_ERROR(op.Forward(v, range.data()));
                             return op.Back(range.data(), out);
                           }));
  return kLipschitzMargin * eigenvalue;
}

absl::StatusOr<SolverReport> FistaTv(LinearOperator& op, const regularizers::TvShape& shape, const float* y, float* x,
                                     const FistaTvOptions& options) {
  SolverOptions common;
  common.iterations = options.iterations;
  TESSERA_RETURN_IF_ERROR(CheckCommon("fista-tv", op, y, x, common));
  if (!(options.tv_weight >= 0) || !std::isfinite(options.tv_weight)) {
    return absl::InvalidArgumentError(
        absl::StrCat("fista-tv: tv_weight must be >= 0 and finite, got ", options.tv_weight));
  }
  if (options.tv_iterations < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("fista-tv: tv_iterations must be >= 1, got ", options.tv_iterations));
  }
  if (!(options.lipschitz >= 0) || !std::isfinite(options.lipschitz)) {
    return absl::InvalidArgumentError(
        absl::StrCat("fista-tv: lipschitz must be >= 0 and finite, got ", options.lipschitz));
  }
  TESSERA_RETURN_IF_ERROR(regularizers::CheckTvShape(shape));
  if (shape.channels != 1 || shape.size() != op.domain_size()) {
    return absl::InvalidArgumentError(absl::StrCat("fista-tv: the TV shape (", shape.nx, "x", shape.ny, "x", shape.nz,
                                                   ", ", shape.channels, " channel(s)) does not match the volume of ",
                                                   op.domain_size(), " voxels"));
  }
  const Stream& stream = op.stream();
  const int64_t n = op.domain_size(), m = op.range_size();
  TESSERA_ASSIGN_OR_RETURN(FloatArray range, FloatArray::Allocate(stream, m));
  TESSERA_ASSIGN_OR_RETURN(FloatArray back, FloatArray::Allocate(stream, n));
  TESSERA_RETURN_IF_ERROR(op.Back(y, back.data()));
  TESSERA_ASSIGN_OR_RETURN(const double aty_max, MaxAbs(stream, back.data(), n));
  const double lambda = options.tv_weight * aty_max;
  double lipschitz = options.lipschitz;
  if (lipschitz == 0) {
    TESSERA_ASSIGN_OR_RETURN(lipschitz, EstimateNormLipschitz(op));
  }
  TESSERA_ASSIGN_OR_RETURN(regularizers::TvProxPlan tv, regularizers::TvProxPlan::Create(stream, shape));

  double last_residual = 0;
  FistaProblem problem;
  problem.size = n;
  // A null operator (lipschitz 0 after estimation) takes any step: 1.
  problem.step = lipschitz > 0 ? 1 / lipschitz : 1;
  problem.gradient = [&](const float* at, float* g) -> absl::Status {
    TESSERA_RETURN_IF_ERROR(op.Forward(at, range.data()));
    TESSERA_RETURN_IF_ERROR(Subtract(stream, range.data(), y, range.data(), m));
    TESSERA_ASSIGN_OR_RETURN(const double sq, Dot(stream, range.data(), range.data(), m));
    last_residual = std::sqrt(sq);
    return op.Back(range.data(), g);
  };
  problem.prox = [&](double step, float* at) {
    regularizers::TvProxOptions prox;
    prox.weight = step * lambda;
    prox.iterations = options.tv_iterations;
    prox.non_negative = options.non_negative;
    prox.warm_start = options.warm_start_tv;
    return tv.Apply(prox, at);
  };
  SolverReport report;
  FistaOptions fo;
  fo.iterations = options.iterations;
  fo.adaptive_restart = options.adaptive_restart;
  fo.progress = [&](int iteration, int total, double) -> absl::Status {
    report.iterations = iteration;
    report.residual_norms.push_back(last_residual);
    return options.progress ? options.progress(iteration, total, last_residual) : absl::OkStatus();
  };
  TESSERA_RETURN_IF_ERROR(Fista(stream, problem, fo, x).status());
  return report;
}

}  // namespace solvers
}  // namespace recon
}  // namespace tessera
