// tessera.v1.OutputOptions -> dicom::ResultOutputPlan (common/dicom/
// result_volume_output.h): the one adapter every job that writes result
// volumes (registration, reconstruction, apply-transforms) calls, at submit
// (Validate/CheckPlan) and again when the job runs.
#ifndef TESSERA_SERVICES_COMMON_OUTPUT_OPTIONS_H_
#define TESSERA_SERVICES_COMMON_OUTPUT_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/dicom/result_volume_output.h"
#include "tessera/v1/common.pb.h"

namespace tessera {

// `options.reference_series` is resolved under `real_roots` (a file or a
// directory; NOT_FOUND / PERMISSION_DENIED as ResolveUnderRoots, prefixed
// "output.reference_series") and read once to check it is a DICOM series.
// `default_reference`: the resolved path of the input the result lies on
// (registration: the fixed image; empty: none); when it is a DICOM series
// (a directory or a DICOM file, not a zip) and the request names no
// reference, the DICOM outputs keep its patient, study and frame of
// reference. The de-identification salt is random per call (per job run).
// Other errors: PlanResultOutputs'.
absl::StatusOr<dicom::ResultOutputPlan> ResolveOutputOptions(const v1::OutputOptions& options,
                                                             const std::vector<std::string>& real_roots,
                                                             const std::string& default_reference,
                                                             int64_t max_reference_bytes);

}  // namespace tessera

#endif  // TESSERA_SERVICES_COMMON_OUTPUT_OPTIONS_H_
