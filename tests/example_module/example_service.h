// tessera.testing.ExampleService: the example module's gRPC adapter. Like
// every job service it keeps only the mapping from its proto to the engine's
// spec; the job core does the rest (idempotent submit, find, get, cancel,
// watch, result), each RPC one line.
#ifndef TESSERA_TESTS_EXAMPLE_MODULE_EXAMPLE_SERVICE_H_
#define TESSERA_TESTS_EXAMPLE_MODULE_EXAMPLE_SERVICE_H_

#include <string>

#include <grpcpp/server_context.h>
#include <grpcpp/support/sync_stream.h>

#include "absl/status/status.h"
#include "services/jobs/job_core.h"
#include "tessera/testing/example.grpc.pb.h"

namespace tessera::example {

class ExampleServiceImpl final : public testing::ExampleService::Service {
 public:
  ExampleServiceImpl();

  // The scheduler Sum submits to (HostedModule::AttachScheduler forwards here).
  absl::Status AttachScheduler(scheduler::Scheduler* scheduler, const std::string& state_dir) {
    return jobs_.Attach(scheduler, state_dir);
  }

  grpc::Status Sum(grpc::ServerContext* context, const testing::SumRequest* request,
                   v1::JobStatus* response) override;
  grpc::Status WatchJob(grpc::ServerContext* context, const v1::JobRef* request,
                        grpc::ServerWriter<v1::Progress>* writer) override;
  grpc::Status GetJob(grpc::ServerContext* context, const v1::JobRef* request, v1::JobStatus* response) override;
  grpc::Status CancelJob(grpc::ServerContext* context, const v1::JobRef* request, v1::JobStatus* response) override;
  grpc::Status GetResult(grpc::ServerContext* context, const v1::JobRef* request,
                         testing::SumResult* response) override;

 private:
  jobs::JobCore jobs_;
};

}  // namespace tessera::example

#endif  // TESSERA_TESTS_EXAMPLE_MODULE_EXAMPLE_SERVICE_H_
