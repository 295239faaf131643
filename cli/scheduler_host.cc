#include "cli/scheduler_host.h"

#include <filesystem>
#include <system_error>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status.h"
#include "services/server/bearer_channel.h"
#include "services/scheduler/remote_worker.h"

namespace tessera::cli {

namespace fs = std::filesystem;

void HostedScheduler::AddTo(ServiceHost& host) {
  if (scheduler_service) host.AddService(scheduler_service.get());
  if (worker_service) host.AddService(worker_service.get());
  if (rendezvous_service) host.AddService(rendezvous_service.get());
}

absl::StatusOr<HostedScheduler> CreateHostedScheduler(const SchedulerHostOptions& options,
                                                      const ServerOptions& server, HostedServices& services) {
  if (options.role != "all" && options.role != "scheduler" && options.role != "worker") {
    return absl::InvalidArgumentError(
        absl::StrCat("--role '", options.role, "' is not one of all, scheduler, worker"));
  }
  if (options.local_slots < 1 || options.local_slots > 64) {
    return absl::InvalidArgumentError("--local-slots must be in 1..64");
  }
  std::string state_dir = options.state_dir;
  if (state_dir.empty()) {
    if (server.data_roots.empty()) return absl::InvalidArgumentError("--state-dir is required without --data-root");
    state_dir = (fs::path(server.data_roots.front()) / "state").string();
  }
  std::error_code ec;
  fs::create_directories(fs::path(state_dir) / "results", ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create the state directory '", state_dir, "': ", ec.message()));
  }
  const std::string results_dir = (fs::path(state_dir) / "results").string();
  const std::string name = options.name.empty() ? "scheduler" : options.name;
  // Attempts a crash left half-written (their jobs are re-queued and start
  // over): a worker's own, or a scheduler's half-received from a worker.
  {
    absl::StatusOr<int> leftovers = scheduler::InProcessWorker::RemoveLeftoverAttempts(results_dir);
    if (!leftovers.ok()) return leftovers.status();
    if (*leftovers > 0) TESSERA_LOG(INFO) << "removed " << *leftovers << " unfinished attempt folder(s) under " << results_dir;
  }

  HostedScheduler out;
  out.engines = std::make_unique<jobs::EngineRegistry>();
  if (options.role != "scheduler") {
    TESSERA_RETURN_IF_ERROR(services.AddEngines(state_dir, *out.engines));
  }
  if (options.role == "worker") {
    out.local_worker =
        std::make_unique<scheduler::InProcessWorker>(name + "/worker", out.engines.get(), results_dir, options.local_slots);
    out.worker_service = std::make_unique<WorkerServiceImpl>(out.local_worker.get());
    TESSERA_LOG(INFO) << "worker: engines for " << out.engines->kinds().size() << " kinds, results under "
                      << results_dir;
    return out;
  }

  std::vector<scheduler::WorkerSlots> workers;
  if (options.role == "all") {
    out.local_worker =
        std::make_unique<scheduler::InProcessWorker>(name + "/local", out.engines.get(), results_dir, options.local_slots);
    // Not owned by the scheduler: HostedScheduler keeps it.
    workers.push_back({std::shared_ptr<scheduler::Worker>(out.local_worker.get(), [](scheduler::Worker*) {}),
                       options.local_slots});
  }
  for (const std::string& spec : options.workers) {
    std::string address = spec;
    int slots = 1;
    const size_t star = spec.rfind('*');
    if (star != std::string::npos) {
      address = spec.substr(0, star);
      if (!absl::SimpleAtoi(spec.substr(star + 1), &slots) || slots < 1 || slots > 64) {
        return absl::InvalidArgumentError(absl::StrCat("--worker '", spec, "': expected HOST:PORT or HOST:PORT*SLOTS"));
      }
    }
    if (address.find(':') == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("--worker '", spec, "': expected HOST:PORT"));
    }
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(server.max_receive_message_bytes);
    auto channel = CreatePeerChannel(address, options.peer, args);
    workers.push_back({std::make_shared<scheduler::RemoteWorker>(address, channel, results_dir, absl::Seconds(2)), slots});
  }
  if (workers.empty()) {
    return absl::InvalidArgumentError("--role scheduler needs at least one --worker HOST:PORT");
  }
  const std::string store_url = options.store.empty() ? absl::StrCat("sqlite:", state_dir, "/jobs.db") : options.store;
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<jobs::SqlDatabase> db, jobs::OpenSqlDatabase(store_url));
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<jobs::JobStore> store, jobs::JobStore::Open(std::move(db)));
  scheduler::SchedulerOptions scheduler_options;
  scheduler_options.name = name;
  scheduler_options.max_queued = options.max_queued;
  scheduler_options.max_queued_per_principal = options.max_queued_per_principal;
  scheduler_options.job_retention = options.job_retention;
  scheduler_options.results_max_bytes = options.results_max_bytes;
  out.scheduler = std::make_unique<scheduler::Scheduler>(scheduler_options, std::move(store), out.engines.get(),
                                                         std::move(workers));
  TESSERA_RETURN_IF_ERROR(out.scheduler->Start());
  out.scheduler_service = std::make_unique<SchedulerServiceImpl>(out.scheduler.get());
  out.rendezvous_service = std::make_unique<RendezvousServiceImpl>();
  TESSERA_RETURN_IF_ERROR(services.AttachScheduler(*out.scheduler, state_dir));
  TESSERA_LOG(INFO) << "scheduler " << name << ": store " << (options.store.empty() ? store_url : "(given)")
                    << ", " << options.workers.size() << " remote worker(s)"
                    << (options.role == "all" ? absl::StrCat(", in-process worker with ", options.local_slots,
                                                             " slot(s)")
                                              : std::string());
  return out;
}

}  // namespace tessera::cli
