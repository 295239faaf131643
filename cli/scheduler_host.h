// The scheduler and worker roles of `tessera serve`:
//   all        (default) every service, the scheduler, and an in-process
//              worker running this process's engines (plus --worker ones)
//   scheduler  the SchedulerService alone, placing jobs on --worker processes
//   worker     every service and the WorkerService a scheduler drives
// Jobs live in --store (default sqlite:<state dir>/jobs.db; postgresql://...
// for replicated schedulers); result files under <state dir>/results.
#ifndef TESSERA_CLI_SCHEDULER_HOST_H_
#define TESSERA_CLI_SCHEDULER_HOST_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/hosted_services.h"
#include "services/jobs/engine.h"
#include "services/parallel/rendezvous_service.h"
#include "services/scheduler/in_process_worker.h"
#include "services/scheduler/scheduler.h"
#include "services/scheduler/scheduler_service.h"
#include "services/scheduler/worker_service.h"
#include "services/server/bearer_channel.h"
#include "services/server/server_options.h"

namespace tessera::cli {

struct SchedulerHostOptions {
  std::string role = "all";          // all, scheduler, worker
  std::string state_dir;             // default <first data root>/state
  std::string store;                 // default sqlite:<state_dir>/jobs.db
  std::vector<std::string> workers;  // remote workers, host:port[*slots]
  int local_slots = 1;               // in-process worker slots (role all)
  int64_t max_queued = 256;                // the whole queue
  int64_t max_queued_per_principal = 64;   // one principal's queued jobs
  // Finished jobs' results deleted this long after they ended (0: kept).
  absl::Duration job_retention = absl::Hours(24 * 7);
  int64_t results_max_bytes = 0;  // 0: no budget
  std::string name;                  // default "scheduler"
  // How --worker processes are reached: TLS (--peer-tls-*) and the bearer
  // token they require (--peer-token-file); default plaintext, no token.
  PeerChannelSecurity peer;
};

struct HostedScheduler {
  std::unique_ptr<jobs::EngineRegistry> engines;
  std::unique_ptr<scheduler::InProcessWorker> local_worker;
  std::unique_ptr<scheduler::Scheduler> scheduler;
  std::unique_ptr<SchedulerServiceImpl> scheduler_service;
  std::unique_ptr<WorkerServiceImpl> worker_service;
  // Where the ranks of one job in several processes agree on their NCCL id
  // (roles all and scheduler: the scheduler places the ranks).
  std::unique_ptr<RendezvousServiceImpl> rendezvous_service;

  // Registers the gRPC services (before host.Start()).
  void AddTo(ServiceHost& host);
};

// Creates the role's parts and starts the scheduler (recovering the jobs of an
// earlier run). The hosted modules' engines (HostedModule::AddEngines) run in
// this process's worker (roles all and worker); in role all their job RPCs
// submit to that scheduler (in role worker they answer FAILED_PRECONDITION). `services` must outlive
// the result, and the result the host.
absl::StatusOr<HostedScheduler> CreateHostedScheduler(const SchedulerHostOptions& options,
                                                      const ServerOptions& server, HostedServices& services);

}  // namespace tessera::cli

#endif  // TESSERA_CLI_SCHEDULER_HOST_H_
