// Tests' one way to run a ReconstructRequest as a job would, without a
// server: resolved as at submit (under `roots`), its inputs checked
// (CheckReconInputs), run in `work_dir` (made fresh), progress kept.
#ifndef TESSERA_SERVICES_RECONSTRUCTION_TESTING_RUN_IN_PROCESS_H_
#define TESSERA_SERVICES_RECONSTRUCTION_TESTING_RUN_IN_PROCESS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/reconstruction/reconstruction_run.h"
#include "tessera/v1/reconstruction.pb.h"

namespace tessera::reconstruction::testing {

struct InProcessRun {
  absl::StatusOr<ReconOutcome> outcome;  // the submit-time refusal, or the run's
  std::string work_dir;
  std::vector<std::string> messages;     // progress messages, in order
};

InProcessRun RunInProcess(const v1::ReconstructRequest& request, const std::string& work_dir,
                          const std::vector<std::string>& roots = {"/"},
                          int64_t max_input_bytes = int64_t{1} << 32);

}  // namespace tessera::reconstruction::testing

#endif  // TESSERA_SERVICES_RECONSTRUCTION_TESTING_RUN_IN_PROCESS_H_
