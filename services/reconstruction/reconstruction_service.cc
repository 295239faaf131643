#include "services/reconstruction/reconstruction_service.h"

#include <algorithm>
#include <limits>
#include <filesystem>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/device.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/nifti_io.h"
#include "common/status.h"
#include "services/common/chunked_upload.h"
#include "services/common/file_upload.h"
#include "services/common/file_upload_area.h"
#include "services/jobs/job_rpcs.h"
#include "services/server/auth.h"
#include "services/server/call_checks.h"
#include "common/text_checks.h"

namespace tessera {

namespace fs = std::filesystem;
using jobs::JobRecord;

namespace {

constexpr jobs::ServiceJobKind kJob{"reconstruction", "reconstruction"};
constexpr char kUploadPrefix[] = "rf-";
constexpr jobs::UploadDir kUploads{"recon-uploads", "reconstruction upload directory", kUploadPrefix};
const std::vector<std::string>& UploadExtensions() {
  // MRI and ultrasound upload HDF5 files (ISMRMRD, PICMUS/UFF); BART's
  // .cfl/.hdr pairs are named by server path (an upload is one file).
  static const auto* kExtensions = new std::vector<std::string>{".nii", ".nii.gz", ".json", ".tslm", ".h5", ".uff"};
  return *kExtensions;
}

std::vector<v1::FileSource*> Sources(v1::ReconstructRequest& r) {
  std::vector<v1::FileSource*> out = {r.mutable_geometry()};
  if (r.has_sinogram()) out.push_back(r.mutable_sinogram());
  if (r.has_listmode()) out.push_back(r.mutable_listmode());
  if (r.has_pet() && r.pet().has_attenuation()) out.push_back(r.mutable_pet()->mutable_attenuation());
  if (r.has_pet() && r.pet().has_randoms()) out.push_back(r.mutable_pet()->mutable_randoms());
  if (r.has_pet() && r.pet().has_scatter()) out.push_back(r.mutable_pet()->mutable_scatter());
  if (r.has_pet() && r.pet().has_normalization()) out.push_back(r.mutable_pet()->mutable_normalization());
  if (r.has_mri()) {
    for (v1::FileSource* f : {r.mutable_mri()->mutable_kspace(), r.mutable_mri()->mutable_trajectory(),
                              r.mutable_mri()->mutable_coils()}) {
      out.push_back(f);
    }
  }
  if (r.has_ultrasound()) out.push_back(r.mutable_ultrasound()->mutable_channel_data());
  return out;
}

// The server files a stored reconstruction job names.
std::vector<std::string> NamedFiles(const JobRecord& job) {
  std::vector<std::string> files;
  v1::ReconstructRequest request;
  if (!jobs::UnpackJobSpec(job, &request)) return files;
  for (const v1::FileSource* source : Sources(request)) {
    if (source->has_path()) files.push_back(source->path());
  }
  return files;
}

}  // namespace

std::string ReconstructionUploadDir(const std::string& state_dir) { return kUploads.Path(state_dir); }

absl::StatusOr<std::string> CreateReconstructionUploadDir(const std::string& state_dir) {
  return kUploads.Create(state_dir);
}

absl::StatusOr<std::unique_ptr<ReconstructionServiceImpl>> ReconstructionServiceImpl::Create(
    const ServerOptions& options, ReconstructionServiceOptions service_options) {
  if (options.max_volume_bytes <= 0) return absl::InvalidArgumentError("max_volume_bytes must be positive");
  TESSERA_RETURN_IF_ERROR(ResolveBackend(options.device).status());
  if (service_options.download_chunk_bytes <= 0) return absl::InvalidArgumentError("chunk size must be positive");
  if (service_options.upload_quota_bytes < 0) return absl::InvalidArgumentError("upload quota must not be negative");
  return std::unique_ptr<ReconstructionServiceImpl>(new ReconstructionServiceImpl(options, service_options));
}

ReconstructionServiceImpl::ReconstructionServiceImpl(const ServerOptions& options,
                                                     ReconstructionServiceOptions service_options)
    : max_file_bytes_(options.max_volume_bytes),
      max_send_message_bytes_(options.max_send_message_bytes),
      service_options_(service_options),
      jobs_({kJob, {kUploads, service_options.upload_file_grace, service_options.upload_sweep_interval, NamedFiles}}),
      files_({kUploadPrefix, UploadExtensions(), options.max_volume_bytes, service_options.upload_quota_bytes}) {}

ReconstructionServiceImpl::~ReconstructionServiceImpl() = default;

absl::Status ReconstructionServiceImpl::AttachScheduler(scheduler::Scheduler* scheduler,
                                                       const std::string& state_dir) {
  return jobs_.Attach(scheduler, state_dir);
}

// ---------------------------------------------------------------- uploads

grpc::Status ReconstructionServiceImpl::UploadFile(grpc::ServerContext* context,
                                                   grpc::ServerReader<v1::FileChunk>* reader,
                                                   v1::UploadedFile* response) {
  if (absl::Status jobs = jobs_.scheduler().status(); !jobs.ok()) return ToGrpcStatus(jobs);
  return ToGrpcStatus(
      files_.ReceiveInto(*context, reader, jobs_.upload_dir(), CallPrincipal(context), "reconstruction", response));
}

absl::StatusOr<v1::ReconstructRequest> ReconstructionServiceImpl::DurableRequest(
    const v1::ReconstructRequest& request) const {
  v1::ReconstructRequest out = request;
  for (v1::FileSource* source : Sources(out)) {
    if (source->source_case() != v1::FileSource::kUploadId) continue;
    const std::string& id = source->upload_id();
    TESSERA_ASSIGN_OR_RETURN(std::string path, files_.PathOf(jobs_.upload_dir(), id, "upload_id"));
    if (!jobs::ReuseUploadFiles({path})) {
      return absl::NotFoundError(absl::StrCat("no upload '", id, "' (unknown, or deleted after its grace period)"));
    }
    source->set_path(path);
  }
  return out;
}

// ---------------------------------------------------------------- reconstruct

grpc::Status ReconstructionServiceImpl::Reconstruct(grpc::ServerContext* context,
                                                    const v1::ReconstructRequest* request, v1::JobStatus* response) {
  // Idempotent on request_id; the engine (run by the scheduler) checks the
  // geometry, sizes and values.
  absl::StatusOr<jobs::SubmittedJob> job = jobs_.Submit(
      {jobs::CallerOf(*context), request, request->request_id(), "request_id",
       [&] { return jobs::SpecOf(DurableRequest(*request)); }});
  if (job.ok()) *response = jobs::ToJobStatus(job->info);
  return jobs::JobRpcStatus(*context, job.status());
}

// ---------------------------------------------------------------- job queries

grpc::Status ReconstructionServiceImpl::WatchJob(grpc::ServerContext* context, const v1::JobRef* request,
                                                 grpc::ServerWriter<v1::Progress>* writer) {
  return jobs::WatchJobRpc(jobs_, *context, *request, writer);
}

grpc::Status ReconstructionServiceImpl::GetJob(grpc::ServerContext* context, const v1::JobRef* request,
                                               v1::JobStatus* response) {
  return jobs::Respond(jobs_.Get(jobs::CallerOf(*context), request->job_id()), response);
}

grpc::Status ReconstructionServiceImpl::CancelJob(grpc::ServerContext* context, const v1::JobRef* request,
                                                  v1::JobStatus* response) {
  return jobs::Respond(jobs_.Cancel(jobs::CallerOf(*context), request->job_id()), response);
}

grpc::Status ReconstructionServiceImpl::GetResult(grpc::ServerContext* context, const v1::JobRef* request,
                                                  v1::ReconstructionResult* response) {
  return jobs::Respond(jobs_.TypedResult<v1::ReconstructionResult>(jobs::CallerOf(*context), request->job_id()), response);
}

grpc::Status ReconstructionServiceImpl::DownloadResult(grpc::ServerContext* context,
                                                       const v1::ReconDownloadRequest* request,
                                                       grpc::ServerWriter<v1::ArrayChunk>* writer) {
  return ToGrpcStatus(DownloadResultImpl(*context, *request, writer));
}

absl::Status ReconstructionServiceImpl::DownloadResultImpl(const grpc::ServerContext& context,
                                                           const v1::ReconDownloadRequest& request,
                                                           grpc::ServerWriter<v1::ArrayChunk>* writer) {
  TESSERA_ASSIGN_OR_RETURN(JobRecord job, jobs_.Find(jobs::CallerOf(context), request.job_id()));
  if (request.chunk_bytes() < 0) return absl::InvalidArgumentError("chunk_bytes must not be negative");
  const int64_t chunk_bytes =
      DownloadChunkBytes(request.chunk_bytes(), service_options_.download_chunk_bytes, max_send_message_bytes_);
  TESSERA_ASSIGN_OR_RETURN(v1::JobResult result, jobs_.Result(jobs::CallerOf(context), job.job_id));
  TESSERA_ASSIGN_OR_RETURN(std::string path, jobs::JobCore::ResultFile(result, "reconstruction.nii.gz"));
  absl::StatusOr<Volume> volume = ReadNifti(path);
  if (!volume.ok()) {
    return volume.status().code() == absl::StatusCode::kNotFound ? absl::DataLossError(volume.status().message())
                                                                  : volume.status();
  }
  TESSERA_ASSIGN_OR_RETURN(NDArray array, volume->data.AsType(DType::kFloat32));
  return SendChunkedArray(context, writer,
                          VolumeHeaderOf(array, &volume->geometry, "tessera reconstruction (world mm)"),
                          array.raw_data(), static_cast<int64_t>(array.nbytes()), chunk_bytes);
}

}  // namespace tessera
