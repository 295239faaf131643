#include "tests/example_module/sum_engine.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace tessera::example {

absl::StatusOr<SumPlan> SumEngine::MakePlan(const testing::SumRequest& request) const {
  if (request.values().empty() || request.values_size() > kMaxValues) {
    return absl::InvalidArgumentError(absl::StrCat("values: give 1..", kMaxValues, " numbers, got ",
                                                   request.values_size()));
  }
  for (int i = 0; i < request.values_size(); ++i) {
    if (!std::isfinite(request.values(i))) {
      return absl::InvalidArgumentError(absl::StrCat("values[", i, "] is not a finite number"));
    }
  }
  return SumPlan{{request.values().begin(), request.values().end()}};
}

absl::StatusOr<jobs::EngineOutput> SumEngine::RunPlan(const SumPlan& plan, jobs::EngineContext& ctx) const {
  double sum = 0;
  const int64_t n = static_cast<int64_t>(plan.values.size());
  for (int64_t i = 0; i < n; ++i) {
    // Long work checks for cancellation and reports progress as it goes.
    if (i % 1024 == 0) {
      TESSERA_RETURN_IF_ERROR(ctx.CheckContinue());
      ctx.Report({"sum", i, n, static_cast<double>(i) / n, {{"partial_sum", sum}}, ""});
    }
    sum += plan.values[i];
  }
  testing::SumResult result;
  result.set_sum(sum);
  result.set_count(n);
  jobs::EngineOutput out;
  out.result.PackFrom(result);
  return out;
}

}  // namespace tessera::example
