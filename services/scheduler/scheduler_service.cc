#include "services/scheduler/scheduler_service.h"

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "services/jobs/job_rpcs.h"
#include "services/server/call_checks.h"

namespace tessera {
namespace {

template <typename T>
grpc::Status Reply(absl::StatusOr<T> result, T* response) {
  if (!result.ok()) return ToGrpcStatus(result.status());
  *response = *std::move(result);
  return grpc::Status::OK;
}

}  // namespace

grpc::Status SchedulerServiceImpl::Submit(grpc::ServerContext* context, const v1::SubmitJobRequest* request,
                                          v1::JobInfo* response) {
  absl::StatusOr<v1::JobInfo> info = scheduler_->Submit(*request);
  if (!info.ok()) return jobs::JobRpcStatus(*context, info.status());
  return Reply(std::move(info), response);
}

grpc::Status SchedulerServiceImpl::Watch(grpc::ServerContext* context, const v1::WatchJobRequest* request,
                                         grpc::ServerWriter<v1::JobEvent>* writer) {
  absl::Status status = scheduler_->Watch(
      request->job_id(), request->after_sequence(), [&](const v1::JobEvent& e) { return writer->Write(e); },
      [&] { return context->IsCancelled(); });
  if (!status.ok() && context->IsCancelled()) status = CheckNotCancelled(*context);
  return ToGrpcStatus(status);
}

grpc::Status SchedulerServiceImpl::Cancel(grpc::ServerContext*, const v1::JobRef* request, v1::JobInfo* response) {
  return Reply(scheduler_->Cancel(request->job_id()), response);
}

grpc::Status SchedulerServiceImpl::Get(grpc::ServerContext*, const v1::JobRef* request, v1::JobInfo* response) {
  return Reply(scheduler_->Get(request->job_id()), response);
}

grpc::Status SchedulerServiceImpl::GetResult(grpc::ServerContext*, const v1::JobRef* request,
                                             v1::JobResult* response) {
  return Reply(scheduler_->GetResult(request->job_id()), response);
}

grpc::Status SchedulerServiceImpl::List(grpc::ServerContext*, const v1::ListJobsRequest* request,
                                        v1::ListJobsResponse* response) {
  return Reply(scheduler_->List(*request), response);
}

grpc::Status SchedulerServiceImpl::ListWorkers(grpc::ServerContext*, const v1::ListWorkersRequest*,
                                               v1::ListWorkersResponse* response) {
  for (v1::WorkerInfo& w : scheduler_->Workers()) *response->add_workers() = std::move(w);
  return grpc::Status::OK;
}

}  // namespace tessera
