#include "services/reconstruction/recon_run_util.h"

#include <algorithm>
#include <utility>

namespace tessera::reconstruction {

void Report(const ReconRunContext& ctx, const std::string& stage, int64_t step, int64_t total, double fraction,
            std::map<std::string, double> metrics, const std::string& message) {
  if (!ctx.report) return;
  jobs::JobProgress p;
  p.stage = stage;
  p.step = step;
  p.total_steps = total;
  p.fraction = fraction;
  p.metrics = std::move(metrics);
  p.message = message;
  ctx.report(p);
}

absl::Status Continue(const ReconRunContext& ctx) { return ctx.check_continue ? ctx.check_continue() : absl::OkStatus(); }

double IterationFraction(int done, int total) { return 0.05 + 0.9 * done / std::max(1, total); }

}  // namespace tessera::reconstruction
