#include "kernels/reconstruction/solvers/asd_pocs.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/status.h"
#include "kernels/reconstruction/solvers/sart.h"
#include "kernels/reconstruction/solvers/solver_util.h"
#include "kernels/reconstruction/vector_ops.h"

namespace tessera {
namespace recon {
namespace solvers {
namespace {

// TIGRE's stopping thresholds.
constexpr double kOpposedCosine = -0.99;
constexpr double kSmallestRelaxation = 0.005;

absl::Status CheckOptions(const AsdPocsOptions& o) {
  auto bad = [](const char* field, double value, const char* rule) {
    return absl::InvalidArgumentError(absl::StrCat("asd-pocs: ", field, " must be ", rule, ", got ", value));
  };
  if (!(o.alpha > 0) || !std::isfinite(o.alpha)) return bad("alpha (tv_weight)", o.alpha, "> 0 and finite");
  if (o.tv_iterations < 1) return bad("tv_iterations", o.tv_iterations, ">= 1");
  if (!(o.alpha_red > 0 && o.alpha_red <= 1)) return bad("alpha_red", o.alpha_red, "in (0, 1]");
  if (!(o.r_max > 0) || !std::isfinite(o.r_max)) return bad("r_max", o.r_max, "> 0 and finite");
  if (!(o.relaxation > 0 && o.relaxation < 2)) return bad("relaxation", o.relaxation, "in (0, 2)");
  if (!(o.relaxation_red > 0 && o.relaxation_red <= 1)) return bad("relaxation_red", o.relaxation_red, "in (0, 1]");
  if (!(o.epsilon >= 0) || !std::isfinite(o.epsilon)) return bad("epsilon", o.epsilon, ">= 0 and finite");
  if (!(o.tv_epsilon > 0) || !std::isfinite(o.tv_epsilon)) return bad("tv_epsilon", o.tv_epsilon, "> 0 and finite");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SolverReport> AsdPocs(LinearOperator& op, const regularizers::TvShape& shape, const float* y, float* x,
                                     const AsdPocsOptions& options) {
  SolverOptions so;
  so.iterations = options.iterations;
  so.subsets = options.subsets;
  so.lambda = static_cast<float>(options.relaxation);
  so.non_negative = true;
  so.exact_residual = true;  // dd steers the TV step
  so.mode = options.mode;
  TESSERA_RETURN_IF_ERROR(CheckCommon("asd-pocs", op, y, x, so));
  TESSERA_RETURN_IF_ERROR(CheckOptions(options));
  TESSERA_RETURN_IF_ERROR(regularizers::CheckTvShape(shape));
  if (shape.channels != 1 || shape.size() != op.domain_size()) {
    return absl::InvalidArgumentError(absl::StrCat("asd-pocs: the TV shape (", shape.nx, "x", shape.ny, "x", shape.nz,
                                                   ", ", shape.channels, " channel(s)) does not match the volume of ",
                                                   op.domain_size(), " voxels"));
  }
  const Stream& stream = op.stream();
  const int64_t n = op.domain_size();
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<SartPlan> sart, SartPlan::Create(op, y, so));
  TESSERA_ASSIGN_OR_RETURN(FloatArray before, FloatArray::Allocate(stream, n));
  TESSERA_ASSIGN_OR_RETURN(FloatArray data_step, FloatArray::Allocate(stream, n));  // dp_vec
  TESSERA_ASSIGN_OR_RETURN(FloatArray work, FloatArray::Allocate(stream, n));       // TV gradient, then dg_vec

  SolverReport report;
  double tv_step = 0;  // dtvg
  double beta = options.relaxation;
  for (int it = 1; it <= options.iterations; ++it) {
    // 1-2: the data step.
    TESSERA_RETURN_IF_ERROR(CopyFloats(stream, x, before.data(), n));
    TESSERA_RETURN_IF_ERROR(sart->SetRelaxation(static_cast<float>(beta)));
    TESSERA_ASSIGN_OR_RETURN(const double dd, sart->Pass(x));
    TESSERA_RETURN_IF_ERROR(Subtract(stream, x, before.data(), data_step.data(), n));
    TESSERA_ASSIGN_OR_RETURN(const double dp_sq, Dot(stream, data_step.data(), data_step.data(), n));
    const double dp = std::sqrt(dp_sq);
    if (it == 1) tv_step = options.alpha * dp;
    // 3: steepest descent on TV with normalised gradients.
    TESSERA_RETURN_IF_ERROR(CopyFloats(stream, x, before.data(), n));
    for (int k = 0; k < options.tv_iterations && tv_step > 0; ++k) {
      TESSERA_RETURN_IF_ERROR(regularizers::TvGradient(stream, shape, options.tv_epsilon, x, work.data()));
      TESSERA_ASSIGN_OR_RETURN(const double g_sq, Dot(stream, work.data(), work.data(), n));
      if (!(g_sq > 0)) break;  // flat image: TV is at its minimum
      TESSERA_RETURN_IF_ERROR(Axpy(stream, static_cast<float>(-tv_step / std::sqrt(g_sq)), work.data(), x, n));
    }
    // 4: the adaptive step rule.
    TESSERA_RETURN_IF_ERROR(Subtract(stream, x, before.data(), work.data(), n));
    TESSERA_ASSIGN_OR_RETURN(const double dg_sq, Dot(stream, work.data(), work.data(), n));
    const double dg = std::sqrt(dg_sq);
    if (dg > options.r_max * dp && dd > options.epsilon) tv_step *= options.alpha_red;
    beta *= options.relaxation_red;
    TESSERA_ASSIGN_OR_RETURN(const double dg_dp, Dot(stream, work.data(), data_step.data(), n));
    const double cosine = dg_dp / std::max(dg * dp, 1e-6);
    report.iterations = it;
    report.residual_norms.push_back(dd);
    if (options.progress) TESSERA_RETURN_IF_ERROR(options.progress(it, options.iterations, dd));
    // 5: TIGRE's stopping rules.
    if ((cosine < kOpposedCosine && dd <= options.epsilon) || beta < kSmallestRelaxation) break;
  }
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return report;
}

}  // namespace solvers
}  // namespace recon
}  // namespace tessera
