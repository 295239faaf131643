#include "services/scheduler/in_process_worker.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/device.h"
#include "common/log.h"

namespace tessera::scheduler {

namespace fs = std::filesystem;

std::vector<v1::WorkerDevice> LocalDevices() {
  std::vector<v1::WorkerDevice> out;
  v1::WorkerDevice cpu;
  cpu.set_name("cpu");
  out.push_back(cpu);
  for (const GpuInfo& gpu : DeviceRegistry::Get().gpus()) {
    v1::WorkerDevice d;
    d.set_name(absl::StrCat("cuda:", gpu.ordinal, " ", gpu.name));
    d.set_total_bytes(static_cast<int64_t>(gpu.total_memory_bytes));
    absl::StatusOr<GpuMemoryInfo> memory = QueryGpuMemory(gpu.ordinal);
    d.set_free_bytes(memory.ok() ? static_cast<int64_t>(memory->free_bytes) : 0);
    out.push_back(d);
  }
  return out;
}

InProcessWorker::InProcessWorker(std::string name, const jobs::EngineRegistry* engines, std::string results_dir,
                                 int slots)
    : name_(std::move(name)), engines_(engines), results_dir_(std::move(results_dir)), slots_(slots) {}

absl::StatusOr<int> InProcessWorker::RemoveLeftoverAttempts(const std::string& results_dir) {
  std::error_code ec;
  int removed = 0;
  for (fs::directory_iterator it(results_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!absl::EndsWith(name, ".tmp") || name.find(".attempt-") == std::string::npos) continue;
    std::error_code rm;
    fs::remove_all(it->path(), rm);
    if (rm) return absl::InternalError(absl::StrCat("cannot remove ", it->path().string(), ": ", rm.message()));
    ++removed;
  }
  if (ec) return absl::InternalError(absl::StrCat("cannot list ", results_dir, ": ", ec.message()));
  return removed;
}

absl::StatusOr<v1::WorkerInfo> InProcessWorker::Describe() {
  v1::WorkerInfo info;
  info.set_name(name_);
  info.set_address("in-process");
  info.set_healthy(true);
  for (const std::string& kind : engines_->kinds()) info.add_kinds(kind);
  for (const std::string& type : engines_->spec_types()) info.add_spec_types(type);
  for (v1::WorkerDevice& d : LocalDevices()) *info.add_devices() = std::move(d);
  info.set_slots(slots_);
  info.set_running(running_.load());
  info.set_jobs_done(done_.load());
  return info;
}

AttemptResult InProcessWorker::Execute(const AttemptCall& call) {
  AttemptResult out;
  running_.fetch_add(1);
  struct Done {
    InProcessWorker* w;
    ~Done() {
      w->running_.fetch_sub(1);
      w->done_.fetch_add(1);
    }
  } done{this};

  absl::StatusOr<std::shared_ptr<const jobs::Engine>> engine = engines_->Find(call.spec.kind(), call.spec.spec());
  if (!engine.ok()) {
    out.status = engine.status();
    return out;
  }
  const fs::path final_dir = fs::path(results_dir_) / call.job_id;
  const fs::path work_dir = fs::path(results_dir_) / absl::StrCat(call.job_id, ".attempt-", call.attempt, ".tmp");
  std::error_code ec;
  fs::remove_all(work_dir, ec);
  fs::create_directories(work_dir, ec);
  if (ec) {
    out.status = absl::UnavailableError(
        absl::StrCat("worker ", name_, ": cannot create the result directory ", work_dir.string(), ": ", ec.message()));
    return out;
  }
  jobs::EngineContext context(call.job_id, work_dir.string(), call.cancel, call.deadline, call.on_progress);
  absl::StatusOr<jobs::EngineOutput> run = (*engine)->Run(call.spec.spec(), context);
  out.peak_device_bytes = context.peak_device_bytes();
  if (!run.ok()) {
    out.status = run.status();
    fs::remove_all(work_dir, ec);
    return out;
  }
  // Publish the files: one rename, so they appear all at once.
  fs::remove_all(final_dir, ec);
  fs::rename(work_dir, final_dir, ec);
  if (ec) {
    out.status = absl::UnavailableError(absl::StrCat("worker ", name_, ": cannot publish ", final_dir.string(), ": ",
                                                     ec.message()));
    fs::remove_all(work_dir, ec);
    return out;
  }
  out.result.set_job_id(call.job_id);
  out.result.set_kind((*engine)->kind());
  *out.result.mutable_result() = run->result;
  for (const jobs::EngineFile& file : run->files) {
    v1::ResultFile* f = out.result.add_files();
    f->set_name(file.name);
    f->set_path((final_dir / file.name).string());
    f->set_bytes(file.bytes);
  }
  out.status = absl::OkStatus();
  return out;
}

}  // namespace tessera::scheduler
