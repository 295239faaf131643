// RegistrationService's apply-transforms RPCs (issue 34): thin adapters over
// the "apply_transforms" job core, as Register/GetResult are over the
// registration one.
#include <filesystem>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/nifti_io.h"
#include "common/status.h"
#include "services/jobs/job_rpcs.h"
#include "services/registration/registration_service.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

constexpr jobs::ServiceJobKind kApplyJob{"apply_transforms", "apply-transforms"};
constexpr jobs::UploadDir kApplyUploads{"apply_uploads", "apply-transforms upload directory", "up-"};

// The server files a stored apply-transforms job names (its upload files).
std::vector<std::string> ApplyNamedFiles(const jobs::JobRecord& job) {
  std::vector<std::string> files;
  v1::ApplyTransformsRequest request;
  if (!jobs::UnpackJobSpec(job, &request)) return files;
  for (const v1::VolumeSource* source : {&request.reference(), &request.input()}) {
    if (source->has_path()) files.push_back(source->path());
  }
  return files;
}

}  // namespace

std::string ApplyTransformsUploadDir(const std::string& state_dir) { return kApplyUploads.Path(state_dir); }

absl::StatusOr<std::string> CreateApplyTransformsUploadDir(const std::string& state_dir) {
  return kApplyUploads.Create(state_dir);
}

jobs::JobCoreOptions ApplyTransformsJobCoreOptions(absl::Duration upload_grace, absl::Duration sweep_interval) {
  return {kApplyJob, {kApplyUploads, upload_grace, sweep_interval, ApplyNamedFiles}};
}

const jobs::JobCore& RegistrationServiceImpl::CoreFor(const grpc::ServerContext& context,
                                                      const std::string& job_id) const {
  // A registration job unless the id names an apply-transforms job this
  // caller may see (the registration core then answers NOT_FOUND as before).
  if (!jobs_.Find(jobs::CallerOf(context), job_id).ok() && apply_jobs_.Find(jobs::CallerOf(context), job_id).ok()) {
    return apply_jobs_;
  }
  return jobs_;
}

absl::StatusOr<v1::ApplyTransformsRequest> RegistrationServiceImpl::DurableApplyRequest(
    const jobs::JobCaller& caller, const v1::ApplyTransformsRequest& request) {
  v1::ApplyTransformsRequest out = request;
  // Uploaded files (issue 35) are linked into this service's apply-transforms
  // upload folder, so that its sweep keeps them while this job may run.
  for (const auto& [source, what] : {std::pair<v1::VolumeSource*, const char*>{out.mutable_reference(), "reference"},
                                     {out.mutable_input(), "input"}}) {
    if (source->source_case() != v1::VolumeSource::kFileId) continue;
    TESSERA_ASSIGN_OR_RETURN(std::string uploaded, UploadedFilePath(source->file_id(), what));
    const std::string path = (fs::path(apply_jobs_.upload_dir()) / source->file_id()).string();
    if (!jobs::ReuseUploadFiles({path})) {
      std::error_code ec;
      fs::create_hard_link(uploaded, path, ec);
      if (ec && !fs::exists(path)) {
        return absl::InternalError(absl::StrCat(what, ": cannot link ", uploaded, " to ", path, ": ", ec.message()));
      }
    }
    source->set_path(path);
  }
  // Uploads become files of this service's apply-transforms upload folder.
  for (const auto& [source, what] : {std::pair<v1::VolumeSource*, const char*>{out.mutable_reference(), "reference"},
                                     {out.mutable_input(), "input"}}) {
    if (source->source_case() != v1::VolumeSource::kUploadId) continue;
    const std::string id = source->upload_id();
    absl::StatusOr<Volume> volume = uploads_.Get(id);
    if (!volume.ok()) return Annotate(volume.status(), what);
    if (id.find('/') != std::string::npos || id.rfind(kApplyUploads.prefix, 0) != 0) {
      return absl::InternalError(absl::StrCat("unexpected upload id '", id, "'"));
    }
    const std::string path = (fs::path(apply_jobs_.upload_dir()) / absl::StrCat(id, ".nii")).string();
    if (!jobs::ReuseUploadFiles({path})) {
      const absl::Status written = WriteNifti(*volume, path);
      if (!written.ok()) return Annotate(written, absl::StrCat("writing upload ", id));
    }
    source->set_path(path);
  }
  // A registration job is named by the caller's id (scheduler or client
  // job_id); the job must be one this caller may see, and have succeeded.
  for (v1::TransformSource& t : *out.mutable_transforms()) {
    if (t.source_case() != v1::TransformSource::kRegistrationJobId) continue;
    absl::StatusOr<jobs::JobRecord> job = jobs_.Find(caller, t.registration_job_id());
    if (!job.ok()) return Annotate(job.status(), "transforms: registration_job_id");
    const absl::Status succeeded = jobs::CheckSucceeded(*job);
    if (!succeeded.ok()) {
      return absl::FailedPreconditionError(absl::StrCat("transforms: registration job '", job->job_id,
                                                        "' has not succeeded: ", succeeded.message()));
    }
    t.set_registration_job_id(job->job_id);
  }
  return out;
}

grpc::Status RegistrationServiceImpl::ApplyTransforms(grpc::ServerContext* context,
                                                      const v1::ApplyTransformsRequest* request,
                                                      v1::JobStatus* response) {
  const jobs::JobCaller caller = jobs::CallerOf(*context);
  absl::StatusOr<jobs::SubmittedJob> job =
      apply_jobs_.Submit({caller, request, request->job_id(), "job_id",
                          [&] { return jobs::SpecOf(DurableApplyRequest(caller, *request)); }});
  if (job.ok()) *response = jobs::ToJobStatus(job->info);
  return jobs::JobRpcStatus(*context, job.status());
}

grpc::Status RegistrationServiceImpl::GetApplyTransformsResult(grpc::ServerContext* context, const v1::JobRef* request,
                                                               v1::ApplyTransformsResult* response) {
  return jobs::Respond(
      apply_jobs_.TypedResult<v1::ApplyTransformsResult>(jobs::CallerOf(*context), request->job_id()), response);
}

}  // namespace tessera
