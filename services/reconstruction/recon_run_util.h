// What every modality's run shares (reconstruction_run.h dispatches to CT/PET,
// mri_run.h and ultrasound_run.h): progress reports in the job engine's
// terms and the cancel/deadline check between steps.
#ifndef TESSERA_SERVICES_RECONSTRUCTION_RECON_RUN_UTIL_H_
#define TESSERA_SERVICES_RECONSTRUCTION_RECON_RUN_UTIL_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "services/reconstruction/reconstruction_run.h"

namespace tessera::reconstruction {

// One progress message (nothing when ctx.report is empty).
void Report(const ReconRunContext& ctx, const std::string& stage, int64_t step, int64_t total, double fraction,
            std::map<std::string, double> metrics, const std::string& message);

// OK to go on; CANCELLED / DEADLINE_EXCEEDED from ctx.check_continue.
absl::Status Continue(const ReconRunContext& ctx);

// Iterations reported as steps of the "reconstruct" stage (fraction 5%..95%).
double IterationFraction(int done, int total);

}  // namespace tessera::reconstruction

#endif  // TESSERA_SERVICES_RECONSTRUCTION_RECON_RUN_UTIL_H_
