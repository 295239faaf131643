// The result-format flags of `tessera register` and `tessera recon ...` (and
// of `tessera job submit` for both): tessera.v1.OutputOptions from the
// command line, defined once.
#ifndef TESSERA_CLI_OUTPUT_ARGS_H_
#define TESSERA_CLI_OUTPUT_ARGS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cli/args.h"
#include "tessera/v1/common.pb.h"

namespace tessera::cli {

// --output-format, --deidentify, --reference-series, --series-description.
// `dicom_outputs`: what --output-format dicom writes, for the verb's help.
std::vector<FlagSpec> OutputFormatFlags(const std::string& dicom_outputs);

// The flags as OutputOptions (the server checks them again); `absolute`
// makes --reference-series absolute (for a server). INVALID_ARGUMENT naming
// the flag for an unknown format or DICOM-only flags without DICOM output.
absl::Status OutputOptionsFromArgs(const Args& args, bool absolute, v1::OutputOptions* options);

}  // namespace tessera::cli

#endif  // TESSERA_CLI_OUTPUT_ARGS_H_
