// tessera.v1.RegistrationService (protos/tessera/v1/registration.proto): a
// thin gRPC adapter over the scheduler (services/scheduler/scheduler.h), which
// runs the "registration" job engine (registration_engine.h). There is one
// way to run a registration job, and its jobs are the scheduler's: durable in
// its store, visible to SchedulerService and `tessera job`, and still there
// (with their results) after a restart on the same state directory.
//
//   Register        Scheduler::Submit of the RegisterRequest; its job_id is
//                   the scheduler's request_id (the same id returns the same
//                   job). The returned JobStatus.job_id is the scheduler's job
//                   id; every job RPC takes it or the client's own job_id.
//   WatchJob        Scheduler::Watch as Progress messages: the current state
//                   at once, then each event until the job ends.
//   GetJob          Scheduler::Get / Cancel as JobStatus.
//   CancelJob
//   GetResult       the job's RegistrationResult (Scheduler::GetResult).
//   DownloadResult  read back from the job's result files
//                   (<state dir>/results/<job id>/: warped.nii.gz, ...).
//
// Uploads (UploadVolume) are held in memory (a bounded VolumeStore with a
// TTL). A job must not depend on one process's memory, so Register writes each
// upload it names once to <state dir>/uploads/<upload id>.nii (atomically)
// and submits the request with that path instead; the registration engine
// takes that folder as a data root (RegistrationUploadDir). Upload files that
// no queued or running job names are deleted after a grace period.
//
//   TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<tessera::RegistrationServiceImpl> registration,
//                            tessera::RegistrationServiceImpl::Create(server_options));
//   // engines (registration roots: data roots + RegistrationUploadDir(state_dir)),
//   // then the scheduler over them, started:
//   TESSERA_RETURN_IF_ERROR(registration->AttachScheduler(scheduler.get(), state_dir));
//   host.AddService(registration.get());   // the service and the scheduler must outlive the host
//
// Without a scheduler (a `tessera serve --role worker` process, whose jobs a
// scheduler sends through WorkerService) every RPC answers
// FAILED_PRECONDITION naming SchedulerService.
#ifndef TESSERA_SERVICES_REGISTRATION_REGISTRATION_SERVICE_H_
#define TESSERA_SERVICES_REGISTRATION_REGISTRATION_SERVICE_H_

#include <cstdint>
#include <memory>
#include <string>

#include <grpcpp/server_context.h>
#include <grpcpp/support/sync_stream.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "services/common/file_upload_area.h"
#include "services/common/volume_store.h"
#include "services/jobs/job_core.h"
#include "services/scheduler/scheduler.h"
#include "services/server/server_options.h"
#include "tessera/v1/registration.grpc.pb.h"

namespace tessera {

struct RegistrationServiceOptions {
  int64_t upload_store_bytes = 0;                 // 0: 4 x ServerOptions::max_volume_bytes
  absl::Duration upload_ttl = absl::Minutes(30);  // after last use
  int64_t download_chunk_bytes = 1 << 20;         // default DownloadResult chunk
  // Upload files under <state dir>/uploads that no queued or running job
  // names are deleted once untouched this long (looked at, at most every
  // upload_sweep_interval, by Register).
  absl::Duration upload_file_grace = absl::Hours(1);
  absl::Duration upload_sweep_interval = absl::Minutes(10);
};

// <state_dir>/uploads: where RegistrationService writes the uploads a Register
// names. The registration engine of a process whose jobs may name them takes
// it as a data root; CreateRegistrationUploadDir makes it (and returns it).
std::string RegistrationUploadDir(const std::string& state_dir);
absl::StatusOr<std::string> CreateRegistrationUploadDir(const std::string& state_dir);
// <state_dir>/apply_uploads: the same for ApplyTransforms' uploads (its own
// folder: each job core sweeps the files its own jobs do not name).
std::string ApplyTransformsUploadDir(const std::string& state_dir);
absl::StatusOr<std::string> CreateApplyTransformsUploadDir(const std::string& state_dir);
// The job core options of the "apply_transforms" jobs (its uploads folder and
// the files its stored specs name).
jobs::JobCoreOptions ApplyTransformsJobCoreOptions(absl::Duration upload_grace, absl::Duration sweep_interval);

class RegistrationServiceImpl final : public v1::RegistrationService::Service {
 public:
  // Uses options.max_volume_bytes (per upload), options.max_send_message_bytes
  // (download chunks) and options.device (the default device of jobs, as the
  // engine's; "cuda" without a GPU is FAILED_PRECONDITION).
  static absl::StatusOr<std::unique_ptr<RegistrationServiceImpl>> Create(
      const ServerOptions& options, RegistrationServiceOptions service_options = {});
  ~RegistrationServiceImpl() override;

  // The scheduler Register submits to (started; it must run a registration
  // engine whose data roots include RegistrationUploadDir(state_dir)), and
  // its state directory. Once, before serving; the scheduler must outlive the
  // service's last call.
  absl::Status AttachScheduler(scheduler::Scheduler* scheduler, const std::string& state_dir);

  grpc::Status UploadVolume(grpc::ServerContext* context, grpc::ServerReader<v1::ArrayChunk>* reader,
                            v1::UploadedVolume* response) override;
  // Issue 35: a whole image file (.nii, .nii.gz, .dcm, .zip of a DICOM
  // series) written under <state dir>/uploads as up-f-<owner>-<random><ext>
  // within the caller's quota (8 x max_volume_bytes); VolumeSource.file_id
  // names it. Register and ApplyTransforms resolve a file_id to that path
  // (NOT_FOUND naming the field when it is not there), so the job reads it as
  // a server path, also after a restart; files no pending job names are swept
  // with the other upload files.
  grpc::Status UploadFile(grpc::ServerContext* context, grpc::ServerReader<v1::FileChunk>* reader,
                          v1::UploadedFile* response) override;
  grpc::Status Register(grpc::ServerContext* context, const v1::RegisterRequest* request,
                        v1::JobStatus* response) override;
  grpc::Status WatchJob(grpc::ServerContext* context, const v1::JobRef* request,
                        grpc::ServerWriter<v1::Progress>* writer) override;
  grpc::Status GetJob(grpc::ServerContext* context, const v1::JobRef* request, v1::JobStatus* response) override;
  grpc::Status CancelJob(grpc::ServerContext* context, const v1::JobRef* request,
                         v1::JobStatus* response) override;
  grpc::Status GetResult(grpc::ServerContext* context, const v1::JobRef* request,
                         v1::RegistrationResult* response) override;
  grpc::Status DownloadResult(grpc::ServerContext* context, const v1::DownloadRequest* request,
                              grpc::ServerWriter<v1::ArrayChunk>* writer) override;
  // Issue 34 (apply_transforms_service.cc): an "apply_transforms" job; its
  // uploads are written to ApplyTransformsUploadDir, a registration_job_id is
  // checked against this caller's registration jobs and stored as the
  // scheduler's job id. WatchJob, GetJob and CancelJob take its id too.
  grpc::Status ApplyTransforms(grpc::ServerContext* context, const v1::ApplyTransformsRequest* request,
                               v1::JobStatus* response) override;
  grpc::Status GetApplyTransformsResult(grpc::ServerContext* context, const v1::JobRef* request,
                                        v1::ApplyTransformsResult* response) override;

  VolumeStore& uploads() { return uploads_; }
  // Deletes the upload files no queued or running job names and untouched
  // for upload_file_grace; returns how many. (Register calls it now and then.)
  absl::StatusOr<int> SweepUploadFiles() { return jobs_.SweepUploads(); }

 private:
  RegistrationServiceImpl(const ServerOptions& options, RegistrationServiceOptions service_options);

  absl::Status UploadVolumeImpl(const grpc::ServerContext& context, grpc::ServerReader<v1::ArrayChunk>* reader,
                                v1::UploadedVolume* response);
  // The request as submitted: uploads written as files and named by path.
  absl::StatusOr<v1::RegisterRequest> DurableRequest(const v1::RegisterRequest& request);
  absl::StatusOr<std::string> WriteUploadFile(const std::string& upload_id, const Volume& volume);
  // The server path of an UploadFile's `file_id` ("<what>: file_id" in errors).
  absl::StatusOr<std::string> UploadedFilePath(const std::string& file_id, absl::string_view what) const;
  absl::Status DownloadResultImpl(const grpc::ServerContext& context, const v1::DownloadRequest& request,
                                  grpc::ServerWriter<v1::ArrayChunk>* writer);

  // apply_transforms_service.cc: the request as submitted (uploads as files,
  // registration jobs by their scheduler ids), and which core owns a job id.
  absl::StatusOr<v1::ApplyTransformsRequest> DurableApplyRequest(const jobs::JobCaller& caller,
                                                                 const v1::ApplyTransformsRequest& request);
  const jobs::JobCore& CoreFor(const grpc::ServerContext& context, const std::string& job_id) const;

  const int64_t max_volume_bytes_;
  const int max_send_message_bytes_;
  const RegistrationServiceOptions service_options_;
  VolumeStore uploads_;
  jobs::JobCore jobs_;
  FileUploadArea files_;  // UploadFile's names, kinds and quota (in jobs_.upload_dir())
  jobs::JobCore apply_jobs_;  // kind "apply_transforms"
};

}  // namespace tessera

#endif  // TESSERA_SERVICES_REGISTRATION_REGISTRATION_SERVICE_H_
