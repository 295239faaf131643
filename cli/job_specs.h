// `tessera job submit VERB ARGS...`: the long-running verbs' command lines as
// job specs for the scheduler, with the same flags as when they run locally.
// Paths name files on the server; relative ones are made absolute against the
// client's working directory (the usual case: client and server share it).
#ifndef TESSERA_CLI_JOB_SPECS_H_
#define TESSERA_CLI_JOB_SPECS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/args.h"
#include "tessera/v1/jobs.pb.h"
#include "tessera/v1/registration.pb.h"

namespace tessera::cli {

// The flags of `tessera register` (local and as a job).
std::vector<FlagSpec> RegisterFlags();
// Those flags as the RegistrationService request; `absolute` makes paths
// absolute (for a server).
absl::StatusOr<v1::RegisterRequest> RegisterRequestFromArgs(const Args& args, bool absolute);

// "register ...", "som train ...", "fp search ..." -> the engine's spec.
// INVALID_ARGUMENT naming the verbs that can run as jobs, or the bad flag.
absl::StatusOr<v1::JobSpec> JobSpecFromCommandLine(const std::vector<std::string>& words);

}  // namespace tessera::cli

#endif  // TESSERA_CLI_JOB_SPECS_H_
