// The flags of `tessera recon ct|pet|mri|us` and their ReconstructRequest, shared by
// the local verb (cli/verb_recon.cc) and `tessera job submit recon ...`.
#ifndef TESSERA_CLI_RECON_ARGS_H_
#define TESSERA_CLI_RECON_ARGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/args.h"
#include "tessera/v1/reconstruction.pb.h"

namespace tessera::cli {

// `modality` is "ct", "pet", "mri" or "us" (ultrasound).
std::vector<FlagSpec> ReconFlags(const std::string& modality);

// The request the flags describe; `absolute` makes paths absolute (for a
// server). --out becomes output_dir's file for the local verb (the caller
// handles it); INVALID_ARGUMENT naming the flag for bad values.
absl::StatusOr<v1::ReconstructRequest> ReconRequestFromArgs(const Args& args, const std::string& modality,
                                                            bool absolute);

}  // namespace tessera::cli

#endif  // TESSERA_CLI_RECON_ARGS_H_
