// A worker in another process (`tessera serve --role worker`), reached over
// gRPC. Execute streams the attempt; a broken stream (the worker died or the
// network failed) is reported as worker_lost, so the scheduler re-queues the
// job instead of failing it. The attempt's result files come with the stream
// and are kept under the scheduler's `results_dir` (result_transfer.h).
#ifndef TESSERA_SERVICES_SCHEDULER_REMOTE_WORKER_H_
#define TESSERA_SERVICES_SCHEDULER_REMOTE_WORKER_H_

#include <memory>
#include <string>

#include <grpcpp/channel.h>

#include "services/scheduler/worker.h"
#include "tessera/v1/scheduler.grpc.pb.h"

namespace tessera::scheduler {

class RemoteWorker : public Worker {
 public:
  // `address` is host:port; `channel` connects to it; `results_dir` is the
  // scheduler's results folder (as its InProcessWorker's).
  RemoteWorker(std::string address, std::shared_ptr<grpc::Channel> channel, std::string results_dir,
               absl::Duration probe_timeout);

  const std::string& name() const override { return name_; }
  absl::StatusOr<v1::WorkerInfo> Describe() override;
  AttemptResult Execute(const AttemptCall& call) override;

 private:
  const std::string name_;
  const std::string address_;
  const std::string results_dir_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  const absl::Duration probe_timeout_;
};

}  // namespace tessera::scheduler

#endif  // TESSERA_SERVICES_SCHEDULER_REMOTE_WORKER_H_
