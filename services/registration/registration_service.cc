#include "services/registration/registration_service.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/device.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/status.h"
#include "services/common/chunked_upload.h"
#include "services/common/data_roots.h"
#include "services/jobs/job_proto.h"
#include "services/jobs/watch.h"
#include "services/registration/request_options.h"
#include "services/server/call_checks.h"

namespace tessera {

using jobs::IsTerminal;
using jobs::Job;
using jobs::JobSnapshot;
using jobs::JobState;

namespace {

constexpr char kJobKind[] = "registration";

// The result a succeeded job keeps in memory for GetResult/DownloadResult.
struct RegistrationPayload : jobs::JobPayload {
  explicit RegistrationPayload(registration::RequestOutcome o) : outcome(std::move(o)) {}
  registration::RequestOutcome outcome;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RegistrationServiceImpl>> RegistrationServiceImpl::Create(
    const ServerOptions& options, RegistrationServiceOptions service_options) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> roots, CanonicalDataRoots(options.data_roots));
  if (options.max_volume_bytes <= 0) return absl::InvalidArgumentError("max_volume_bytes must be positive");
  TESSERA_RETURN_IF_ERROR(ResolveBackend(options.device).status());
  if (service_options.workers < 1) return absl::InvalidArgumentError("workers must be at least 1");
  if (service_options.max_queued_jobs < 0 || service_options.max_finished_jobs < 0) {
    return absl::InvalidArgumentError("job limits must not be negative");
  }
  if (service_options.upload_store_bytes < 0 || service_options.download_chunk_bytes <= 0) {
    return absl::InvalidArgumentError("upload store and chunk sizes must be positive");
  }
  if (service_options.upload_store_bytes == 0) {
    service_options.upload_store_bytes =
        options.max_volume_bytes > std::numeric_limits<int64_t>::max() / 4 ? std::numeric_limits<int64_t>::max()
                                                                            : 4 * options.max_volume_bytes;
  }
  return std::unique_ptr<RegistrationServiceImpl>(
      new RegistrationServiceImpl(options, std::move(roots), service_options));
}

RegistrationServiceImpl::RegistrationServiceImpl(const ServerOptions& options, std::vector<std::string> roots,
                                                 RegistrationServiceOptions service_options)
    : roots_(std::move(roots)),
      max_volume_bytes_(options.max_volume_bytes),
      max_send_message_bytes_(options.max_send_message_bytes),
      default_device_(options.device),
      service_options_(service_options),
      uploads_(VolumeStore::Options{service_options.upload_store_bytes, service_options.upload_ttl, 1024}),
      registry_(jobs::JobRegistryOptions{service_options.max_finished_jobs, service_options.finished_job_ttl}),
      pool_(service_options.workers, service_options.max_queued_jobs) {}

RegistrationServiceImpl::~RegistrationServiceImpl() {
  registry_.CancelAll();
  pool_.Shutdown();
}

// ---------------------------------------------------------------- uploads

grpc::Status RegistrationServiceImpl::UploadVolume(grpc::ServerContext* context,
                                                   grpc::ServerReader<v1::ArrayChunk>* reader,
                                                   v1::UploadedVolume* response) {
  return ToGrpcStatus(UploadVolumeImpl(*context, reader, response));
}

absl::Status RegistrationServiceImpl::UploadVolumeImpl(const grpc::ServerContext& context,
                                                       grpc::ServerReader<v1::ArrayChunk>* reader,
                                                       v1::UploadedVolume* response) {
  VolumeStore::Reservation space;
  TESSERA_ASSIGN_OR_RETURN(ReceivedArray received,
                           ReceiveChunkedArray(context, reader, max_volume_bytes_,
                                               [&](const ArrayHeader& header) -> absl::Status {
                                                 TESSERA_ASSIGN_OR_RETURN(space, uploads_.Reserve(header.nbytes));
                                                 return absl::OkStatus();
                                               }));
  Volume volume{received.data, received.header.geometry, received.header_proto.description()};
  TESSERA_ASSIGN_OR_RETURN(VolumeStore::Entry entry, uploads_.Commit(std::move(space), std::move(volume)));
  response->set_upload_id(entry.id);
  *response->mutable_header() = received.header_proto;
  response->set_nbytes(entry.nbytes);
  response->set_expires_unix_ms(absl::ToUnixMillis(entry.expires));
  TESSERA_LOG(INFO) << "registration: upload " << entry.id << " " << ShapeToString(received.header.shape) << " "
                    << DTypeName(received.header.dtype) << " (" << entry.nbytes << " bytes)";
  return absl::OkStatus();
}

// ---------------------------------------------------------------- register

absl::StatusOr<std::shared_ptr<const RegistrationServiceImpl::JobSpec>> RegistrationServiceImpl::PrepareJob(
    const v1::RegisterRequest& request) {
  auto spec = std::make_shared<JobSpec>();
  TESSERA_ASSIGN_OR_RETURN(spec->options, registration::ToRegistrarOptions(request.options(), default_device_));
  spec->inverse_warp = request.options().inverse_warp();
  spec->max_volume_bytes = max_volume_bytes_;

  const auto resolve = [&](const v1::VolumeSource& source, const char* what,
                           bool required) -> absl::StatusOr<std::optional<registration::VolumeInput>> {
    switch (source.source_case()) {
      case v1::VolumeSource::kPath: {
        TESSERA_ASSIGN_OR_RETURN(registration::VolumeInput in,
                                 registration::ResolveVolumePath(source.path(), what, roots_, max_volume_bytes_));
        return std::optional<registration::VolumeInput>(std::move(in));
      }
      case v1::VolumeSource::kUploadId: {
        absl::StatusOr<Volume> volume = uploads_.Get(source.upload_id());
        if (!volume.ok()) return Annotate(volume.status(), what);
        registration::VolumeInput in;
        in.what = what;
        in.volume = *std::move(volume);
        return std::optional<registration::VolumeInput>(std::move(in));
      }
      default:
        if (required) return absl::InvalidArgumentError(absl::StrCat(what, ": set its path or upload_id"));
        return std::optional<registration::VolumeInput>();
    }
  };
  registration::RequestInputs& inputs = spec->inputs;
  TESSERA_ASSIGN_OR_RETURN(std::optional<registration::VolumeInput> fixed, resolve(request.fixed(), "fixed", true));
  TESSERA_ASSIGN_OR_RETURN(std::optional<registration::VolumeInput> moving, resolve(request.moving(), "moving", true));
  TESSERA_ASSIGN_OR_RETURN(inputs.fixed_labels, resolve(request.fixed_labels(), "fixed labels", false));
  TESSERA_ASSIGN_OR_RETURN(inputs.moving_labels, resolve(request.moving_labels(), "moving labels", false));
  inputs.fixed = *std::move(fixed);
  inputs.moving = *std::move(moving);

  // What can be checked of uploads now (files are read by the worker).
  for (const registration::VolumeInput* in : {&inputs.fixed, &inputs.moving}) {
    if (in->volume && in->volume->data.rank() != 3) {
      return absl::InvalidArgumentError(absl::StrCat(in->what, " image must be a 3-D scalar volume; the upload is ",
                                                     ShapeToString(in->volume->data.shape())));
    }
  }
  if (inputs.fixed.volume && inputs.fixed_labels && inputs.fixed_labels->volume &&
      inputs.fixed_labels->volume->data.shape() != inputs.fixed.volume->data.shape()) {
    return absl::InvalidArgumentError(absl::StrCat("fixed labels ",
                                                   ShapeToString(inputs.fixed_labels->volume->data.shape()),
                                                   " do not match the fixed image ",
                                                   ShapeToString(inputs.fixed.volume->data.shape())));
  }
  if (!request.output_dir().empty()) {
    absl::StatusOr<std::string> dir = ResolveOutputDirUnderRoots(request.output_dir(), roots_);
    if (!dir.ok()) return Annotate(dir.status(), "output_dir");
    spec->output_dir = *std::move(dir);
  }
  return std::shared_ptr<const JobSpec>(std::move(spec));
}

grpc::Status RegistrationServiceImpl::Register(grpc::ServerContext* /*context*/, const v1::RegisterRequest* request,
                                               v1::JobStatus* response) {
  return ToGrpcStatus(RegisterImpl(*request, response));
}

absl::Status RegistrationServiceImpl::RegisterImpl(const v1::RegisterRequest& request, v1::JobStatus* response) {
  const std::string& id = request.job_id();
  if (!id.empty()) {
    TESSERA_RETURN_IF_ERROR(Annotate(jobs::JobRegistry::ValidateJobId(id), "job_id"));
    // Idempotent: a known id returns its job, whatever the rest says.
    absl::StatusOr<std::shared_ptr<Job>> existing = registry_.Get(id);
    if (existing.ok()) {
      *response = jobs::ToJobStatusProto((*existing)->Snapshot());
      return absl::OkStatus();
    }
  }
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const JobSpec> spec, PrepareJob(request));
  std::lock_guard<std::mutex> lock(submit_mu_);
  bool created = false;
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Job> job, registry_.GetOrCreate(id, kJobKind, &created));
  if (created) {
    absl::Status queued = pool_.TrySubmit([this, job, spec] { RunJob(job, spec); });
    if (!queued.ok()) {
      registry_.Remove(job->id());
      return queued;
    }
    TESSERA_LOG(INFO) << "registration: job " << job->id() << " queued: " << spec->inputs.fixed.description()
                      << " <- " << spec->inputs.moving.description() << ", " << spec->options.metric << " ["
                      << absl::StrJoin(spec->options.stages, ",") << "] scales ["
                      << absl::StrJoin(spec->options.scales, ",") << "]";
  }
  *response = jobs::ToJobStatusProto(job->Snapshot());
  return absl::OkStatus();
}

// ---------------------------------------------------------------- the worker

void RegistrationServiceImpl::RunJob(const std::shared_ptr<Job>& job, const std::shared_ptr<const JobSpec>& spec) {
  if (!job->Start()) return;  // cancelled while queued
  TESSERA_LOG(INFO) << "registration: job " << job->id() << " running";
  registration::RequestRunContext context;
  context.job_id = job->id();
  context.report = [job](const jobs::JobProgress& progress) { job->SetProgress(progress); };
  context.cancel = job->cancel_flag();
  absl::StatusOr<registration::RequestOutcome> outcome = registration::RunRegistrationRequest(*spec, context);
  if (outcome.ok()) {
    const v1::RegistrationResult& r = outcome->result;
    TESSERA_LOG(INFO) << "registration: job " << job->id() << " succeeded in " << r.seconds() << " s, loss "
                      << r.initial_loss() << " -> " << r.final_loss();
    job->Succeed(std::make_shared<const RegistrationPayload>(*std::move(outcome)));
  } else {
    TESSERA_LOG(INFO) << "registration: job " << job->id() << " ended: " << outcome.status();
    job->Fail(outcome.status());
  }
}

// ---------------------------------------------------------------- job queries

grpc::Status RegistrationServiceImpl::WatchJob(grpc::ServerContext* context, const v1::JobRequest* request,
                                               grpc::ServerWriter<v1::Progress>* writer) {
  return ToGrpcStatus(WatchJobImpl(*context, *request, writer));
}

absl::Status RegistrationServiceImpl::WatchJobImpl(const grpc::ServerContext& context, const v1::JobRequest& request,
                                                   grpc::ServerWriter<v1::Progress>* writer) {
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Job> job, registry_.Get(request.job_id()));
  return jobs::WatchJobSnapshots(context, *job, service_options_.watch_interval, [&](const JobSnapshot& s) {
    return writer->Write(jobs::ToProgressProto(s));
  });
}

grpc::Status RegistrationServiceImpl::GetJob(grpc::ServerContext* /*context*/, const v1::JobRequest* request,
                                             v1::JobStatus* response) {
  absl::StatusOr<v1::JobStatus> status = jobs::GetJobStatus(registry_, request->job_id());
  if (!status.ok()) return ToGrpcStatus(status.status());
  *response = *std::move(status);
  return grpc::Status::OK;
}

grpc::Status RegistrationServiceImpl::CancelJob(grpc::ServerContext* /*context*/, const v1::JobRequest* request,
                                                v1::JobStatus* response) {
  absl::StatusOr<v1::JobStatus> status = jobs::RequestJobCancel(registry_, request->job_id(), "registration");
  if (!status.ok()) return ToGrpcStatus(status.status());
  *response = *std::move(status);
  return grpc::Status::OK;
}

namespace {

// The payload of a succeeded job, or why there is none.
absl::StatusOr<std::shared_ptr<const RegistrationPayload>> SucceededPayload(const JobSnapshot& s) {
  switch (s.state) {
    case JobState::kQueued:
    case JobState::kRunning:
      return absl::FailedPreconditionError(absl::StrCat("job '", s.id, "' is ", jobs::JobStateName(s.state),
                                                        "; its result is ready once it has SUCCEEDED (WatchJob)"));
    case JobState::kCancelled:
      return absl::FailedPreconditionError(absl::StrCat("job '", s.id, "' was cancelled; it has no result"));
    case JobState::kFailed:
      return absl::Status(s.error.code(), absl::StrCat("job '", s.id, "' failed: ", s.error.message()));
    case JobState::kSucceeded:
      break;
  }
  auto payload = std::dynamic_pointer_cast<const RegistrationPayload>(s.result);
  if (payload == nullptr) return absl::InternalError(absl::StrCat("job '", s.id, "' has no registration result"));
  return payload;
}

}  // namespace

grpc::Status RegistrationServiceImpl::GetResult(grpc::ServerContext* /*context*/, const v1::JobRequest* request,
                                                v1::RegistrationResult* response) {
  return ToGrpcStatus(GetResultImpl(*request, response));
}

absl::Status RegistrationServiceImpl::GetResultImpl(const v1::JobRequest& request, v1::RegistrationResult* response) {
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Job> job, registry_.Get(request.job_id()));
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const RegistrationPayload> payload, SucceededPayload(job->Snapshot()));
  *response = payload->outcome.result;
  return absl::OkStatus();
}

grpc::Status RegistrationServiceImpl::DownloadResult(grpc::ServerContext* context, const v1::DownloadRequest* request,
                                                     grpc::ServerWriter<v1::ArrayChunk>* writer) {
  return ToGrpcStatus(DownloadResultImpl(*context, *request, writer));
}

absl::Status RegistrationServiceImpl::DownloadResultImpl(const grpc::ServerContext& context,
                                                         const v1::DownloadRequest& request,
                                                         grpc::ServerWriter<v1::ArrayChunk>* writer) {
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Job> job, registry_.Get(request.job_id()));
  if (request.chunk_bytes() < 0) return absl::InvalidArgumentError("chunk_bytes must not be negative");
  const int64_t largest = std::max<int64_t>(1024, int64_t{max_send_message_bytes_} - 4096);
  const int64_t chunk_bytes =
      std::clamp<int64_t>(request.chunk_bytes() > 0 ? request.chunk_bytes() : service_options_.download_chunk_bytes,
                          1, largest);
  if (request.artifact() == v1::REGISTRATION_ARTIFACT_UNSPECIFIED || !v1::RegistrationArtifact_IsValid(request.artifact())) {
    return absl::InvalidArgumentError(absl::StrCat("artifact ", static_cast<int>(request.artifact()),
                                                   " is not one of WARPED, WARPED_LABELS, WARP, INVERSE_WARP, AFFINE"));
  }
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const RegistrationPayload> payload, SucceededPayload(job->Snapshot()));
  const registration::RequestOutcome& outcome = payload->outcome;
  const registration::RegistrationSummary& summary = outcome.summary;
  const Geometry& geometry = outcome.fixed_geometry;
  const auto send_array = [&](const NDArray& array, const char* description) {
    return SendChunkedArray(context, writer, VolumeHeaderOf(array, &geometry, description), array.raw_data(),
                            static_cast<int64_t>(array.nbytes()), chunk_bytes);
  };
  const auto missing = [&](const char* why) {
    return absl::NotFoundError(absl::StrCat("job '", job->id(), "' has no ",
                                            v1::RegistrationArtifact_Name(request.artifact()), ": ", why));
  };
  switch (request.artifact()) {
    case v1::REGISTRATION_ARTIFACT_WARPED:
      return send_array(summary.result.warped.data, "tessera warped moving image");
    case v1::REGISTRATION_ARTIFACT_WARPED_LABELS:
      if (summary.warped_labels.empty()) return missing("the request had no moving labels");
      return send_array(summary.warped_labels, "tessera warped labels");
    case v1::REGISTRATION_ARTIFACT_WARP:
      if (summary.result.displacement_ras.empty()) return missing("the registration had no deformable stage");
      return send_array(summary.result.displacement_ras, "tessera displacement (RAS mm, planar x, y, z)");
    case v1::REGISTRATION_ARTIFACT_INVERSE_WARP:
      if (outcome.inverse_warp.empty()) {
        return missing(summary.result.displacement_ras.empty() ? "the registration had no deformable stage"
                                                               : "the request did not ask for options.inverse_warp");
      }
      return send_array(outcome.inverse_warp, "tessera inverse displacement (RAS mm, planar x, y, z)");
    case v1::REGISTRATION_ARTIFACT_AFFINE: {
      v1::VolumeHeader header;
      header.add_dims(static_cast<int64_t>(outcome.affine_mat.size()));
      header.set_dtype(v1::DTYPE_UINT8);
      header.set_description("0GenericAffine.mat (ITK MATLAB v4, fixed -> moving, LPS)");
      return SendChunkedArray(context, writer, header, outcome.affine_mat.data(),
                              static_cast<int64_t>(outcome.affine_mat.size()),
                              std::max<int64_t>(1, static_cast<int64_t>(outcome.affine_mat.size())));
    }
    default:
      return absl::InvalidArgumentError("unknown artifact");
  }
}

}  // namespace tessera
