#include "services/reconstruction/testing/run_in_process.h"

#include <filesystem>

#include "services/reconstruction/reconstruction_request.h"

namespace tessera::reconstruction::testing {

InProcessRun RunInProcess(const v1::ReconstructRequest& request, const std::string& work_dir,
                          const std::vector<std::string>& roots, int64_t max_input_bytes) {
  InProcessRun run;
  run.work_dir = work_dir;
  absl::StatusOr<ReconSpec> spec = ResolveReconstructRequest(request, roots, max_input_bytes, "cpu");
  if (!spec.ok()) {
    run.outcome = spec.status();
    return run;
  }
  if (absl::Status s = CheckReconInputs(*spec); !s.ok()) {
    run.outcome = s;
    return run;
  }
  std::filesystem::remove_all(work_dir);
  std::filesystem::create_directories(work_dir);
  ReconRunContext ctx;
  ctx.work_dir = work_dir;
  ctx.report = [&run](const jobs::JobProgress& p) { run.messages.push_back(p.message); };
  run.outcome = RunReconstruction(*spec, ctx);
  return run;
}

}  // namespace tessera::reconstruction::testing
