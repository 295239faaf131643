#include "services/scheduler/scheduler_service.h"

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/status.h"
#include "common/text_checks.h"
#include "services/jobs/job_access.h"
#include "services/jobs/job_rpcs.h"
#include "services/scheduler/job_info.h"
#include "services/scheduler/job_preview.h"
#include "services/scheduler/result_file_stream.h"
#include "services/server/call_checks.h"

namespace tessera {
namespace {

constexpr int64_t kDownloadChunkBytes = 1 << 20;

// The job `job_id` names when `caller` may see it (job_access.h); NOT_FOUND
// worded as for a job that does not exist otherwise. Its gallery goes into
// the call's audit record.
absl::StatusOr<jobs::JobRecord> VisibleJob(scheduler::Scheduler& scheduler, const jobs::JobCaller& caller,
                                           const std::string& job_id) {
  const absl::Status not_found = absl::NotFoundError(absl::StrCat("no job ", QuoteBounded(job_id, 64)));
  absl::StatusOr<jobs::JobRecord> job = scheduler.store().Get(job_id);
  if (!job.ok()) return job.status().code() == absl::StatusCode::kNotFound ? not_found : job.status();
  TESSERA_RETURN_IF_ERROR(jobs::CheckJobVisible(caller, *job, not_found));
  return job;
}

}  // namespace

grpc::Status SchedulerServiceImpl::Submit(grpc::ServerContext* context, const v1::SubmitJobRequest* request,
                                          v1::JobInfo* response) {
  const jobs::JobCaller caller = jobs::CallerOf(*context);
  scheduler::SubmitOptions options;
  options.owner = jobs::OwnerOf(caller.identity);
  options.gallery = caller.identity.gallery;  // the one the interceptor found in the spec (and authorized)
  options.may_read_job = [&caller](const jobs::JobRecord& job) {
    return jobs::CheckJobVisible(caller, job, absl::NotFoundError("not visible"));
  };
  absl::StatusOr<v1::JobInfo> info = scheduler_->Submit(*request, options);
  if (!info.ok()) return jobs::JobRpcStatus(*context, info.status());
  return jobs::Respond(std::move(info), response);
}

grpc::Status SchedulerServiceImpl::Watch(grpc::ServerContext* context, const v1::WatchJobRequest* request,
                                         grpc::ServerWriter<v1::JobEvent>* writer) {
  absl::StatusOr<jobs::JobRecord> job = VisibleJob(*scheduler_, jobs::CallerOf(*context), request->job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  absl::Status status = scheduler_->Watch(
      job->job_id, request->after_sequence(), [&](const v1::JobEvent& e) { return writer->Write(e); },
      [&] { return context->IsCancelled(); });
  if (!status.ok() && context->IsCancelled()) status = CheckNotCancelled(*context);
  return ToGrpcStatus(status);
}

grpc::Status SchedulerServiceImpl::Cancel(grpc::ServerContext* context, const v1::JobRef* request,
                                          v1::JobInfo* response) {
  absl::StatusOr<jobs::JobRecord> job = VisibleJob(*scheduler_, jobs::CallerOf(*context), request->job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  return jobs::Respond(scheduler_->Cancel(job->job_id), response);
}

grpc::Status SchedulerServiceImpl::Delete(grpc::ServerContext* context, const v1::JobRef* request,
                                          v1::JobInfo* response) {
  const jobs::JobCaller caller = jobs::CallerOf(*context);
  absl::StatusOr<jobs::JobRecord> job = VisibleJob(*scheduler_, caller, request->job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  const std::string who = caller.identity.principal.empty() ? std::string("a client") : caller.identity.principal;
  return jobs::Respond(scheduler_->DeleteResults(job->job_id, absl::StrCat("deleted by ", who)), response);
}

grpc::Status SchedulerServiceImpl::Get(grpc::ServerContext* context, const v1::JobRef* request,
                                       v1::JobInfo* response) {
  absl::StatusOr<jobs::JobRecord> job = VisibleJob(*scheduler_, jobs::CallerOf(*context), request->job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response = scheduler::ToJobInfo(*job);
  return grpc::Status::OK;
}

grpc::Status SchedulerServiceImpl::GetResult(grpc::ServerContext* context, const v1::JobRef* request,
                                             v1::JobResult* response) {
  absl::StatusOr<jobs::JobRecord> job = VisibleJob(*scheduler_, jobs::CallerOf(*context), request->job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  return jobs::Respond(scheduler_->GetResult(job->job_id), response);
}

grpc::Status SchedulerServiceImpl::List(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                                        v1::ListJobsResponse* response) {
  const CallIdentity caller = CallerIdentity(context);
  return jobs::Respond(
      scheduler_->List(*request, [&](jobs::JobFilter* filter) { return jobs::RestrictListing(caller, filter); }),
      response);
}

grpc::Status SchedulerServiceImpl::ListWorkers(grpc::ServerContext*, const v1::ListWorkersRequest*,
                                               v1::ListWorkersResponse* response) {
  for (v1::WorkerInfo& w : scheduler_->Workers()) *response->add_workers() = std::move(w);
  return grpc::Status::OK;
}

grpc::Status SchedulerServiceImpl::DownloadFile(grpc::ServerContext* context, const v1::DownloadJobFileRequest* request,
                                                grpc::ServerWriter<v1::FileChunk>* writer) {
  absl::StatusOr<jobs::JobRecord> job = VisibleJob(*scheduler_, jobs::CallerOf(*context), request->job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  absl::StatusOr<v1::JobResult> result = scheduler_->GetResult(job->job_id);  // SUCCEEDED, not deleted
  if (!result.ok()) return ToGrpcStatus(result.status());
  absl::Status status = scheduler::StreamResultFile(
      *result, request->name(), request->offset(), kDownloadChunkBytes,
      [&](const v1::FileChunk& chunk) { return writer->Write(chunk); }, [&] { return context->IsCancelled(); });
  if (!status.ok() && context->IsCancelled()) status = CheckNotCancelled(*context);
  return ToGrpcStatus(status);
}

grpc::Status SchedulerServiceImpl::GetPreview(grpc::ServerContext* context, const v1::JobPreviewRequest* request,
                                              v1::JobPreview* response) {
  absl::StatusOr<jobs::JobRecord> job = VisibleJob(*scheduler_, jobs::CallerOf(*context), request->job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  absl::StatusOr<v1::JobResult> result = scheduler_->GetResult(job->job_id);  // SUCCEEDED, not deleted
  if (!result.ok()) return ToGrpcStatus(result.status());
  if (result->kind().empty()) result->set_kind(job->kind);
  return jobs::Respond(scheduler::RenderJobPreview(*result, *request), response);
}

}  // namespace tessera
