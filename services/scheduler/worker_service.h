// tessera.v1.WorkerService: what `tessera serve --role worker` offers a
// scheduler in another process: runs one job attempt per Execute call on its
// InProcessWorker, streaming progress; the scheduler cancelling the call (or
// the call's deadline) stops the engine.
#ifndef TESSERA_SERVICES_SCHEDULER_WORKER_SERVICE_H_
#define TESSERA_SERVICES_SCHEDULER_WORKER_SERVICE_H_

#include "services/scheduler/in_process_worker.h"
#include "tessera/v1/scheduler.grpc.pb.h"

namespace tessera {

class WorkerServiceImpl final : public v1::WorkerService::Service {
 public:
  // `worker` must outlive the service.
  explicit WorkerServiceImpl(scheduler::InProcessWorker* worker) : worker_(worker) {}

  grpc::Status Execute(grpc::ServerContext* context, const v1::ExecuteRequest* request,
                       grpc::ServerWriter<v1::ExecuteUpdate>* writer) override;
  grpc::Status Describe(grpc::ServerContext* context, const v1::DescribeWorkerRequest* request,
                        v1::WorkerInfo* response) override;

 private:
  scheduler::InProcessWorker* worker_;
};

}  // namespace tessera

#endif  // TESSERA_SERVICES_SCHEDULER_WORKER_SERVICE_H_
