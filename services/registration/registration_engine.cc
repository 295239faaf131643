#include "services/registration/registration_engine.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/device.h"
#include "common/status.h"
#include "services/common/data_roots.h"
#include "common/dicom/dicom_series.h"
#include "services/common/output_options.h"
#include "kernels/registration/pipeline/nifti_voxels.h"
#include "kernels/registration/pipeline/metric_mask.h"
#include "services/registration/initial_transform.h"
#include "services/registration/request_options.h"

namespace tessera::registration {
namespace {

// A durable job's inputs must outlive this process: server paths only.
absl::StatusOr<std::optional<VolumeInput>> ResolveSource(const v1::VolumeSource& source, const char* what,
                                                         bool required, const std::vector<std::string>& roots,
                                                         int64_t max_volume_bytes) {
  switch (source.source_case()) {
    case v1::VolumeSource::kPath: {
      TESSERA_ASSIGN_OR_RETURN(VolumeInput in, ResolveVolumePath(source.path(), what, roots, max_volume_bytes));
      return std::optional<VolumeInput>(std::move(in));
    }
    case v1::VolumeSource::kUploadId:
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": upload_id '", source.upload_id(),
          "' names a volume held in one server's memory, which a scheduled job cannot rely on (it may run later, "
          "on another worker, or after a restart); give a server path under the data roots instead"));
    case v1::VolumeSource::kFileId:
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": file_id '", source.file_id(),
          "' is resolved by RegistrationService (submit through it), not by the engine; give a server path"));
    default:
      if (required) return absl::InvalidArgumentError(absl::StrCat(what, ": set its path (a server path)"));
      return std::optional<VolumeInput>();
  }
}

}  // namespace

absl::StatusOr<std::shared_ptr<const RegistrationEngine>> RegistrationEngine::Create(
    const std::vector<std::string>& data_roots, int64_t max_volume_bytes, const std::string& default_device) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> roots, CanonicalDataRoots(data_roots));
  if (max_volume_bytes <= 0) return absl::InvalidArgumentError("max_volume_bytes must be positive");
  TESSERA_RETURN_IF_ERROR(CheckDeviceName(default_device, "default device"));
  return std::shared_ptr<const RegistrationEngine>(
      new RegistrationEngine(std::move(roots), max_volume_bytes, default_device));
}

absl::StatusOr<RegisterJobPlan> RegistrationEngine::MakePlan(const v1::RegisterRequest& request) const {
  RegisterJobPlan plan;
  TESSERA_ASSIGN_OR_RETURN(RegistrationOptions options, ParseRegistrationOptions(request.options(), default_device_));
  TESSERA_ASSIGN_OR_RETURN(plan.registration, PlanRegistration(options));
  plan.request = request;
  return plan;
}

absl::StatusOr<RequestSpec> RegistrationEngine::Resolve(const v1::RegisterRequest& request) const {
  TESSERA_ASSIGN_OR_RETURN(RegisterJobPlan plan, MakePlan(request));
  return ResolvePlan(plan);
}

absl::StatusOr<RequestSpec> RegistrationEngine::ResolvePlan(const RegisterJobPlan& plan) const {
  const v1::RegisterRequest& request = plan.request;
  RequestSpec spec;
  spec.plan = plan.registration;
  spec.inverse_warp = request.options().inverse_warp();
  spec.max_volume_bytes = max_volume_bytes_;
  RequestInputs& in = spec.inputs;
  TESSERA_ASSIGN_OR_RETURN(std::optional<VolumeInput> fixed,
                           ResolveSource(request.fixed(), "fixed", true, roots_, max_volume_bytes_));
  TESSERA_ASSIGN_OR_RETURN(std::optional<VolumeInput> moving,
                           ResolveSource(request.moving(), "moving", true, roots_, max_volume_bytes_));
  TESSERA_ASSIGN_OR_RETURN(in.fixed_labels,
                           ResolveSource(request.fixed_labels(), "fixed labels", false, roots_, max_volume_bytes_));
  TESSERA_ASSIGN_OR_RETURN(in.moving_labels,
                           ResolveSource(request.moving_labels(), "moving labels", false, roots_, max_volume_bytes_));
  in.fixed = *std::move(fixed);
  in.moving = *std::move(moving);
  // Issue 34: masks (read when the job runs) and the start transform (read
  // now, so a malformed file fails at submit).
  TESSERA_ASSIGN_OR_RETURN(in.fixed_mask,
                           ResolveSource(request.fixed_mask(), "fixed mask", false, roots_, max_volume_bytes_));
  TESSERA_ASSIGN_OR_RETURN(in.moving_mask,
                           ResolveSource(request.moving_mask(), "moving mask", false, roots_, max_volume_bytes_));
  if (in.fixed_mask || in.moving_mask) TESSERA_RETURN_IF_ERROR(CheckMaskResidency(spec.plan.options));
  TESSERA_ASSIGN_OR_RETURN(in.initial_transform, ReadInitialTransform(request.initial_transform(), roots_));
  // DICOM outputs keep the fixed image's patient and study by default: the
  // warped image lies on its grid.
  TESSERA_ASSIGN_OR_RETURN(spec.output,
                           ResolveOutputOptions(request.output(), roots_, in.fixed.path, max_volume_bytes_));
  // The warped image holds the moving image's values: CT numbers when it is a
  // CT series (then a CT Image Storage result with a CT reference).
  spec.output.image_values_hounsfield = !in.moving.path.empty() && dicom::PeekDicomModality(in.moving.path) == "CT";
  if (!request.output_dir().empty()) {
    absl::StatusOr<std::string> dir = ResolveOutputDirUnderRoots(request.output_dir(), roots_);
    if (!dir.ok()) return Annotate(dir.status(), "output_dir");
    spec.output_dir = *std::move(dir);
  }
  return spec;
}

absl::Status RegistrationEngine::CheckPlan(const RegisterJobPlan& plan) const { return ResolvePlan(plan).status(); }

jobs::ResourceNeeds RegistrationEngine::NeedsOf(const RegisterJobPlan& plan) const {
  jobs::ResourceNeeds needs;
  needs.needs_gpu = plan.registration.options.device == "cuda";
  if (plan.registration.options.device == "cpu" || !plan.request.fixed().has_path()) return needs;
  absl::StatusOr<std::string> path = ResolveUnderRoots(plan.request.fixed().path(), roots_);
  if (!path.ok()) return needs;
  absl::StatusOr<int64_t> voxels = NiftiSpatialVoxels(*path);
  if (voxels.ok()) needs.device_bytes = kDeviceBytesPerFixedVoxel * *voxels;
  return needs;
}

absl::StatusOr<jobs::EngineOutput> RegistrationEngine::RunPlan(const RegisterJobPlan& plan,
                                                               jobs::EngineContext& ctx) const {
  TESSERA_ASSIGN_OR_RETURN(RequestSpec resolved, ResolvePlan(plan));
  TESSERA_RETURN_IF_ERROR(ctx.CheckContinue());

  RequestRunContext run;
  run.job_id = ctx.job_id();
  run.work_dir = ctx.work_dir();
  run.report = [&ctx](const jobs::JobProgress& progress) { ctx.Report(progress); };
  run.cancel = ctx.cancel_flag();
  run.deadline = ctx.deadline();
  // The job's own device memory, whatever else runs in this process.
  auto memory = std::make_shared<DeviceMemoryTracker>();
  absl::StatusOr<RequestOutcome> outcome;
  {
    ScopedDeviceMemoryCharge charge(memory);
    outcome = RunRegistrationRequest(resolved, run);
  }
  ctx.SetPeakDeviceBytes(static_cast<int64_t>(memory->peak_bytes()));
  if (!outcome.ok()) return outcome.status();

  jobs::EngineOutput out;
  out.result.PackFrom(outcome->result);
  TESSERA_ASSIGN_OR_RETURN(out.files, jobs::DescribeWorkFiles(ctx.work_dir(), outcome->work_files));
  return out;
}

}  // namespace tessera::registration
