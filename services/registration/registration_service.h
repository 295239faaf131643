// tessera.v1.RegistrationService: registration jobs over gRPC
// (protos/tessera/v1/registration.proto). Volumes come from uploads (held
// in a bounded VolumeStore with a TTL) or files under the data roots; jobs
// run RunRegistrationRequest (request_run.h, the same code path as the
// registration job engine) on a small worker pool with a bounded queue and
// live in an in-memory JobRegistry (services/jobs) with their results, which
// GetResult and DownloadResult serve from memory.
//
//   absl::StatusOr<std::unique_ptr<tessera::RegistrationServiceImpl>> registration =
//       tessera::RegistrationServiceImpl::Create(server_options);
//   host.AddService(registration->get());   // must outlive the host
//
// Destroying the service cancels every job and waits for the workers.
#ifndef TESSERA_SERVICES_REGISTRATION_REGISTRATION_SERVICE_H_
#define TESSERA_SERVICES_REGISTRATION_REGISTRATION_SERVICE_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/server_context.h>
#include <grpcpp/support/sync_stream.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/common/volume_store.h"
#include "services/jobs/job_registry.h"
#include "services/jobs/worker_pool.h"
#include "services/registration/request_run.h"
#include "services/server/server_options.h"
#include "tessera/v1/registration.grpc.pb.h"

namespace tessera {

struct RegistrationServiceOptions {
  int workers = 1;                                // registrations run at once
  int max_queued_jobs = 8;                        // more waiting: RESOURCE_EXHAUSTED
  int max_finished_jobs = 16;                     // ended jobs (and results) kept, newest first
  absl::Duration finished_job_ttl = absl::Hours(1);
  int64_t upload_store_bytes = 0;                 // 0: 4 x ServerOptions::max_volume_bytes
  absl::Duration upload_ttl = absl::Minutes(30);  // after last use
  absl::Duration watch_interval = absl::Milliseconds(100);  // WatchJob: at most one update per interval
  int64_t download_chunk_bytes = 1 << 20;         // default DownloadResult chunk
};

class RegistrationServiceImpl final : public v1::RegistrationService::Service {
 public:
  // Uses options.data_roots (canonicalized; each must exist),
  // options.max_volume_bytes (per volume, upload or file),
  // options.max_send_message_bytes (download chunks) and options.device
  // (the default device of jobs; "cuda" without a GPU is FAILED_PRECONDITION).
  static absl::StatusOr<std::unique_ptr<RegistrationServiceImpl>> Create(
      const ServerOptions& options, RegistrationServiceOptions service_options = {});
  ~RegistrationServiceImpl() override;

  grpc::Status UploadVolume(grpc::ServerContext* context, grpc::ServerReader<v1::ArrayChunk>* reader,
                            v1::UploadedVolume* response) override;
  grpc::Status Register(grpc::ServerContext* context, const v1::RegisterRequest* request,
                        v1::JobStatus* response) override;
  grpc::Status WatchJob(grpc::ServerContext* context, const v1::JobRequest* request,
                        grpc::ServerWriter<v1::Progress>* writer) override;
  grpc::Status GetJob(grpc::ServerContext* context, const v1::JobRequest* request, v1::JobStatus* response) override;
  grpc::Status CancelJob(grpc::ServerContext* context, const v1::JobRequest* request,
                         v1::JobStatus* response) override;
  grpc::Status GetResult(grpc::ServerContext* context, const v1::JobRequest* request,
                         v1::RegistrationResult* response) override;
  grpc::Status DownloadResult(grpc::ServerContext* context, const v1::DownloadRequest* request,
                              grpc::ServerWriter<v1::ArrayChunk>* writer) override;

  jobs::JobRegistry& registry() { return registry_; }
  VolumeStore& uploads() { return uploads_; }

 private:
  using JobSpec = registration::RequestSpec;

  RegistrationServiceImpl(const ServerOptions& options, std::vector<std::string> roots,
                          RegistrationServiceOptions service_options);

  absl::Status UploadVolumeImpl(const grpc::ServerContext& context, grpc::ServerReader<v1::ArrayChunk>* reader,
                                v1::UploadedVolume* response);
  absl::Status RegisterImpl(const v1::RegisterRequest& request, v1::JobStatus* response);
  absl::StatusOr<std::shared_ptr<const JobSpec>> PrepareJob(const v1::RegisterRequest& request);
  absl::Status WatchJobImpl(const grpc::ServerContext& context, const v1::JobRequest& request,
                            grpc::ServerWriter<v1::Progress>* writer);
  absl::Status GetResultImpl(const v1::JobRequest& request, v1::RegistrationResult* response);
  absl::Status DownloadResultImpl(const grpc::ServerContext& context, const v1::DownloadRequest& request,
                                  grpc::ServerWriter<v1::ArrayChunk>* writer);
  void RunJob(const std::shared_ptr<jobs::Job>& job, const std::shared_ptr<const JobSpec>& spec);

  const std::vector<std::string> roots_;
  const int64_t max_volume_bytes_;
  const int max_send_message_bytes_;
  const std::string default_device_;
  const RegistrationServiceOptions service_options_;
  VolumeStore uploads_;
  jobs::JobRegistry registry_;
  std::mutex submit_mu_;  // job creation + queueing, so a failed queueing is undone atomically
  jobs::WorkerPool pool_;  // last: its threads use the members above
};
}  // namespace tessera

#endif  // TESSERA_SERVICES_REGISTRATION_REGISTRATION_SERVICE_H_
