#include "services/reconstruction/reconstruction_service.h"

#include <algorithm>
#include <limits>
#include <filesystem>
#include <set>
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
#include "services/scheduler/job_info.h"
#include "services/server/auth.h"
#include "services/server/call_checks.h"
#include "common/text_checks.h"

namespace tessera {

namespace fs = std::filesystem;
using jobs::JobRecord;
using scheduler::ToJobStatus;

namespace {

constexpr scheduler::ServiceJobKind kJob{"reconstruction", "reconstruction"};
constexpr char kUploadPrefix[] = "rf-";
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
  if (r.has_mri()) {
    for (v1::FileSource* f : {r.mutable_mri()->mutable_kspace(), r.mutable_mri()->mutable_trajectory(),
                              r.mutable_mri()->mutable_coils()}) {
      out.push_back(f);
    }
  }
  if (r.has_ultrasound()) out.push_back(r.mutable_ultrasound()->mutable_channel_data());
  return out;
}

}  // namespace

std::string ReconstructionUploadDir(const std::string& state_dir) {
  return scheduler::StateSubdir(state_dir, "recon-uploads");
}

absl::StatusOr<std::string> CreateReconstructionUploadDir(const std::string& state_dir) {
  return scheduler::CreateStateSubdir(state_dir, "recon-uploads", "reconstruction upload directory");
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
      default_device_(options.device),
      data_roots_(options.data_roots),
      service_options_(service_options),
      sweep_throttle_("reconstruction", service_options.upload_sweep_interval),
      upload_quota_bytes_(service_options.upload_quota_bytes > 0
                              ? service_options.upload_quota_bytes
                              : (options.max_volume_bytes > std::numeric_limits<int64_t>::max() / 8
                                     ? std::numeric_limits<int64_t>::max()
                                     : 8 * options.max_volume_bytes)) {}

ReconstructionServiceImpl::~ReconstructionServiceImpl() = default;

absl::Status ReconstructionServiceImpl::AttachScheduler(scheduler::Scheduler* scheduler,
                                                       const std::string& state_dir) {
  TESSERA_RETURN_IF_ERROR(scheduler::CheckAttachable(scheduler, scheduler_.load()));
  TESSERA_ASSIGN_OR_RETURN(upload_dir_, CreateReconstructionUploadDir(state_dir));
  scheduler_.store(scheduler);
  MaybeSweepUploadFiles();
  return absl::OkStatus();
}

absl::StatusOr<scheduler::Scheduler*> ReconstructionServiceImpl::Jobs() const {
  return scheduler::RequireScheduler(scheduler_.load());
}

absl::StatusOr<JobRecord> ReconstructionServiceImpl::FindJob(const std::string& id) const {
  return scheduler::FindJob(scheduler_.load(), id, kJob);
}

// ---------------------------------------------------------------- uploads

grpc::Status ReconstructionServiceImpl::UploadFile(grpc::ServerContext* context,
                                                   grpc::ServerReader<v1::FileChunk>* reader,
                                                   v1::UploadedFile* response) {
  absl::StatusOr<scheduler::Scheduler*> jobs = Jobs();
  if (!jobs.ok()) return ToGrpcStatus(jobs.status());
  // Upload files are named rf-<owner>-<random><ext>: the owner (a hash of the
  // principal) is how the quota finds a principal's files.
  const std::string principal = CallPrincipal(context);
  const std::string owner = Sha256Hex(principal.empty() ? std::string("\0anonymous", 10) : principal).substr(0, 12);
  std::function<void()> release;
  const auto admit = [&](int64_t bytes) -> absl::Status {
    absl::StatusOr<std::function<void()>> reserved = ReserveQuota(owner, principal, bytes);
    if (!reserved.ok()) return reserved.status();
    release = *std::move(reserved);
    return absl::OkStatus();
  };
  absl::StatusOr<StoredUpload> stored = ReceiveFileUpload(*context, reader, upload_dir_, absl::StrCat(kUploadPrefix, owner, "-"),
                                                          UploadExtensions(), max_file_bytes_, admit);
  if (release) release();
  if (!stored.ok()) return ToGrpcStatus(stored.status());
  response->set_upload_id(stored->upload_id);
  response->set_nbytes(stored->nbytes);
  response->set_sha256(stored->sha256);
  TESSERA_LOG(INFO) << "reconstruction: upload " << stored->upload_id << " (" << stored->nbytes
                    << " bytes, sha256 " << stored->sha256 << ")";
  return grpc::Status::OK;
}

absl::StatusOr<std::function<void()>> ReconstructionServiceImpl::ReserveQuota(const std::string& owner,
                                                                             const std::string& principal,
                                                                             int64_t bytes) {
  const std::string prefix = absl::StrCat(kUploadPrefix, owner, "-");
  std::lock_guard<std::mutex> lock(quota_mu_);
  int64_t held = 0, files = 0;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(upload_dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (!absl::StartsWith(name, prefix)) continue;
    std::error_code size_ec;
    const uintmax_t size = entry.file_size(size_ec);
    if (!size_ec) held += static_cast<int64_t>(size), ++files;
  }
  if (ec) return absl::InternalError(absl::StrCat("cannot list ", upload_dir_, ": ", ec.message()));
  const int64_t in_flight = in_flight_bytes_[owner];
  if (held + in_flight + bytes > upload_quota_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "upload quota of ", principal.empty() ? std::string("unauthenticated callers") : QuoteBounded(principal),
        " exceeded: ", held, " bytes in ", files, " file(s) held", in_flight > 0 ? absl::StrCat(" and ", in_flight, " being received") : "",
        ", ", bytes, " more asked, limit ", upload_quota_bytes_,
        "; files are deleted once no queued or running job names them (after the grace period)"));
  }
  in_flight_bytes_[owner] += bytes;
  return std::function<void()>([this, owner, bytes] {
    std::lock_guard<std::mutex> lock(quota_mu_);
    if ((in_flight_bytes_[owner] -= bytes) <= 0) in_flight_bytes_.erase(owner);
  });
}

absl::StatusOr<v1::ReconstructRequest> ReconstructionServiceImpl::DurableRequest(
    const v1::ReconstructRequest& request) const {
  v1::ReconstructRequest out = request;
  for (v1::FileSource* source : Sources(out)) {
    if (source->source_case() != v1::FileSource::kUploadId) continue;
    const std::string& id = source->upload_id();
    // Upload ids are file names this service chose: nothing else is accepted.
    if (!absl::StartsWith(id, kUploadPrefix) || id.find('/') != std::string::npos || id.size() > 200 ||
        !MatchExtension(id, UploadExtensions()).ok()) {
      return absl::InvalidArgumentError(absl::StrCat("upload_id '", id.substr(0, 200), "' is malformed"));
    }
    const std::string path = (fs::path(upload_dir_) / id).string();
    if (!scheduler::ReuseUploadFiles({path})) {
      return absl::NotFoundError(absl::StrCat("no upload '", id, "' (unknown, or deleted after its grace period)"));
    }
    source->set_path(path);
  }
  return out;
}

absl::StatusOr<int> ReconstructionServiceImpl::SweepUploadFiles() {
  TESSERA_ASSIGN_OR_RETURN(scheduler::Scheduler * s, Jobs());
  TESSERA_ASSIGN_OR_RETURN(std::vector<JobRecord> pending, scheduler::PendingJobs(*s, kJob.kind));
  std::set<std::string> named;
  for (const JobRecord& job : pending) {
    v1::ReconstructRequest request;
    if (!scheduler::UnpackJobSpec(job, &request)) continue;
    for (const v1::FileSource* source : Sources(request)) {
      if (source->has_path()) named.insert(source->path());
    }
  }
  return scheduler::RemoveUnnamedUploadFiles(upload_dir_, kUploadPrefix, named, service_options_.upload_file_grace);
}

void ReconstructionServiceImpl::MaybeSweepUploadFiles() {
  sweep_throttle_.MaybeSweep([this] { return SweepUploadFiles(); });
}

// ---------------------------------------------------------------- reconstruct

grpc::Status ReconstructionServiceImpl::Reconstruct(grpc::ServerContext* context,
                                                    const v1::ReconstructRequest* request, v1::JobStatus* response) {
  return ToGrpcStatus(ReconstructImpl(*context, *request, response));
}

absl::Status ReconstructionServiceImpl::ReconstructImpl(grpc::ServerContext& context,
                                                        const v1::ReconstructRequest& request,
                                                        v1::JobStatus* response) {
  TESSERA_ASSIGN_OR_RETURN(scheduler::Scheduler * s, Jobs());
  const std::string& id = request.request_id();
  if (!id.empty()) {
    TESSERA_RETURN_IF_ERROR(Annotate(jobs::ValidateJobId(id), "request_id"));
    absl::StatusOr<JobRecord> existing = s->store().FindByRequestId(id);
    if (existing.ok()) {
      if (existing->kind != kJob.kind) {
        return absl::AlreadyExistsError(
            absl::StrCat("request_id '", id, "' already names a ", existing->kind, " job (", existing->job_id, ")"));
      }
      *response = ToJobStatus(scheduler::ToJobInfo(*existing));
      return absl::OkStatus();
    }
    if (existing.status().code() != absl::StatusCode::kNotFound) return existing.status();
  }
  const std::string device = request.device().empty() ? default_device_ : request.device();
  if (device == "cuda") TESSERA_RETURN_IF_ERROR(scheduler::CheckGpuWorker(*s));
  TESSERA_ASSIGN_OR_RETURN(v1::ReconstructRequest durable, DurableRequest(request));
  // The scheduler runs the engine's Validate (geometry, sizes, values).
  TESSERA_ASSIGN_OR_RETURN(v1::JobInfo info, scheduler::SubmitJob(*s, context, kJob.kind, durable, id));
  if (info.kind() != kJob.kind) {
    return absl::AlreadyExistsError(
        absl::StrCat("request_id '", id, "' already names a ", info.kind(), " job (", info.job_id(), ")"));
  }
  TESSERA_LOG(INFO) << "reconstruction: job " << info.job_id() << (id.empty() ? "" : absl::StrCat(" (", id, ")"))
                    << " submitted";
  *response = ToJobStatus(info);
  MaybeSweepUploadFiles();
  return absl::OkStatus();
}

// ---------------------------------------------------------------- job queries

grpc::Status ReconstructionServiceImpl::WatchJob(grpc::ServerContext* context, const v1::ReconJobRequest* request,
                                                 grpc::ServerWriter<v1::Progress>* writer) {
  return ToGrpcStatus(WatchJobImpl(*context, *request, writer));
}

absl::Status ReconstructionServiceImpl::WatchJobImpl(const grpc::ServerContext& context, const v1::ReconJobRequest& request,
                                                     grpc::ServerWriter<v1::Progress>* writer) {
  return scheduler::WatchJobProgress(scheduler_.load(), request.job_id(), kJob, context,
                                     [writer](const v1::Progress& progress) { return writer->Write(progress); });
}

grpc::Status ReconstructionServiceImpl::GetJob(grpc::ServerContext* /*context*/, const v1::ReconJobRequest* request,
                                               v1::JobStatus* response) {
  return ToGrpcStatus(scheduler::GetJobStatus(scheduler_.load(), request->job_id(), kJob, response));
}

grpc::Status ReconstructionServiceImpl::CancelJob(grpc::ServerContext* /*context*/,
                                                  const v1::ReconJobRequest* request, v1::JobStatus* response) {
  return ToGrpcStatus(scheduler::CancelJob(scheduler_.load(), request->job_id(), kJob, response));
}

grpc::Status ReconstructionServiceImpl::GetResult(grpc::ServerContext* /*context*/,
                                                  const v1::ReconJobRequest* request,
                                                  v1::ReconstructionResult* response) {
  return ToGrpcStatus(GetResultImpl(*request, response));
}

absl::Status ReconstructionServiceImpl::GetResultImpl(const v1::ReconJobRequest& request,
                                                      v1::ReconstructionResult* response) {
  TESSERA_ASSIGN_OR_RETURN(JobRecord job, FindJob(request.job_id()));
  TESSERA_RETURN_IF_ERROR(scheduler::CheckSucceeded(job));
  TESSERA_ASSIGN_OR_RETURN(v1::JobResult result, (*Jobs())->GetResult(job.job_id));
  if (!result.result().UnpackTo(response)) {
    return absl::DataLossError(absl::StrCat("job '", job.job_id, "' has no reconstruction result"));
  }
  response->set_job_id(job.job_id);
  return absl::OkStatus();
}

grpc::Status ReconstructionServiceImpl::DownloadResult(grpc::ServerContext* context,
                                                       const v1::ReconDownloadRequest* request,
                                                       grpc::ServerWriter<v1::ArrayChunk>* writer) {
  return ToGrpcStatus(DownloadResultImpl(*context, *request, writer));
}

absl::Status ReconstructionServiceImpl::DownloadResultImpl(const grpc::ServerContext& context,
                                                           const v1::ReconDownloadRequest& request,
                                                           grpc::ServerWriter<v1::ArrayChunk>* writer) {
  TESSERA_ASSIGN_OR_RETURN(JobRecord job, FindJob(request.job_id()));
  if (request.chunk_bytes() < 0) return absl::InvalidArgumentError("chunk_bytes must not be negative");
  const int64_t chunk_bytes =
      DownloadChunkBytes(request.chunk_bytes(), service_options_.download_chunk_bytes, max_send_message_bytes_);
  TESSERA_RETURN_IF_ERROR(scheduler::CheckSucceeded(job));
  TESSERA_ASSIGN_OR_RETURN(v1::JobResult result, (*Jobs())->GetResult(job.job_id));
  std::string path;
  for (const v1::ResultFile& f : result.files()) {
    if (f.name() == "reconstruction.nii.gz") path = f.path();
  }
  if (path.empty()) return absl::DataLossError(absl::StrCat("job '", job.job_id, "' has no reconstruction.nii.gz"));
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
