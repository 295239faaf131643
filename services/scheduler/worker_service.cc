#include "services/scheduler/worker_service.h"

#include <atomic>
#include <mutex>
#include <thread>

#include "common/grpc_status.h"
#include "services/scheduler/job_info.h"
#include "services/scheduler/result_transfer.h"

namespace tessera {

grpc::Status WorkerServiceImpl::Execute(grpc::ServerContext* context, const v1::ExecuteRequest* request,
                                        grpc::ServerWriter<v1::ExecuteUpdate>* writer) {
  if (request->job_id().empty()) return ToGrpcStatus(absl::InvalidArgumentError("job_id is empty"));
  std::atomic<bool> cancel{false};
  std::atomic<bool> finished{false};
  // The engine polls `cancel`; this watcher turns the call's cancellation
  // (the scheduler gave up, or its process died) into it.
  std::thread watcher([&] {
    while (!finished.load()) {
      if (context->IsCancelled()) {
        cancel.store(true);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  std::mutex write_mu;
  scheduler::AttemptCall call;
  call.job_id = request->job_id();
  call.attempt = request->attempt();
  call.spec = request->spec();
  if (request->deadline_unix_ms() > 0) call.deadline = absl::FromUnixMillis(request->deadline_unix_ms());
  call.cancel = &cancel;
  call.on_progress = [&](const jobs::JobProgress& p) {
    v1::ExecuteUpdate update;
    *update.mutable_progress() = scheduler::ToProgress(request->job_id(), jobs::JobState::kRunning, p);
    std::lock_guard<std::mutex> lock(write_mu);
    if (!writer->Write(update)) cancel.store(true);
  };
  scheduler::AttemptResult result = worker_->Execute(call);
  finished.store(true);
  watcher.join();
  if (result.status.ok()) {
    // The files go to the scheduler, then this process's copy goes: its disk is scratch.
    absl::Status sent = scheduler::SendResultFiles(
        result.result.files(), scheduler::kResultChunkBytes, [&](const v1::ExecuteUpdate& chunk) {
          std::lock_guard<std::mutex> lock(write_mu);
          return writer->Write(chunk);
        });
    scheduler::RemoveResultFolder(result.result.files());
    if (!sent.ok()) result.status = sent;
  }
  v1::ExecuteUpdate update;
  v1::ExecuteOutcome* outcome = update.mutable_outcome();
  outcome->set_code(static_cast<int>(result.status.code()));
  outcome->set_message(std::string(result.status.message()));
  if (result.status.ok()) {
    *outcome->mutable_result() = result.result.result();
    *outcome->mutable_files() = result.result.files();
    for (v1::ResultFile& f : *outcome->mutable_files()) f.clear_path();  // a path on this machine only
  }
  outcome->set_peak_device_bytes(result.peak_device_bytes);
  std::lock_guard<std::mutex> lock(write_mu);
  writer->Write(update);
  return grpc::Status::OK;
}

grpc::Status WorkerServiceImpl::Describe(grpc::ServerContext*, const v1::DescribeWorkerRequest*,
                                         v1::WorkerInfo* response) {
  absl::StatusOr<v1::WorkerInfo> info = worker_->Describe();
  if (!info.ok()) return ToGrpcStatus(info.status());
  *response = *std::move(info);
  return grpc::Status::OK;
}

}  // namespace tessera
