// The registration job engine (services/jobs/engine.h): kind "registration",
// spec tessera.v1.RegisterRequest, result tessera.v1.RegistrationResult. What
// the scheduler's workers run, for SchedulerService, `tessera job` and
// RegistrationService alike (which submits its jobs to the scheduler);
// `tessera register` runs it in the foreground.
//
// Inputs are server paths under the data roots (an upload_id lives in one
// server's memory only, so a durable job refuses it; RegistrationService
// writes the uploads a Register names to files under its state directory
// first, which the engine of a serving process takes as a data root). The outputs
// (warped.nii.gz, warped_labels.nii.gz, 0GenericAffine.mat, 0Warp.nii.gz,
// 0InverseWarp.nii.gz: those the run produces; with request.output's DICOM
// formats warped_dicom/IM*.dcm and warped_labels_seg.dcm, beside or instead
// of the warped NIfTI files) are written into the job's work directory (the
// job's result files, DICOM series files named "warped_dicom/IM00001.dcm")
// and, when the request names an output_dir, copied there too; the result's
// `files` name the output_dir copies (empty without one).
// The request's job_id is ignored: the scheduler names jobs.
//
//   TESSERA_ASSIGN_OR_RETURN(auto engine, RegistrationEngine::Create(roots, max_volume_bytes, "auto"));
//   TESSERA_RETURN_IF_ERROR(engines.Add(std::move(engine)));
#ifndef TESSERA_SERVICES_REGISTRATION_REGISTRATION_ENGINE_H_
#define TESSERA_SERVICES_REGISTRATION_REGISTRATION_ENGINE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/jobs/typed_engine.h"
#include "services/registration/request_options.h"
#include "services/registration/request_run.h"
#include "tessera/v1/registration.pb.h"

namespace tessera::registration {

// A RegisterRequest parsed once (its options: ParseRegistrationOptions,
// then PlanRegistration): what Validate, Needs and Run of its job all read.
struct RegisterJobPlan {
  v1::RegisterRequest request;
  RegistrationPlan registration;
};

class RegistrationEngine final : public jobs::TypedEngine<v1::RegisterRequest, RegisterJobPlan> {
 public:
  // Device memory of a registration per voxel of the fixed image (pyramid,
  // warped image and gradient, displacement and Adam moments, metric
  // scratch), for placement.
  static constexpr int64_t kDeviceBytesPerFixedVoxel = 92;

  // `data_roots`: directories the job's paths may name (each must exist;
  // canonicalized here). `max_volume_bytes`: per input volume, > 0.
  // `default_device`: "auto", "cpu" or "cuda", for requests that leave
  // options.device empty (not checked against this process's devices: the
  // job may run on another worker).
  static absl::StatusOr<std::shared_ptr<const RegistrationEngine>> Create(const std::vector<std::string>& data_roots,
                                                                          int64_t max_volume_bytes,
                                                                          const std::string& default_device);

  std::string kind() const override { return "registration"; }

  // The request resolved against this engine's roots and limits (the CLI's
  // foreground run).
  absl::StatusOr<RequestSpec> Resolve(const v1::RegisterRequest& request) const;

 protected:
  // INVALID_ARGUMENT for bad options.
  absl::StatusOr<RegisterJobPlan> MakePlan(const v1::RegisterRequest& request) const override;
  // INVALID_ARGUMENT (missing fixed/moving, an upload_id), NOT_FOUND /
  // PERMISSION_DENIED / FAILED_PRECONDITION for paths (as ResolveUnderRoots),
  // RESOURCE_EXHAUSTED for files over the volume limit.
  absl::Status CheckPlan(const RegisterJobPlan& plan) const override;
  // needs_gpu only when the request (or the default device) says "cuda";
  // device_bytes ~ kDeviceBytesPerFixedVoxel x the fixed image's voxels,
  // from its NIfTI header (0 for "cpu" or when the header is unreadable).
  jobs::ResourceNeeds NeedsOf(const RegisterJobPlan& plan) const override;
  // Reports progress (stages input, init, rigid, affine, deformable, output;
  // metrics loss and scale), stops within an iteration when cancelled
  // (CANCELLED) or past the deadline (DEADLINE_EXCEEDED), and sets the job's
  // peak device memory (its own allocations only).
  absl::StatusOr<jobs::EngineOutput> RunPlan(const RegisterJobPlan& plan, jobs::EngineContext& ctx) const override;

 private:
  absl::StatusOr<RequestSpec> ResolvePlan(const RegisterJobPlan& plan) const;

  RegistrationEngine(std::vector<std::string> roots, int64_t max_volume_bytes, std::string default_device)
      : roots_(std::move(roots)), max_volume_bytes_(max_volume_bytes), default_device_(std::move(default_device)) {}

  const std::vector<std::string> roots_;
  const int64_t max_volume_bytes_;
  const std::string default_device_;
};

}  // namespace tessera::registration

#endif  // TESSERA_SERVICES_REGISTRATION_REGISTRATION_ENGINE_H_
