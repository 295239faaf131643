#include "services/jobs/job_registry.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "services/common/random_id.h"

namespace tessera::jobs {

bool IsTerminal(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kFailed || state == JobState::kCancelled;
}

absl::string_view JobStateName(JobState state) {
  switch (state) {
    case JobState::kQueued: return "QUEUED";
    case JobState::kRunning: return "RUNNING";
    case JobState::kSucceeded: return "SUCCEEDED";
    case JobState::kFailed: return "FAILED";
    case JobState::kCancelled: return "CANCELLED";
  }
  return "UNKNOWN";
}

Job::Job(std::string id, std::string kind)
    : id_(std::move(id)), kind_(std::move(kind)), created_(absl::Now()), updated_(created_) {}

bool Job::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ != JobState::kQueued) return false;
  state_ = JobState::kRunning;
  ++version_;
  updated_ = absl::Now();
  changed_.notify_all();
  return true;
}

void Job::SetProgress(JobProgress progress) {
  std::lock_guard<std::mutex> lock(mu_);
  if (IsTerminal(state_)) return;
  progress_ = std::move(progress);
  ++version_;
  updated_ = absl::Now();
  changed_.notify_all();
}

void Job::EndLocked(JobState state, absl::Status error, std::shared_ptr<const JobPayload> result) {
  state_ = state;
  error_ = std::move(error);
  result_ = std::move(result);
  ++version_;
  updated_ = absl::Now();
  changed_.notify_all();
}

void Job::Succeed(std::shared_ptr<const JobPayload> result) {
  std::lock_guard<std::mutex> lock(mu_);
  if (IsTerminal(state_)) return;
  EndLocked(JobState::kSucceeded, absl::OkStatus(), std::move(result));
}

void Job::Fail(absl::Status error) {
  std::lock_guard<std::mutex> lock(mu_);
  if (IsTerminal(state_)) return;
  if (error.ok()) error = absl::InternalError("job failed without an error");
  const JobState state = error.code() == absl::StatusCode::kCancelled ? JobState::kCancelled : JobState::kFailed;
  EndLocked(state, std::move(error), nullptr);
}

void Job::RequestCancel() {
  cancel_.store(true);
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ == JobState::kQueued) {
    EndLocked(JobState::kCancelled, absl::CancelledError("cancelled before it started"), nullptr);
  } else if (state_ == JobState::kRunning) {
    ++version_;  // watchers see cancel_requested
    updated_ = absl::Now();
    changed_.notify_all();
  }
}

JobSnapshot Job::SnapshotLocked() const {
  JobSnapshot s;
  s.id = id_;
  s.kind = kind_;
  s.state = state_;
  s.progress = progress_;
  s.version = version_;
  s.error = error_;
  s.cancel_requested = cancel_.load();
  s.created = created_;
  s.updated = updated_;
  s.result = result_;
  return s;
}

JobSnapshot Job::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return SnapshotLocked();
}

JobSnapshot Job::WaitForChange(int64_t after_version, absl::Time deadline) const {
  std::unique_lock<std::mutex> lock(mu_);
  const auto done = [&] { return version_ > after_version || IsTerminal(state_); };
  while (!done()) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    changed_.wait_for(lock, absl::ToChronoMicroseconds(std::min(left, absl::Seconds(1))));
  }
  return SnapshotLocked();
}

JobRegistry::JobRegistry(JobRegistryOptions options) : options_(options) {}

absl::Status JobRegistry::ValidateJobId(absl::string_view id) {
  if (id.empty() || id.size() > 128) {
    return absl::InvalidArgumentError(absl::StrCat("job id must have 1 to 128 characters, got ", id.size()));
  }
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("job id '", absl::CHexEscape(id), "' may only use letters, digits, '.', '_' and '-'"));
    }
  }
  return absl::OkStatus();
}

void JobRegistry::DropEndedLocked(absl::Time now) {
  std::vector<std::pair<absl::Time, std::string>> ended;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    const JobSnapshot s = it->second->Snapshot();
    if (!IsTerminal(s.state)) {
      ++it;
      continue;
    }
    if (now - s.updated >= options_.finished_ttl) {
      it = jobs_.erase(it);
      continue;
    }
    ended.emplace_back(s.updated, it->first);
    ++it;
  }
  if (static_cast<int>(ended.size()) <= options_.max_finished_jobs) return;
  std::sort(ended.begin(), ended.end());
  const size_t excess = ended.size() - static_cast<size_t>(std::max(0, options_.max_finished_jobs));
  for (size_t i = 0; i < excess; ++i) jobs_.erase(ended[i].second);
}

absl::StatusOr<std::shared_ptr<Job>> JobRegistry::GetOrCreate(const std::string& id, const std::string& kind,
                                                              bool* created) {
  *created = false;
  if (!id.empty()) {
    if (absl::Status s = ValidateJobId(id); !s.ok()) return s;
  }
  std::lock_guard<std::mutex> lock(mu_);
  DropEndedLocked(absl::Now());
  if (!id.empty()) {
    auto it = jobs_.find(id);
    if (it != jobs_.end()) {
      if (it->second->kind() != kind) {
        return absl::AlreadyExistsError(
            absl::StrCat("job '", id, "' exists and is a ", it->second->kind(), " job, not ", kind));
      }
      return it->second;
    }
  }
  std::string new_id = id;
  while (new_id.empty() || jobs_.count(new_id) > 0) new_id = RandomId("job-");
  auto job = std::make_shared<Job>(new_id, kind);
  jobs_.emplace(new_id, job);
  *created = true;
  return job;
}

absl::StatusOr<std::shared_ptr<Job>> JobRegistry::Get(const std::string& id) const {
  if (id.empty()) return absl::InvalidArgumentError("job_id is empty");
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat("no job '", absl::CHexEscape(id), "' (unknown, or ended more than ",
                                            absl::FormatDuration(options_.finished_ttl), " ago)"));
  }
  return it->second;
}

bool JobRegistry::Remove(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  return jobs_.erase(id) > 0;
}

void JobRegistry::CancelAll() {
  std::vector<std::shared_ptr<Job>> jobs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, job] : jobs_) jobs.push_back(job);
  }
  for (const auto& job : jobs) job->RequestCancel();
}

std::vector<JobSnapshot> JobRegistry::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<JobSnapshot> out;
  for (const auto& [id, job] : jobs_) out.push_back(job->Snapshot());
  return out;
}

size_t JobRegistry::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return jobs_.size();
}

}  // namespace tessera::jobs
