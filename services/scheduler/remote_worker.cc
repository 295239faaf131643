#include "services/scheduler/remote_worker.h"

#include <thread>

#include <grpcpp/client_context.h>

#include "absl/strings/str_cat.h"
#include "services/scheduler/job_info.h"
#include "services/scheduler/result_transfer.h"

namespace tessera::scheduler {

RemoteWorker::RemoteWorker(std::string address, std::shared_ptr<grpc::Channel> channel, std::string results_dir,
                           absl::Duration probe_timeout)
    : name_(absl::StrCat("worker@", address)),
      address_(std::move(address)),
      results_dir_(std::move(results_dir)),
      stub_(v1::WorkerService::NewStub(std::move(channel))),
      probe_timeout_(probe_timeout) {}

absl::StatusOr<v1::WorkerInfo> RemoteWorker::Describe() {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + probe_timeout_));
  v1::WorkerInfo info;
  grpc::Status status = stub_->Describe(&context, v1::DescribeWorkerRequest(), &info);
  if (!status.ok()) {
    return absl::UnavailableError(absl::StrCat("worker ", address_, ": ", status.error_message()));
  }
  info.set_address(address_);
  return info;
}

AttemptResult RemoteWorker::Execute(const AttemptCall& call) {
  AttemptResult out;
  grpc::ClientContext context;
  v1::ExecuteRequest request;
  request.set_job_id(call.job_id);
  request.set_attempt(call.attempt);
  *request.mutable_spec() = call.spec;
  if (call.deadline != absl::InfiniteFuture()) request.set_deadline_unix_ms(absl::ToUnixMillis(call.deadline));
  std::unique_ptr<grpc::ClientReader<v1::ExecuteUpdate>> reader = stub_->Execute(&context, request);
  // Turns the scheduler's cancel flag into cancelling the call.
  std::atomic<bool> done{false};
  std::thread canceller([&] {
    while (!done.load()) {
      if (call.cancel != nullptr && call.cancel->load()) {
        context.TryCancel();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  v1::ExecuteUpdate update;
  bool have_outcome = false;
  ResultReceiver received(results_dir_, call.job_id, call.attempt);
  absl::Status receiving;  // the first error keeping the result files
  while (reader->Read(&update)) {
    if (update.has_progress()) {
      if (call.on_progress) call.on_progress(FromProgress(update.progress()));
    } else if (update.has_file_chunk()) {
      if (receiving.ok()) receiving = received.Add(update.file_chunk());
      if (!receiving.ok()) context.TryCancel();  // the attempt fails with it below
    } else if (update.has_outcome()) {
      const v1::ExecuteOutcome& o = update.outcome();
      out.status = absl::Status(static_cast<absl::StatusCode>(o.code()), o.message());
      out.peak_device_bytes = o.peak_device_bytes();
      out.result.set_job_id(call.job_id);
      out.result.set_kind(call.spec.kind());
      *out.result.mutable_result() = o.result();
      *out.result.mutable_files() = o.files();
      have_outcome = true;
    }
  }
  grpc::Status finish = reader->Finish();
  done.store(true);
  canceller.join();
  if (!receiving.ok()) {
    out = AttemptResult();
    out.status = absl::Status(receiving.code(), absl::StrCat("keeping the result files of worker ", address_, ": ",
                                                             receiving.message()));
    return out;
  }
  if (have_outcome) {
    if (out.status.ok()) {
      if (absl::Status kept = received.Publish(out.result.mutable_files()); !kept.ok()) {
        out.status = absl::Status(kept.code(), absl::StrCat("keeping the result files of worker ", address_, ": ",
                                                            kept.message()));
      }
    }
    return out;
  }
  if (call.cancel != nullptr && call.cancel->load()) {
    out.status = absl::CancelledError(absl::StrCat("job ", call.job_id, " cancelled"));
    return out;
  }
  out.worker_lost = true;
  out.status = absl::UnavailableError(absl::StrCat("worker ", address_, " ended the attempt without an outcome (",
                                                   finish.error_code(), ": ", finish.error_message(), ")"));
  return out;
}

}  // namespace tessera::scheduler
