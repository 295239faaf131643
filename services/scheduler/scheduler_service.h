// tessera.v1.SchedulerService: the gRPC face of Scheduler (validation and
// status mapping only).
#ifndef TESSERA_SERVICES_SCHEDULER_SCHEDULER_SERVICE_H_
#define TESSERA_SERVICES_SCHEDULER_SCHEDULER_SERVICE_H_

#include "services/scheduler/scheduler.h"
#include "tessera/v1/scheduler.grpc.pb.h"

namespace tessera {

class SchedulerServiceImpl final : public v1::SchedulerService::Service {
 public:
  // `scheduler` must outlive the service.
  explicit SchedulerServiceImpl(scheduler::Scheduler* scheduler) : scheduler_(scheduler) {}

  grpc::Status Submit(grpc::ServerContext* context, const v1::SubmitJobRequest* request,
                      v1::JobInfo* response) override;
  grpc::Status Watch(grpc::ServerContext* context, const v1::WatchJobRequest* request,
                     grpc::ServerWriter<v1::JobEvent>* writer) override;
  grpc::Status Cancel(grpc::ServerContext* context, const v1::JobRef* request, v1::JobInfo* response) override;
  grpc::Status Delete(grpc::ServerContext* context, const v1::JobRef* request, v1::JobInfo* response) override;
  grpc::Status Get(grpc::ServerContext* context, const v1::JobRef* request, v1::JobInfo* response) override;
  grpc::Status GetResult(grpc::ServerContext* context, const v1::JobRef* request, v1::JobResult* response) override;
  grpc::Status List(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                    v1::ListJobsResponse* response) override;
  grpc::Status ListWorkers(grpc::ServerContext* context, const v1::ListWorkersRequest* request,
                           v1::ListWorkersResponse* response) override;
  // Issue 35: a result file of a job the caller may see (result_file_stream.h).
  grpc::Status DownloadFile(grpc::ServerContext* context, const v1::DownloadJobFileRequest* request,
                            grpc::ServerWriter<v1::FileChunk>* writer) override;
  // Issue 35: a PNG of a succeeded job's main image (job_preview.h).
  grpc::Status GetPreview(grpc::ServerContext* context, const v1::JobPreviewRequest* request,
                          v1::JobPreview* response) override;

 private:
  scheduler::Scheduler* scheduler_;
};

}  // namespace tessera

#endif  // TESSERA_SERVICES_SCHEDULER_SCHEDULER_SERVICE_H_
