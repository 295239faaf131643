#include "services/registration/registration_service.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/device.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/nifti_io.h"
#include "common/status.h"
#include "services/common/chunked_upload.h"
#include "kernels/registration/pipeline/ants_transform_io.h"
#include "services/jobs/job_rpcs.h"
#include "services/server/auth.h"
#include "services/server/call_checks.h"

namespace tessera {

namespace fs = std::filesystem;
using jobs::JobRecord;

namespace {

constexpr jobs::ServiceJobKind kJob{"registration", "registration"};
constexpr char kUploadPrefix[] = "up-";  // VolumeStore ids; the names of upload files
constexpr jobs::UploadDir kUploads{"uploads", "upload directory", kUploadPrefix};
// UploadFile's files share the folder (and so its sweep): "up-f-<owner>-...".
constexpr char kFilePrefix[] = "up-f-";
const std::vector<std::string>& FileExtensions() {
  static const auto* kExtensions = new std::vector<std::string>{".nii", ".nii.gz", ".dcm", ".zip"};
  return *kExtensions;
}

absl::StatusOr<std::string> ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::DataLossError(absl::StrCat("cannot read ", path));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return absl::DataLossError(absl::StrCat("cannot read ", path));
  return bytes;
}

}  // namespace

std::string RegistrationUploadDir(const std::string& state_dir) { return kUploads.Path(state_dir); }

absl::StatusOr<std::string> CreateRegistrationUploadDir(const std::string& state_dir) {
  return kUploads.Create(state_dir);
}

namespace {

// The server files a stored registration job names.
std::vector<std::string> NamedFiles(const JobRecord& job) {
  std::vector<std::string> files;
  v1::RegisterRequest request;
  if (!jobs::UnpackJobSpec(job, &request)) return files;
  for (const v1::VolumeSource* source :
       {&request.fixed(), &request.moving(), &request.fixed_labels(), &request.moving_labels(), &request.fixed_mask(),
        &request.moving_mask()}) {
    if (source->has_path()) files.push_back(source->path());
  }
  return files;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RegistrationServiceImpl>> RegistrationServiceImpl::Create(
    const ServerOptions& options, RegistrationServiceOptions service_options) {
  if (options.max_volume_bytes <= 0) return absl::InvalidArgumentError("max_volume_bytes must be positive");
  TESSERA_RETURN_IF_ERROR(ResolveBackend(options.device).status());
  if (service_options.upload_store_bytes < 0 || service_options.download_chunk_bytes <= 0) {
    return absl::InvalidArgumentError("upload store and chunk sizes must be positive");
  }
  if (service_options.upload_file_grace < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("upload_file_grace must not be negative");
  }
  if (service_options.upload_store_bytes == 0) {
    service_options.upload_store_bytes =
        options.max_volume_bytes > std::numeric_limits<int64_t>::max() / 4 ? std::numeric_limits<int64_t>::max()
                                                                            : 4 * options.max_volume_bytes;
  }
  return std::unique_ptr<RegistrationServiceImpl>(new RegistrationServiceImpl(options, service_options));
}

RegistrationServiceImpl::RegistrationServiceImpl(const ServerOptions& options,
                                                 RegistrationServiceOptions service_options)
    : max_volume_bytes_(options.max_volume_bytes),
      max_send_message_bytes_(options.max_send_message_bytes),
      service_options_(service_options),
      uploads_(VolumeStore::Options{service_options.upload_store_bytes, service_options.upload_ttl, 1024}),
      jobs_({kJob, {kUploads, service_options.upload_file_grace, service_options.upload_sweep_interval, NamedFiles}}),
      files_({kFilePrefix, FileExtensions(), options.max_volume_bytes, 0}),
      apply_jobs_(ApplyTransformsJobCoreOptions(service_options.upload_file_grace, service_options.upload_sweep_interval)) {}

// The jobs are the scheduler's: they outlive the service.
RegistrationServiceImpl::~RegistrationServiceImpl() = default;

absl::Status RegistrationServiceImpl::AttachScheduler(scheduler::Scheduler* scheduler, const std::string& state_dir) {
  TESSERA_RETURN_IF_ERROR(jobs_.Attach(scheduler, state_dir));
  return apply_jobs_.Attach(scheduler, state_dir);
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
  TESSERA_RETURN_IF_ERROR(jobs_.scheduler().status());  // no Register here to use it
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

grpc::Status RegistrationServiceImpl::UploadFile(grpc::ServerContext* context,
                                                 grpc::ServerReader<v1::FileChunk>* reader,
                                                 v1::UploadedFile* response) {
  if (absl::Status jobs = jobs_.scheduler().status(); !jobs.ok()) return ToGrpcStatus(jobs);
  return ToGrpcStatus(
      files_.ReceiveInto(*context, reader, jobs_.upload_dir(), CallPrincipal(context), "registration", response));
}

absl::StatusOr<std::string> RegistrationServiceImpl::UploadedFilePath(const std::string& file_id,
                                                                      absl::string_view what) const {
  const std::string field = absl::StrCat(what, ": file_id");
  TESSERA_ASSIGN_OR_RETURN(std::string path, files_.PathOf(jobs_.upload_dir(), file_id, field));
  // Touched, so that a sweep leaves it to the job about to be submitted.
  if (!jobs::ReuseUploadFiles({path})) {
    return absl::NotFoundError(absl::StrCat(field, " '", file_id,
                                            "' names no uploaded file (unknown, or deleted after its grace period)"));
  }
  return path;
}

absl::StatusOr<std::string> RegistrationServiceImpl::WriteUploadFile(const std::string& upload_id,
                                                                     const Volume& volume) {
  if (!absl::StartsWith(upload_id, kUploadPrefix) || upload_id.find('/') != std::string::npos) {
    return absl::InternalError(absl::StrCat("unexpected upload id '", upload_id, "'"));
  }
  const std::string path = (fs::path(jobs_.upload_dir()) / absl::StrCat(upload_id, ".nii")).string();
  if (jobs::ReuseUploadFiles({path})) return path;  // written for an earlier job
  // Uncompressed: gzip of a 1 mm volume would take seconds of the Register call.
  // WriteNifti writes a temporary file and renames it into place.
  TESSERA_RETURN_IF_ERROR(WriteNifti(volume, path));
  return path;
}

absl::StatusOr<v1::RegisterRequest> RegistrationServiceImpl::DurableRequest(const v1::RegisterRequest& request) {
  v1::RegisterRequest out = request;
  const std::pair<v1::VolumeSource*, const char*> sources[] = {{out.mutable_fixed(), "fixed"},
                                                                {out.mutable_moving(), "moving"},
                                                                {out.mutable_fixed_labels(), "fixed labels"},
                                                                {out.mutable_moving_labels(), "moving labels"},
                                                                {out.mutable_fixed_mask(), "fixed mask"},
                                                                {out.mutable_moving_mask(), "moving mask"}};
  for (const auto& [source, what] : sources) {
    if (source->source_case() != v1::VolumeSource::kFileId) continue;
    TESSERA_ASSIGN_OR_RETURN(std::string path, UploadedFilePath(source->file_id(), what));
    source->set_path(path);
  }
  std::map<std::string, Volume> volumes;  // by upload id
  for (const auto& [source, what] : sources) {
    if (source->source_case() != v1::VolumeSource::kUploadId || volumes.count(source->upload_id()) > 0) continue;
    absl::StatusOr<Volume> volume = uploads_.Get(source->upload_id());
    if (!volume.ok()) return Annotate(volume.status(), what);
    volumes.emplace(source->upload_id(), *std::move(volume));
  }
  // What can be checked of uploads now (files are read when the job runs).
  const auto upload = [&](const v1::VolumeSource& source) -> const Volume* {
    return source.source_case() == v1::VolumeSource::kUploadId ? &volumes.at(source.upload_id()) : nullptr;
  };
  for (const auto& [source, what] : {sources[0], sources[1]}) {
    const Volume* v = upload(*source);
    if (v != nullptr && v->data.rank() != 3) {
      return absl::InvalidArgumentError(absl::StrCat(what, " image must be a 3-D scalar volume; the upload is ",
                                                     ShapeToString(v->data.shape())));
    }
  }
  const Volume* fixed = upload(out.fixed());
  const Volume* fixed_labels = upload(out.fixed_labels());
  if (fixed != nullptr && fixed_labels != nullptr && fixed_labels->data.shape() != fixed->data.shape()) {
    return absl::InvalidArgumentError(absl::StrCat("fixed labels ", ShapeToString(fixed_labels->data.shape()),
                                                   " do not match the fixed image ",
                                                   ShapeToString(fixed->data.shape())));
  }
  std::map<std::string, std::string> paths;  // upload id -> file
  for (const auto& [id, volume] : volumes) {
    absl::StatusOr<std::string> path = WriteUploadFile(id, volume);
    if (!path.ok()) return Annotate(path.status(), absl::StrCat("writing upload ", id));
    paths[id] = *std::move(path);
  }
  for (const auto& [source, what] : sources) {
    if (source->source_case() == v1::VolumeSource::kUploadId) source->set_path(paths.at(source->upload_id()));
  }
  return out;
}

// ---------------------------------------------------------------- register

grpc::Status RegistrationServiceImpl::Register(grpc::ServerContext* context, const v1::RegisterRequest* request,
                                               v1::JobStatus* response) {
  // Idempotent on job_id (the job core decides it before anything else);
  // the engine checks the options and inputs when the scheduler takes the
  // job (once per job: TypedEngine's plan).
  absl::StatusOr<jobs::SubmittedJob> job =
      jobs_.Submit({jobs::CallerOf(*context), request, request->job_id(), "job_id",
                    [&] { return jobs::SpecOf(DurableRequest(*request)); }});
  if (job.ok()) *response = jobs::ToJobStatus(job->info);
  return jobs::JobRpcStatus(*context, job.status());
}

// ---------------------------------------------------------------- job queries

grpc::Status RegistrationServiceImpl::WatchJob(grpc::ServerContext* context, const v1::JobRef* request,
                                               grpc::ServerWriter<v1::Progress>* writer) {
  return jobs::WatchJobRpc(CoreFor(*context, request->job_id()), *context, *request, writer);
}

grpc::Status RegistrationServiceImpl::GetJob(grpc::ServerContext* context, const v1::JobRef* request,
                                             v1::JobStatus* response) {
  return jobs::Respond(CoreFor(*context, request->job_id()).Get(jobs::CallerOf(*context), request->job_id()), response);
}

grpc::Status RegistrationServiceImpl::CancelJob(grpc::ServerContext* context, const v1::JobRef* request,
                                                v1::JobStatus* response) {
  return jobs::Respond(CoreFor(*context, request->job_id()).Cancel(jobs::CallerOf(*context), request->job_id()),
                       response);
}

grpc::Status RegistrationServiceImpl::GetResult(grpc::ServerContext* context, const v1::JobRef* request,
                                                v1::RegistrationResult* response) {
  return jobs::Respond(jobs_.TypedResult<v1::RegistrationResult>(jobs::CallerOf(*context), request->job_id()), response);
}

grpc::Status RegistrationServiceImpl::DownloadResult(grpc::ServerContext* context, const v1::DownloadRequest* request,
                                                     grpc::ServerWriter<v1::ArrayChunk>* writer) {
  return ToGrpcStatus(DownloadResultImpl(*context, *request, writer));
}

absl::Status RegistrationServiceImpl::DownloadResultImpl(const grpc::ServerContext& context,
                                                         const v1::DownloadRequest& request,
                                                         grpc::ServerWriter<v1::ArrayChunk>* writer) {
  TESSERA_ASSIGN_OR_RETURN(JobRecord job, jobs_.Find(jobs::CallerOf(context), request.job_id()));
  if (request.chunk_bytes() < 0) return absl::InvalidArgumentError("chunk_bytes must not be negative");
  const int64_t chunk_bytes =
      DownloadChunkBytes(request.chunk_bytes(), service_options_.download_chunk_bytes, max_send_message_bytes_);
  const v1::RegistrationArtifact artifact = request.artifact();
  if (artifact == v1::REGISTRATION_ARTIFACT_UNSPECIFIED || !v1::RegistrationArtifact_IsValid(artifact)) {
    return absl::InvalidArgumentError(absl::StrCat("artifact ", static_cast<int>(artifact),
                                                   " is not one of WARPED, WARPED_LABELS, WARP, INVERSE_WARP, AFFINE"));
  }
  TESSERA_ASSIGN_OR_RETURN(v1::JobResult result, jobs_.Result(jobs::CallerOf(context), job.job_id));
  v1::RegistrationResult summary;
  if (!result.result().UnpackTo(&summary)) {
    return absl::DataLossError(absl::StrCat("job '", job.job_id, "' has no registration result"));
  }
  const auto produced = [&](v1::RegistrationArtifact a) {
    return std::find(summary.artifacts().begin(), summary.artifacts().end(), a) != summary.artifacts().end();
  };
  const auto missing = [&](const char* why) {
    return absl::NotFoundError(
        absl::StrCat("job '", job.job_id, "' has no ", v1::RegistrationArtifact_Name(artifact), ": ", why));
  };
  // The result file `name` (under <state dir>/results/<job id>/).
  const auto file = [&](const char* name) { return jobs::JobCore::ResultFile(result, name); };
  const auto send_volume = [&](const Volume& volume, DType dtype, const char* description) -> absl::Status {
    TESSERA_ASSIGN_OR_RETURN(NDArray array, volume.data.AsType(dtype));
    return SendChunkedArray(context, writer, VolumeHeaderOf(array, &volume.geometry, description), array.raw_data(),
                            static_cast<int64_t>(array.nbytes()), chunk_bytes);
  };
  // A result file that is gone (state directory damaged) is DATA_LOSS, not
  // an unknown artifact.
  const auto lost = [&](const absl::Status& status) {
    return status.code() == absl::StatusCode::kNotFound ? absl::DataLossError(status.message()) : status;
  };
  switch (artifact) {
    case v1::REGISTRATION_ARTIFACT_WARPED:
    case v1::REGISTRATION_ARTIFACT_WARPED_LABELS: {
      const bool labels = artifact == v1::REGISTRATION_ARTIFACT_WARPED_LABELS;
      if (!produced(artifact)) {
        // output.format dicom wrote no NIfTI of it: its DICOM form is among the job's files.
        const char* dicom = labels ? "warped_labels_seg.dcm" : "warped_dicom/IM00001.dcm";
        if (file(dicom).ok()) return missing("the request asked for DICOM outputs only (output.format dicom): read "
                                             "warped_dicom/ or warped_labels_seg.dcm from the job's result files");
        if (labels) return missing("the request had no moving labels");
      }
      TESSERA_ASSIGN_OR_RETURN(std::string path, file(labels ? "warped_labels.nii.gz" : "warped.nii.gz"));
      absl::StatusOr<Volume> volume = ReadNifti(path);
      if (!volume.ok()) return lost(volume.status());
      return labels ? send_volume(*volume, DType::kInt32, "tessera warped labels")
                    : send_volume(*volume, DType::kFloat32, "tessera warped moving image");
    }
    case v1::REGISTRATION_ARTIFACT_WARP:
    case v1::REGISTRATION_ARTIFACT_INVERSE_WARP: {
      const bool inverse = artifact == v1::REGISTRATION_ARTIFACT_INVERSE_WARP;
      if (!produced(artifact)) {
        return missing(!produced(v1::REGISTRATION_ARTIFACT_WARP) ? "the registration had no deformable stage"
                                                                 : "the request did not ask for options.inverse_warp");
      }
      // The files hold ANTs (LPS) vectors; the API sends RAS mm, planar.
      TESSERA_ASSIGN_OR_RETURN(std::string path, file(inverse ? "0InverseWarp.nii.gz" : "0Warp.nii.gz"));
      absl::StatusOr<Volume> field = registration::ReadAntsWarp(path);
      if (!field.ok()) return lost(field.status());
      return send_volume(*field, DType::kFloat32,
                         inverse ? "tessera inverse displacement (RAS mm, planar x, y, z)"
                                 : "tessera displacement (RAS mm, planar x, y, z)");
    }
    case v1::REGISTRATION_ARTIFACT_AFFINE: {
      TESSERA_ASSIGN_OR_RETURN(std::string path, file("0GenericAffine.mat"));
      TESSERA_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(path));
      v1::VolumeHeader header;
      header.add_dims(static_cast<int64_t>(bytes.size()));
      header.set_dtype(v1::DTYPE_UINT8);
      header.set_description("0GenericAffine.mat (ITK MATLAB v4, fixed -> moving, LPS)");
      return SendChunkedArray(context, writer, header, bytes.data(), static_cast<int64_t>(bytes.size()),
                              std::max<int64_t>(1, static_cast<int64_t>(bytes.size())));
    }
    default:
      return absl::InvalidArgumentError("unknown artifact");
  }
}

}  // namespace tessera
