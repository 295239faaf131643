// One registration request run to its outcome: read the inputs, register
// (RunRegistration: transforms, Dice, Jacobian), write the ANTs-style files
// (warped.nii.gz, warped_labels.nii.gz, 0GenericAffine.mat, 0Warp.nii.gz,
// 0InverseWarp.nii.gz) and build the tessera.v1.RegistrationResult. What the
// registration job engine (registration_engine.h) runs.
#ifndef TESSERA_SERVICES_REGISTRATION_REQUEST_RUN_H_
#define TESSERA_SERVICES_REGISTRATION_REQUEST_RUN_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/dicom/result_volume_output.h"
#include "common/volume.h"
#include "kernels/registration/pipeline/registration_job.h"
#include "services/registration/request_inputs.h"
#include "services/registration/request_progress.h"
#include "tessera/v1/registration.pb.h"

namespace tessera::registration {

// A RegisterRequest checked and resolved against the server's data roots.
struct RequestSpec {
  RequestInputs inputs;
  RegistrationPlan plan;
  bool inverse_warp = false;
  // The request's output_dir, resolved (its parent exists); empty: none.
  // The result's `files` name the files written here.
  std::string output_dir;
  int64_t max_volume_bytes = 0;  // per input volume
  // The result formats (request.output, ResolveOutputOptions): NIfTI, DICOM
  // (warped_dicom/, warped_labels_seg.dcm) or both.
  dicom::ResultOutputPlan output;
};

// Who runs it and how it is stopped.
struct RequestRunContext {
  std::string job_id;                   // RegistrationResult.job_id
  // When set, every output file is written here (then copied to the spec's
  // output_dir, if any): a job engine's result directory.
  std::string work_dir;
  JobProgressSink report;               // optional
  const std::atomic<bool>* cancel = nullptr;
  absl::Time deadline = absl::InfiniteFuture();
};

struct RequestOutcome {
  RegistrationSummary summary;          // arrays in memory; files: those in output_dir (empty without one)
  Geometry fixed_geometry;
  std::string affine_mat;               // 0GenericAffine.mat, as bytes
  NDArray inverse_warp;                 // RAS mm, with inverse_warp and a deformable stage
  // Names of the files written to context.work_dir, relative to it (DICOM
  // series files as "warped_dicom/IM00001.dcm").
  std::vector<std::string> work_files;
  v1::RegistrationResult result;
};

// Errors: those of reading the inputs (NOT_FOUND, INVALID_ARGUMENT,
// RESOURCE_EXHAUSTED, DATA_LOSS) and of Register(); CANCELLED via `cancel`,
// DEADLINE_EXCEEDED past the deadline; PERMISSION_DENIED / INTERNAL when an
// output directory cannot be written.
absl::StatusOr<RequestOutcome> RunRegistrationRequest(const RequestSpec& spec, const RequestRunContext& context);

}  // namespace tessera::registration

#endif  // TESSERA_SERVICES_REGISTRATION_REQUEST_RUN_H_
