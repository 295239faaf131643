// The gRPC edge of the job core (job_core.h): what a service's job RPCs do
// with a grpc::ServerContext, so that each is one line in its adapter.
//
//   grpc::Status GetJob(grpc::ServerContext*, const v1::JobRef* r, v1::JobStatus* out) override {
//     return jobs::Respond(core_.Get(r->job_id()), out);
//   }
#ifndef TESSERA_SERVICES_JOBS_JOB_RPCS_H_
#define TESSERA_SERVICES_JOBS_JOB_RPCS_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>
#include <grpcpp/support/sync_stream.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/grpc_status.h"
#include "services/jobs/job_core.h"
#include "services/server/auth.h"
#include "services/server/call_checks.h"
#include "tessera/v1/common.pb.h"

namespace tessera::jobs {

// `status` as the call's grpc::Status; a full queue's RESOURCE_EXHAUSTED
// gets gRPC's retry-pushback trailer (gRFC A6), as SchedulerService.Submit
// sends it.
inline grpc::Status JobRpcStatus(grpc::ServerContext& context, const absl::Status& status) {
  if (status.code() == absl::StatusCode::kResourceExhausted) {
    context.AddTrailingMetadata("grpc-retry-pushback-ms", "2000");
  }
  return ToGrpcStatus(status);
}

// The caller of a job RPC as the job core sees it: the call's identity, and
// the gallery of each job it may see into the call's audit record.
inline JobCaller CallerOf(const grpc::ServerContextBase& context) {
  const grpc::ServerContextBase* call = &context;
  return JobCaller{CallerIdentity(call), [call](const std::string& gallery) { AnnotateCallGallery(call, gallery); }};
}

// A unary job RPC's answer: the value into *response, or the error.
template <typename T>
grpc::Status Respond(absl::StatusOr<T> value, T* response) {
  if (!value.ok()) return ToGrpcStatus(value.status());
  *response = *std::move(value);
  return grpc::Status::OK;
}

// WatchJob of a service whose progress is tessera.v1.Progress.
inline grpc::Status WatchJobRpc(const JobCore& core, const grpc::ServerContext& context, const v1::JobRef& ref,
                                grpc::ServerWriter<v1::Progress>* writer) {
  bool lost = false;  // a Write failed: the watcher stopped receiving
  absl::Status status = core.Watch(
      CallerOf(context), ref.job_id(), [&] { return context.IsCancelled(); },
      [&](const v1::Progress& progress) {
        lost = !writer->Write(progress);
        return !lost;
      });
  if (lost) status = StatusAfterFailedIo(context, status);
  if (!status.ok() && context.IsCancelled()) status = CheckNotCancelled(context);
  return ToGrpcStatus(status);
}

}  // namespace tessera::jobs

#endif  // TESSERA_SERVICES_JOBS_JOB_RPCS_H_
