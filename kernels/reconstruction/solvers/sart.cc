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

absl::StatusOr<SolverReport> Sart(LinearOperator& op, const float* y, float* x, const SolverOptions& options) {
  TESSERA_RETURN_IF_ERROR(CheckCommon("sart", op, y, x, options));
  if (!(options.lambda > 0.0f && options.lambda < 2.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sart: lambda (relaxation) must be in (0, 2), got ", options.lambda));
  }
  const int num_subsets = options.subsets;
  if (num_subsets < 1 || (num_subsets > 1 && num_subsets != op.num_subsets())) {
    return absl::InvalidArgumentError(absl::StrCat("sart: subsets = ", num_subsets, " but the operator has ",
                                                   op.num_subsets(), " subsets (use 1 or ", op.num_subsets(), ")"));
  }
  const Stream& stream = op.stream();
  const int64_t n = op.domain_size(), m = op.range_size(kAllSubsets);
  std::vector<int> ids;
  std::vector<int64_t> offset, size;
  int64_t max_size = 0;
  for (int s = 0; s < num_subsets; ++s) {
    const int id = num_subsets == 1 ? kAllSubsets : s;
    ids.push_back(id);
    offset.push_back(s == 0 ? 0 : offset.back() + size.back());
    size.push_back(op.range_size(id));
    max_size = std::max(max_size, size.back());
  }

  TESSERA_ASSIGN_OR_RETURN(FloatArray row_sums, FloatArray::Allocate(stream, m));
  TESSERA_ASSIGN_OR_RETURN(FloatArray col_sums, FloatArray::Allocate(stream, num_subsets * n));
  TESSERA_ASSIGN_OR_RETURN(FloatArray ones, FloatArray::Allocate(stream, std::max(n, max_size)));
  TESSERA_ASSIGN_OR_RETURN(FloatArray work, FloatArray::Allocate(stream, max_size));
  TESSERA_ASSIGN_OR_RETURN(FloatArray back, FloatArray::Allocate(stream, n));
  // Compact per-subset copies of y (OS-SART only) and a full range for the exact residual.
  TESSERA_ASSIGN_OR_RETURN(FloatArray y_compact, FloatArray::Allocate(stream, num_subsets > 1 ? m : 0));
  const bool extra_forward = num_subsets > 1 && options.exact_residual;
  TESSERA_ASSIGN_OR_RETURN(FloatArray full, FloatArray::Allocate(stream, extra_forward ? m : 0));

  TESSERA_RETURN_IF_ERROR(Fill(stream, ones.data(), std::max(n, max_size), 1.0f));
  for (int s = 0; s < num_subsets; ++s) {
    TESSERA_RETURN_IF_ERROR(op.Forward(ones.data(), row_sums.data() + offset[s], ids[s]));
    TESSERA_RETURN_IF_ERROR(op.Back(ones.data(), col_sums.data() + s * n, ids[s]));
    if (num_subsets > 1) {
      TESSERA_RETURN_IF_ERROR(CopySubset(stream, op.num_views(), op.elements_per_view(), num_subsets, s,
                                         SubsetCopy::kFullToCompact, y, y_compact.data() + offset[s]));
    }
  }

  // r = y_s - A_s x into `r`; returns |r|^2.
  auto residual = [&](int s, const float* ys, float* r) -> absl::StatusOr<double> {
    TESSERA_RETURN_IF_ERROR(op.Forward(x, r, ids[s]));
    TESSERA_RETURN_IF_ERROR(Subtract(stream, ys, r, r, size[s]));
    return Dot(stream, r, r, size[s]);
  };

  SolverReport report;
  bool have_residual = false;  // one subset: work holds y - A x from the previous iteration's report
  for (int it = 1; it <= options.iterations; ++it) {
    double pass_sq = 0;
    for (int s = 0; s < num_subsets; ++s) {
      const float* ys = num_subsets == 1 ? y : y_compact.data() + offset[s];
      if (!have_residual) {
        TESSERA_ASSIGN_OR_RETURN(const double sq, residual(s, ys, work.data()));
        pass_sq += sq;
      }
      have_residual = false;
      TESSERA_RETURN_IF_ERROR(
          SafeDivide(stream, work.data(), row_sums.data() + offset[s], kWeightEps, work.data(), size[s]));
      TESSERA_RETURN_IF_ERROR(op.Back(work.data(), back.data(), ids[s]));
      TESSERA_RETURN_IF_ERROR(
          AddScaledRatio(stream, options.lambda, back.data(), col_sums.data() + s * n, kWeightEps, x, n));
      if (options.non_negative) TESSERA_RETURN_IF_ERROR(ClampMin(stream, 0.0f, x, n));
    }
    double norm_sq = pass_sq;
    if (num_subsets == 1) {
      TESSERA_ASSIGN_OR_RETURN(norm_sq, residual(0, y, work.data()));
      have_residual = true;
    } else if (extra_forward) {
      TESSERA_RETURN_IF_ERROR(op.Forward(x, full.data(), kAllSubsets));
      TESSERA_RETURN_IF_ERROR(Subtract(stream, y, full.data(), full.data(), m));
      TESSERA_ASSIGN_OR_RETURN(norm_sq, Dot(stream, full.data(), full.data(), m));
    }
    report.iterations = it;
    report.residual_norms.push_back(std::sqrt(norm_sq));
    if (options.progress) {
      TESSERA_RETURN_IF_ERROR(options.progress(it, options.iterations, report.residual_norms.back()));
    }
  }
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return report;
}

}  // namespace solvers
}  // namespace recon
}  // namespace tessera
