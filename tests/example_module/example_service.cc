#include "tests/example_module/example_service.h"

#include "services/jobs/job_rpcs.h"

namespace tessera::example {

ExampleServiceImpl::ExampleServiceImpl() : jobs_(jobs::JobCoreOptions{{"example.sum", "sum"}}) {}

grpc::Status ExampleServiceImpl::Sum(grpc::ServerContext* context, const testing::SumRequest* request,
                                     v1::JobStatus* response) {
  // The request is the spec as it is (no uploads to resolve): prepare copies it.
  absl::StatusOr<jobs::SubmittedJob> job = jobs_.Submit(
      {jobs::CallerOf(*context), request, request->job_id(), "job_id",
       [&] { return jobs::SpecOf(absl::StatusOr<testing::SumRequest>(*request)); }});
  if (job.ok()) *response = jobs::ToJobStatus(job->info);
  return jobs::JobRpcStatus(*context, job.status());
}

grpc::Status ExampleServiceImpl::WatchJob(grpc::ServerContext* context, const v1::JobRef* request,
                                          grpc::ServerWriter<v1::Progress>* writer) {
  return jobs::WatchJobRpc(jobs_, *context, *request, writer);
}

grpc::Status ExampleServiceImpl::GetJob(grpc::ServerContext* context, const v1::JobRef* request, v1::JobStatus* response) {
  return jobs::Respond(jobs_.Get(jobs::CallerOf(*context), request->job_id()), response);
}

grpc::Status ExampleServiceImpl::CancelJob(grpc::ServerContext* context, const v1::JobRef* request,
                                           v1::JobStatus* response) {
  return jobs::Respond(jobs_.Cancel(jobs::CallerOf(*context), request->job_id()), response);
}

grpc::Status ExampleServiceImpl::GetResult(grpc::ServerContext* context, const v1::JobRef* request,
                                           testing::SumResult* response) {
  return jobs::Respond(jobs_.TypedResult<testing::SumResult>(jobs::CallerOf(*context), request->job_id()), response);
}

}  // namespace tessera::example
