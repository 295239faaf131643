// The flags of `tessera apply-transforms` (local) and `tessera job submit
// apply-transforms` (a server's job): tessera.v1.ApplyTransformsRequest from
// the command line, defined once.
#ifndef TESSERA_CLI_APPLY_TRANSFORMS_ARGS_H_
#define TESSERA_CLI_APPLY_TRANSFORMS_ARGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/args.h"
#include "tessera/v1/jobs.pb.h"
#include "tessera/v1/registration.pb.h"

namespace tessera::cli {

// `job`: the server's flags (--registration-job, --inverse, --output-dir,
// --output-format ...) instead of the local --out and --quiet.
std::vector<FlagSpec> ApplyTransformsFlags(bool job);

// The request; `absolute` makes paths absolute (for a server). Transforms are
// --transform F or '[F,1]' (ANTs' inverse form) in ANTs order, then the
// --registration-job's own chain. INVALID_ARGUMENT naming the flag.
absl::StatusOr<v1::ApplyTransformsRequest> ApplyTransformsRequestFromArgs(const Args& args, bool job);

// "apply-transforms ..." -> the "apply_transforms" engine's spec.
absl::StatusOr<v1::JobSpec> ApplyTransformsSpec(const std::vector<std::string>& words);

}  // namespace tessera::cli

#endif  // TESSERA_CLI_APPLY_TRANSFORMS_ARGS_H_
