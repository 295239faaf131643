#include "kernels/reconstruction/solvers/sart.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/reconstruction/solvers/solver_util.h"
#include "kernels/reconstruction/vector_ops.h"

namespace tessera {
namespace recon {
namespace solvers {
namespace {

// Row and column sums at or below this count as "nothing sees it"; far below
// any physical path length or voxel coverage in mm.
constexpr float kWeightEps = 1e-6f;

}  // namespace

absl::StatusOr<std::unique_ptr<SartPlan>> SartPlan::Create(LinearOperator& op, const float* y,
                                                            const SolverOptions& options) {
  TESSERA_RETURN_IF_ERROR(CheckCommon("sart", op, y, /*x, checked by Pass:*/ y, options));
  if (!(options.lambda > 0.0f && options.lambda < 2.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sart: lambda (relaxation) must be in (0, 2), got ", options.lambda));
  }
  const int num_subsets = options.subsets;
  if (num_subsets < 1 || (num_subsets > 1 && num_subsets != op.num_subsets())) {
    return absl::InvalidArgumentError(absl::StrCat("sart: subsets = ", num_subsets, " but the operator has ",
                                                   op.num_subsets(), " subsets (use 1 or ", op.num_subsets(), ")"));
  }
  std::unique_ptr<SartPlan> plan(new SartPlan(op, y, options));
  const Stream& stream = op.stream();
  const int64_t n = op.domain_size(), m = op.range_size(kAllSubsets);
  int64_t max_size = 0;
  for (int s = 0; s < num_subsets; ++s) {
    const int id = num_subsets == 1 ? kAllSubsets : s;
    plan->ids_.push_back(id);
    plan->offset_.push_back(s == 0 ? 0 : plan->offset_.back() + plan->size_.back());
    plan->size_.push_back(op.range_size(id));
    max_size = std::max(max_size, plan->size_.back());
  }

  TESSERA_ASSIGN_OR_RETURN(plan->row_sums_, FloatArray::Allocate(stream, m));
  TESSERA_ASSIGN_OR_RETURN(plan->col_sums_, FloatArray::Allocate(stream, num_subsets * n));
  TESSERA_ASSIGN_OR_RETURN(FloatArray ones, FloatArray::Allocate(stream, std::max(n, max_size)));
  TESSERA_ASSIGN_OR_RETURN(plan->work_, FloatArray::Allocate(stream, max_size));
  TESSERA_ASSIGN_OR_RETURN(plan->back_, FloatArray::Allocate(stream, n));
  // Compact per-subset copies of y (OS-SART only) and a full range for the exact residual.
  TESSERA_ASSIGN_OR_RETURN(plan->y_compact_, FloatArray::Allocate(stream, num_subsets > 1 ? m : 0));
  const bool extra_forward = num_subsets > 1 && options.exact_residual;
  TESSERA_ASSIGN_OR_RETURN(plan->full_, FloatArray::Allocate(stream, extra_forward ? m : 0));

  TESSERA_RETURN_IF_ERROR(Fill(stream, ones.data(), std::max(n, max_size), 1.0f));
  for (int s = 0; s < num_subsets; ++s) {
    TESSERA_RETURN_IF_ERROR(op.Forward(ones.data(), plan->row_sums_.data() + plan->offset_[s], plan->ids_[s]));
    TESSERA_RETURN_IF_ERROR(op.Back(ones.data(), plan->col_sums_.data() + s * n, plan->ids_[s]));
    if (num_subsets > 1) {
      TESSERA_RETURN_IF_ERROR(CopySubset(stream, op.num_views(), op.elements_per_view(), num_subsets, s,
                                         SubsetCopy::kFullToCompact, y, plan->y_compact_.data() + plan->offset_[s]));
    }
  }
  // `ones` is freed on return while its last uses may still be queued.
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return plan;
}

// r = y_s - A_s x into `r`; returns |r|^2.
absl::StatusOr<double> SartPlan::Residual(int s, const float* ys, const float* x, float* r) {
  TESSERA_RETURN_IF_ERROR(op_.Forward(x, r, ids_[s]));
  TESSERA_RETURN_IF_ERROR(Subtract(op_.stream(), ys, r, r, size_[s]));
  return Dot(op_.stream(), r, r, size_[s]);
}

absl::StatusOr<double> SartPlan::Pass(float* x, bool x_unchanged) {
  if (x == nullptr) return absl::InvalidArgumentError("sart: x is null");
  const Stream& stream = op_.stream();
  const int num_subsets = options_.subsets;
  const int64_t n = op_.domain_size(), m = op_.range_size(kAllSubsets);
  if (!x_unchanged) have_residual_ = false;
  double pass_sq = 0;
  for (int s = 0; s < num_subsets; ++s) {
    const float* ys = num_subsets == 1 ? y_ : y_compact_.data() + offset_[s];
    if (!have_residual_) {
      TESSERA_ASSIGN_OR_RETURN(const double sq, Residual(s, ys, x, work_.data()));
      pass_sq += sq;
    }
    have_residual_ = false;
    TESSERA_RETURN_IF_ERROR(
        SafeDivide(stream, work_.data(), row_sums_.data() + offset_[s], kWeightEps, work_.data(), size_[s]));
    TESSERA_RETURN_IF_ERROR(op_.Back(work_.data(), back_.data(), ids_[s]));
    TESSERA_RETURN_IF_ERROR(
        AddScaledRatio(stream, options_.lambda, back_.data(), col_sums_.data() + s * n, kWeightEps, x, n));
    if (options_.non_negative) TESSERA_RETURN_IF_ERROR(ClampMin(stream, 0.0f, x, n));
  }
  double norm_sq = pass_sq;
  if (num_subsets == 1) {
    TESSERA_ASSIGN_OR_RETURN(norm_sq, Residual(0, y_, x, work_.data()));
    have_residual_ = true;
  } else if (options_.exact_residual) {
    TESSERA_RETURN_IF_ERROR(op_.Forward(x, full_.data(), kAllSubsets));
    TESSERA_RETURN_IF_ERROR(Subtract(stream, y_, full_.data(), full_.data(), m));
    TESSERA_ASSIGN_OR_RETURN(norm_sq, Dot(stream, full_.data(), full_.data(), m));
  }
  return std::sqrt(norm_sq);
}

absl::Status SartPlan::SetRelaxation(float lambda) {
  if (!(lambda > 0.0f && lambda < 2.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("sart: lambda (relaxation) must be in (0, 2), got ", lambda));
  }
  options_.lambda = lambda;
  return absl::OkStatus();
}

absl::StatusOr<SolverReport> Sart(LinearOperator& op, const float* y, float* x, const SolverOptions& options) {
  TESSERA_RETURN_IF_ERROR(CheckCommon("sart", op, y, x, options));
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<SartPlan> plan, SartPlan::Create(op, y, options));
  SolverReport report;
  for (int it = 1; it <= options.iterations; ++it) {
    TESSERA_ASSIGN_OR_RETURN(const double residual, plan->Pass(x, /*x_unchanged=*/it > 1));
    report.iterations = it;
    report.residual_norms.push_back(residual);
    if (options.progress) {
      TESSERA_RETURN_IF_ERROR(options.progress(it, options.iterations, residual));
    }
  }
  TESSERA_RETURN_IF_ERROR(op.stream().Synchronize());
  return report;
}

}  // namespace solvers
}  // namespace recon
}  // namespace tessera
