#include "services/jobs/testing/resubmission.h"

#include <cstdlib>
#include <filesystem>
#include <thread>
#include <utility>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status.h"
#include "services/jobs/job_store.h"

namespace tessera::jobs::testing {
namespace {

constexpr absl::Duration kJobTimeout = absl::Seconds(60);

// Every job the store holds (of any kind and state).
size_t JobCount(ResubmitKind& kind) {
  JobFilter all;
  all.limit = 100000;
  absl::StatusOr<std::vector<JobRecord>> jobs = kind.jobs().scheduler().store().List(all);
  EXPECT_TRUE(jobs.ok()) << jobs.status();
  return jobs.ok() ? jobs->size() : 0;
}

// Submits `which` and waits until it ends; "" (after a failure) unless it
// ended in `want`.
std::string RunToEnd(ResubmitKind& kind, KindRequest which, const std::string& request_id, v1::JobState want) {
  absl::StatusOr<SubmitAnswer> submitted = kind.Submit(which, request_id);
  EXPECT_TRUE(submitted.ok()) << request_id << ": " << submitted.status();
  if (!submitted.ok()) return "";
  absl::StatusOr<v1::JobInfo> ended = kind.jobs().WaitUntilEnded(submitted->job_id, kJobTimeout);
  EXPECT_TRUE(ended.ok()) << ended.status();
  if (!ended.ok()) return "";
  EXPECT_EQ(ended->state(), want) << request_id << ": " << ended->error_message();
  return ended->state() == want ? submitted->job_id : "";
}

// `which` again under `request_id`: job `job_id` in `state`, and no new job.
void ExpectSameJob(ResubmitKind& kind, KindRequest which, const std::string& request_id, const std::string& job_id,
                   v1::JobState state) {
  SCOPED_TRACE(absl::StrCat("resubmit of '", request_id, "' (", v1::JobState_Name(state), ")"));
  const size_t jobs_before = JobCount(kind);
  absl::StatusOr<SubmitAnswer> again = kind.Submit(which, request_id);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->job_id, job_id);
  EXPECT_EQ(again->state, state);
  EXPECT_EQ(JobCount(kind), jobs_before) << "a resubmit made a new job";
  absl::StatusOr<v1::JobInfo> now = kind.jobs().scheduler().Get(job_id);
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_EQ(now->state(), state) << "a resubmit changed the job";
}

// kChanged under `request_id`: ALREADY_EXISTS naming the id, and no new job.
void ExpectAnotherRequestRefused(ResubmitKind& kind, const std::string& request_id) {
  SCOPED_TRACE(absl::StrCat("another request under '", request_id, "'"));
  const size_t jobs_before = JobCount(kind);
  absl::StatusOr<SubmitAnswer> other = kind.Submit(KindRequest::kChanged, request_id);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kAlreadyExists) << other.status();
  EXPECT_NE(other.status().message().find(absl::StrCat("'", request_id, "'")), absl::string_view::npos)
      << other.status();
  EXPECT_EQ(JobCount(kind), jobs_before);
}

}  // namespace

ResubmitKind::~ResubmitKind() = default;

absl::Status ResubmitKind::Start(const std::string& state_dir) {
  if (jobs_) return absl::FailedPreconditionError("started already");
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const Engine> engine, CreateEngine(state_dir));
  TESSERA_ASSIGN_OR_RETURN(jobs_, scheduler::testing::InProcessScheduler::Start(state_dir, {engine}));
  return Attach(&jobs_->scheduler(), state_dir);
}

void ResubmitKind::Stop() {
  jobs_.reset();  // stops the scheduler (an engine may call the service until then)
  DestroyService();
}

std::string FreshStateDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::filesystem::path dir = std::filesystem::path(tmp != nullptr ? tmp : "/tmp") / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::string ExpectResubmitAfterSuccess(ResubmitKind& kind, const std::string& request_id) {
  const std::string job_id = RunToEnd(kind, KindRequest::kSucceeds, request_id, v1::JOB_STATE_SUCCEEDED);
  if (job_id.empty()) return "";
  ExpectSameJob(kind, KindRequest::kSucceeds, request_id, job_id, v1::JOB_STATE_SUCCEEDED);
  absl::Status result = kind.ReadResult(job_id);
  EXPECT_TRUE(result.ok()) << result;
  ExpectAnotherRequestRefused(kind, request_id);
  return job_id;
}

std::string ExpectResubmitAfterFailure(ResubmitKind& kind, const std::string& request_id) {
  const std::string job_id = RunToEnd(kind, KindRequest::kFails, request_id, v1::JOB_STATE_FAILED);
  if (job_id.empty()) return "";
  ExpectSameJob(kind, KindRequest::kFails, request_id, job_id, v1::JOB_STATE_FAILED);
  ExpectAnotherRequestRefused(kind, request_id);
  return job_id;
}

std::string ExpectResubmitAfterCancel(ResubmitKind& kind, const std::string& request_id) {
  absl::StatusOr<SubmitAnswer> submitted = kind.Submit(KindRequest::kSlow, request_id);
  EXPECT_TRUE(submitted.ok()) << submitted.status();
  if (!submitted.ok()) return "";
  const std::string job_id = submitted->job_id;
  const absl::Time give_up = absl::Now() + kJobTimeout;
  absl::StatusOr<v1::JobInfo> info = kind.jobs().scheduler().Get(job_id);
  while (info.ok() && info->state() == v1::JOB_STATE_QUEUED && absl::Now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    info = kind.jobs().scheduler().Get(job_id);
  }
  EXPECT_TRUE(info.ok()) << info.status();
  if (!info.ok()) return "";
  EXPECT_EQ(info->state(), v1::JOB_STATE_RUNNING) << "the slow job should be running now";
  absl::Status cancelled = kind.Cancel(job_id);
  EXPECT_TRUE(cancelled.ok()) << cancelled;
  absl::StatusOr<v1::JobInfo> ended = kind.jobs().WaitUntilEnded(job_id, kJobTimeout);
  EXPECT_TRUE(ended.ok()) << ended.status();
  if (!ended.ok()) return "";
  EXPECT_EQ(ended->state(), v1::JOB_STATE_CANCELLED) << ended->error_message();
  if (ended->state() != v1::JOB_STATE_CANCELLED) return "";
  ExpectSameJob(kind, KindRequest::kSlow, request_id, job_id, v1::JOB_STATE_CANCELLED);
  ExpectAnotherRequestRefused(kind, request_id);
  return job_id;
}

void ExpectResubmitAcrossARestart(ResubmitKind& kind, const std::string& state_dir) {
  const std::string succeeded = ExpectResubmitAfterSuccess(kind, "restart-ok");
  const std::string failed = ExpectResubmitAfterFailure(kind, "restart-fail");
  const std::string cancelled = ExpectResubmitAfterCancel(kind, "restart-cancel");
  ASSERT_FALSE(succeeded.empty() || failed.empty() || cancelled.empty());

  kind.Stop();
  absl::Status restarted = kind.Start(state_dir);
  ASSERT_TRUE(restarted.ok()) << restarted;

  SCOPED_TRACE("after a restart");
  ExpectSameJob(kind, KindRequest::kSucceeds, "restart-ok", succeeded, v1::JOB_STATE_SUCCEEDED);
  absl::Status result = kind.ReadResult(succeeded);
  EXPECT_TRUE(result.ok()) << result;
  ExpectSameJob(kind, KindRequest::kFails, "restart-fail", failed, v1::JOB_STATE_FAILED);
  ExpectSameJob(kind, KindRequest::kSlow, "restart-cancel", cancelled, v1::JOB_STATE_CANCELLED);
  for (const char* id : {"restart-ok", "restart-fail", "restart-cancel"}) ExpectAnotherRequestRefused(kind, id);
}

}  // namespace tessera::jobs::testing
