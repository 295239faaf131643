#include "services/scheduler/testing/in_process_scheduler.h"

#include <filesystem>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status.h"
#include "services/jobs/job_store.h"
#include "services/jobs/sql_database.h"

namespace tessera::scheduler::testing {

namespace fs = std::filesystem;

absl::StatusOr<std::unique_ptr<InProcessScheduler>> InProcessScheduler::Start(
    const std::string& state_dir, const std::vector<std::shared_ptr<const jobs::Engine>>& engines,
    InProcessSchedulerOptions options) {
  std::unique_ptr<InProcessScheduler> out(new InProcessScheduler());
  out->state_dir_ = state_dir;
  out->results_dir_ = (fs::path(state_dir) / "results").string();
  std::error_code ec;
  fs::create_directories(out->results_dir_, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", out->results_dir_, ": ", ec.message()));

  out->engines_ = std::make_unique<jobs::EngineRegistry>();
  for (const std::shared_ptr<const jobs::Engine>& engine : engines) {
    TESSERA_RETURN_IF_ERROR(out->engines_->Add(engine));
  }
  out->worker_ = std::make_unique<InProcessWorker>(options.name + "/local", out->engines_.get(), out->results_dir_,
                                                   options.slots);
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<jobs::SqlDatabase> db,
                           jobs::OpenSqliteDatabase((fs::path(state_dir) / "jobs.db").string()));
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<jobs::JobStore> store, jobs::JobStore::Open(std::move(db)));

  // The worker is the fixture's, not the scheduler's.
  std::vector<WorkerSlots> workers;
  workers.push_back({std::shared_ptr<Worker>(out->worker_.get(), [](Worker*) {}), options.slots});
  out->scheduler_ =
      std::make_unique<Scheduler>(options, std::move(store), out->engines_.get(), std::move(workers));
  TESSERA_RETURN_IF_ERROR(out->scheduler_->Start());
  return out;
}

InProcessScheduler::~InProcessScheduler() {
  if (scheduler_) scheduler_->Stop();
  scheduler_.reset();
  worker_.reset();
  engines_.reset();
}

absl::StatusOr<v1::JobInfo> InProcessScheduler::WaitUntilEnded(const std::string& job_id, absl::Duration timeout) {
  const absl::Time give_up = absl::Now() + timeout;
  while (true) {
    TESSERA_ASSIGN_OR_RETURN(v1::JobInfo info, scheduler_->Get(job_id));
    if (info.state() == v1::JOB_STATE_SUCCEEDED || info.state() == v1::JOB_STATE_FAILED ||
        info.state() == v1::JOB_STATE_CANCELLED) {
      return info;
    }
    if (absl::Now() > give_up) {
      return absl::DeadlineExceededError(absl::StrCat("job '", job_id, "' is still ",
                                                      v1::JobState_Name(info.state()), " after ",
                                                      absl::FormatDuration(timeout)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace tessera::scheduler::testing
