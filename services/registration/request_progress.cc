#include "services/registration/request_progress.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"

namespace tessera::registration {

double EstimateFraction(const RegistrationOptions& options, const RegistrationProgress& progress) {
  if (progress.stage == "init") return 0;
  if (progress.stage == "output") return 0.95;
  const auto per_scale = [](const std::vector<int>& v, size_t i) {
    return v.empty() ? 0 : std::max(0, v[std::min(i, v.size() - 1)]);
  };
  int64_t total = 0, done = 0;
  bool found = false;
  for (const Stage s : {Stage::kRigid, Stage::kAffine, Stage::kDeformable}) {
    if (!HasStage(options, s)) continue;
    const char* stage = OptionName(s);
    const std::vector<int>& its = s == Stage::kRigid    ? options.rigid_iterations
                                  : s == Stage::kAffine ? options.affine_iterations
                                                        : options.deformable_iterations;
    for (size_t si = 0; si < options.scales.size(); ++si) {
      const int n = per_scale(its, si);
      total += n;
      if (found) continue;
      if (progress.stage == stage && progress.scale == options.scales[si]) {
        done += std::min(progress.iteration, n);
        found = true;
      } else {
        done += n;
      }
    }
  }
  if (!found || total == 0) return 0;
  return 0.95 * static_cast<double>(done) / static_cast<double>(total);
}

ProgressCallback ToJobProgress(const RegistrationOptions& options, JobProgressSink sink) {
  auto fraction = std::make_shared<double>(0);  // the callback is copied; the maximum is shared
  return [options, sink = std::move(sink), fraction](const RegistrationProgress& p) {
    jobs::JobProgress out;
    out.stage = p.stage;
    out.step = p.iteration;
    out.total_steps = p.max_iterations;
    *fraction = std::max(*fraction, EstimateFraction(options, p));
    out.fraction = *fraction;
    out.metrics["scale"] = p.scale;
    if (p.stage != "output") out.metrics["loss"] = p.loss;
    out.message = p.stage == "output" ? "writing results"
                  : p.stage == "init" ? absl::StrFormat("initialised, loss %.6g", p.loss)
                                      : absl::StrFormat("%s x%d: iteration %d/%d, loss %.6g", p.stage, p.scale,
                                                        p.iteration, p.max_iterations, p.loss);
    if (sink) sink(out);
  };
}

jobs::JobProgress ReadingInputsProgress() {
  jobs::JobProgress reading;
  reading.stage = "input";
  reading.message = "reading inputs";
  return reading;
}

}  // namespace tessera::registration
