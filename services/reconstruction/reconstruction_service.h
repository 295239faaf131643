// tessera.v1.ReconstructionService (protos/tessera/v1/reconstruction.proto):
// a thin gRPC adapter over the scheduler, which runs the "reconstruction" job
// engine (reconstruction_engine.h). Its jobs are the scheduler's: durable,
// visible to SchedulerService and `tessera job`, still there after a restart.
//
//   UploadFile      writes the file under <state dir>/recon-uploads (fsynced,
//                   renamed into place; SHA-256 returned) within the caller's
//                   quota; the engine takes that folder as a data root.
//   Reconstruct     checks the request, replaces upload ids by their paths and
//                   submits it (request_id = the scheduler's request id).
//   WatchJob, GetJob, CancelJob, GetResult   over the scheduler's job.
//   DownloadResult  the result volume, read back from reconstruction.nii.gz
//                   in the job's result directory.
//
// Without a scheduler (a `tessera serve --role worker` process) every RPC
// answers FAILED_PRECONDITION naming SchedulerService.
#ifndef TESSERA_SERVICES_RECONSTRUCTION_RECONSTRUCTION_SERVICE_H_
#define TESSERA_SERVICES_RECONSTRUCTION_RECONSTRUCTION_SERVICE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <grpcpp/server_context.h>
#include <grpcpp/support/sync_stream.h>

#include "absl/status/statusor.h"
#include "services/common/file_upload_area.h"
#include "services/jobs/job_core.h"
#include "services/scheduler/scheduler.h"
#include "services/server/server_options.h"
#include "tessera/v1/reconstruction.grpc.pb.h"

namespace tessera {

// <state_dir>/recon-uploads: where UploadFile writes. The reconstruction
// engine of a process whose jobs may name uploads takes it as a data root.
std::string ReconstructionUploadDir(const std::string& state_dir);
absl::StatusOr<std::string> CreateReconstructionUploadDir(const std::string& state_dir);

struct ReconstructionServiceOptions {
  int64_t download_chunk_bytes = 1 << 20;
  // Bytes of upload files one principal (the token's; all unauthenticated
  // callers share one) may hold at once; 0: 8 x the file limit. Files count
  // until swept (no queued or running job names them, upload_file_grace).
  int64_t upload_quota_bytes = 0;
  // Upload files no queued or running job names are deleted once untouched
  // this long (looked at, at most every upload_sweep_interval, by Reconstruct).
  absl::Duration upload_file_grace = absl::Hours(6);
  absl::Duration upload_sweep_interval = absl::Minutes(10);
};

class ReconstructionServiceImpl final : public v1::ReconstructionService::Service {
 public:
  // Uses options.max_volume_bytes (per uploaded file and input),
  // options.max_send_message_bytes (download chunks), options.device and
  // options.data_roots.
  static absl::StatusOr<std::unique_ptr<ReconstructionServiceImpl>> Create(
      const ServerOptions& options, ReconstructionServiceOptions service_options = {});
  ~ReconstructionServiceImpl() override;

  // The scheduler Reconstruct submits to (it must run a reconstruction
  // engine whose roots include ReconstructionUploadDir(state_dir)). Once.
  absl::Status AttachScheduler(scheduler::Scheduler* scheduler, const std::string& state_dir);

  grpc::Status UploadFile(grpc::ServerContext* context, grpc::ServerReader<v1::FileChunk>* reader,
                          v1::UploadedFile* response) override;
  grpc::Status Reconstruct(grpc::ServerContext* context, const v1::ReconstructRequest* request,
                           v1::JobStatus* response) override;
  grpc::Status WatchJob(grpc::ServerContext* context, const v1::JobRef* request,
                        grpc::ServerWriter<v1::Progress>* writer) override;
  grpc::Status GetJob(grpc::ServerContext* context, const v1::JobRef* request,
                      v1::JobStatus* response) override;
  grpc::Status CancelJob(grpc::ServerContext* context, const v1::JobRef* request,
                         v1::JobStatus* response) override;
  grpc::Status GetResult(grpc::ServerContext* context, const v1::JobRef* request,
                         v1::ReconstructionResult* response) override;
  grpc::Status DownloadResult(grpc::ServerContext* context, const v1::ReconDownloadRequest* request,
                              grpc::ServerWriter<v1::ArrayChunk>* writer) override;

  // Deletes the upload files no queued or running job names and untouched
  // for upload_file_grace; returns how many.
  absl::StatusOr<int> SweepUploadFiles() { return jobs_.SweepUploads(); }

 private:
  ReconstructionServiceImpl(const ServerOptions& options, ReconstructionServiceOptions service_options);

  // The request as submitted: upload ids replaced by their files' paths.
  absl::StatusOr<v1::ReconstructRequest> DurableRequest(const v1::ReconstructRequest& request) const;
  absl::Status DownloadResultImpl(const grpc::ServerContext& context, const v1::ReconDownloadRequest& request,
                                  grpc::ServerWriter<v1::ArrayChunk>* writer);

  const int64_t max_file_bytes_;
  const int max_send_message_bytes_;
  const ReconstructionServiceOptions service_options_;
  jobs::JobCore jobs_;
  FileUploadArea files_;  // UploadFile's names, kinds and quota (in jobs_.upload_dir())
};

}  // namespace tessera

#endif  // TESSERA_SERVICES_RECONSTRUCTION_RECONSTRUCTION_SERVICE_H_
