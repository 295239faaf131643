// A registration's progress as job progress (services/jobs): stage, step,
// an overall fraction estimated from the planned iterations, the loss and
// scale as metrics, and a one-line message. Shared by RegistrationService and
// the registration job engine, so both report the same thing.
#ifndef TESSERA_SERVICES_REGISTRATION_REQUEST_PROGRESS_H_
#define TESSERA_SERVICES_REGISTRATION_REQUEST_PROGRESS_H_

#include <functional>

#include "services/jobs/job_types.h"
#include "kernels/registration/pipeline/registrar.h"

namespace tessera::registration {

using JobProgressSink = std::function<void(const jobs::JobProgress&)>;

// Overall progress in [0, 1) of a run with `options` at `progress`, from the
// planned iteration counts (a scale that converges early makes it jump ahead).
// "init" is 0; "output" (writing results) is 0.95.
double EstimateFraction(const RegistrationOptions& options, const RegistrationProgress& progress);

// A registrar progress callback that forwards each report to `sink` as
// JobProgress: stage, step = iteration, total_steps = the scale's maximum,
// fraction (never decreasing, also with repeated scale factors), metrics
// "scale" and "loss" (no loss for "output") and a message.
ProgressCallback ToJobProgress(const RegistrationOptions& options, JobProgressSink sink);

// The report before the registration starts: stage "input", "reading inputs".
jobs::JobProgress ReadingInputsProgress();

}  // namespace tessera::registration

#endif  // TESSERA_SERVICES_REGISTRATION_REQUEST_PROGRESS_H_
