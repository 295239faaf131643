// The service side of scheduler jobs: JobStatus / Progress as the service APIs
// show them, finding jobs of a kind, the shared statuses (worker process, no
// result, full queue with its retry trailer) and upload-file sweeping, over an
// InProcessScheduler with two test engines.
#include "services/scheduler/service_jobs.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include <grpcpp/test/server_context_test_spouse.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "services/jobs/engine.h"
#include "services/scheduler/testing/in_process_scheduler.h"
#include "tessera/v1/scheduler.pb.h"

namespace tessera::scheduler {
namespace {

namespace fs = std::filesystem;
using jobs::JobRecord;
using jobs::JobState;

std::string TmpDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

// Spec: a tessera.v1.Progress; runs total_steps steps of 10 ms.
class StepsEngine : public jobs::Engine {
 public:
  explicit StepsEngine(std::string kind) : kind_(std::move(kind)) {}
  std::string kind() const override { return kind_; }
  std::string spec_type() const override { return "tessera.v1.Progress"; }
  absl::Status Validate(const google::protobuf::Any& spec) const override {
    v1::Progress p;
    return jobs::UnpackSpec(spec, &p);
  }
  absl::StatusOr<jobs::EngineOutput> Run(const google::protobuf::Any& spec, jobs::EngineContext& ctx) const override {
    v1::Progress p;
    TESSERA_RETURN_IF_ERROR(jobs::UnpackSpec(spec, &p));
    for (int64_t i = 0; i < p.total_steps(); ++i) {
      TESSERA_RETURN_IF_ERROR(ctx.CheckContinue());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    jobs::EngineOutput out;
    out.result.PackFrom(p);
    return out;
  }

 private:
  const std::string kind_;
};

constexpr ServiceJobKind kSteps{"test.steps", "steps"};

v1::Progress Steps(int64_t n, const std::string& stage = "") {
  v1::Progress p;
  p.set_total_steps(n);
  p.set_stage(stage);
  return p;
}

// A scheduler (one slot) running "test.steps" and "test.other" jobs.
class ServiceJobsTest : public ::testing::Test {
 protected:
  void StartScheduler(int64_t max_queued_per_priority = 256) {
    const std::string state_dir = TmpDir() + "/" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    testing::InProcessSchedulerOptions options;
    options.max_queued_per_priority = max_queued_per_priority;
    auto jobs = testing::InProcessScheduler::Start(
        state_dir, {std::make_shared<StepsEngine>("test.steps"), std::make_shared<StepsEngine>("test.other")},
        options);
    ASSERT_TRUE(jobs.ok()) << jobs.status();
    jobs_ = *std::move(jobs);
  }

  Scheduler& scheduler() { return jobs_->scheduler(); }

  v1::JobInfo Submit(const std::string& kind, const v1::Progress& spec, const std::string& request_id = "") {
    grpc::ServerContext context;
    absl::StatusOr<v1::JobInfo> info = SubmitJob(scheduler(), context, kind, spec, request_id);
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? *info : v1::JobInfo();
  }

  void WaitUntilRunning(const std::string& job_id) {
    for (int i = 0; i < 500; ++i) {
      absl::StatusOr<v1::JobInfo> info = scheduler().Get(job_id);
      ASSERT_TRUE(info.ok()) << info.status();
      if (info->state() == v1::JOB_STATE_RUNNING) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    FAIL() << job_id << " did not start";
  }

  std::unique_ptr<testing::InProcessScheduler> jobs_;
};

TEST(ServiceJobs, ProgressAndStatusAsTheApisShowThem) {
  v1::JobInfo info;
  info.set_job_id("job-1");
  info.set_state(v1::JOB_STATE_RUNNING);
  info.set_created_unix_ms(10);
  info.set_updated_unix_ms(20);
  info.mutable_last_progress()->set_stage("rigid");
  info.mutable_last_progress()->set_fraction(0.25);
  info.mutable_last_progress()->set_message("level 1");
  v1::Progress p = ProgressOf(info);
  EXPECT_EQ(p.job_id(), "job-1");
  EXPECT_EQ(p.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(p.stage(), "rigid");
  EXPECT_EQ(p.message(), "level 1");
  info.set_cancel_requested(true);
  EXPECT_EQ(ProgressOf(info).message(), "cancelling: level 1");

  info.set_state(v1::JOB_STATE_SUCCEEDED);
  p = ProgressOf(info);
  EXPECT_EQ(p.fraction(), 1.0);
  EXPECT_EQ(p.message(), "succeeded");

  info.set_state(v1::JOB_STATE_FAILED);
  info.set_error_message("INVALID_ARGUMENT: NaN voxels");
  EXPECT_EQ(ProgressOf(info).message(), "INVALID_ARGUMENT: NaN voxels");
  const v1::JobStatus status = ToJobStatus(info);
  EXPECT_EQ(status.job_id(), "job-1");
  EXPECT_EQ(status.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(status.error_message(), "INVALID_ARGUMENT: NaN voxels");
  EXPECT_EQ(status.last_progress().message(), "INVALID_ARGUMENT: NaN voxels");
  EXPECT_EQ(status.created_unix_ms(), 10);
  EXPECT_EQ(status.updated_unix_ms(), 20);

  EXPECT_TRUE(IsEnded(v1::JOB_STATE_CANCELLED));
  EXPECT_FALSE(IsEnded(v1::JOB_STATE_QUEUED));
}

TEST(ServiceJobs, WhyAJobHasNoResult) {
  JobRecord job;
  job.job_id = "job-1";
  job.state = JobState::kSucceeded;
  EXPECT_TRUE(CheckSucceeded(job).ok());
  job.state = JobState::kRunning;
  EXPECT_EQ(CheckSucceeded(job).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(CheckSucceeded(job).message(), "RUNNING"));
  job.state = JobState::kCancelled;
  EXPECT_EQ(CheckSucceeded(job).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(CheckSucceeded(job).message(), "cancelled"));
  job.state = JobState::kFailed;
  job.error_code = static_cast<int>(absl::StatusCode::kInvalidArgument);
  job.error_message = "NaN voxels";
  EXPECT_EQ(CheckSucceeded(job).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(CheckSucceeded(job).message(), "NaN voxels"));
  job.error_code = 0;
  EXPECT_EQ(CheckSucceeded(job).code(), absl::StatusCode::kUnknown);
}

TEST(ServiceJobs, AWorkerProcessHasNoScheduler) {
  EXPECT_EQ(CheckAttachable(nullptr, nullptr).code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<Scheduler*> s = RequireScheduler(nullptr);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(s.status().message(), "SchedulerService"));
  // An empty id is the caller's mistake first.
  EXPECT_EQ(FindJob(nullptr, "", kSteps).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FindJob(nullptr, "job-1", kSteps).status().code(), absl::StatusCode::kFailedPrecondition);
  v1::JobStatus status;
  EXPECT_EQ(GetJobStatus(nullptr, "job-1", kSteps, &status).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CancelJob(nullptr, "job-1", kSteps, &status).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(ServiceJobsTest, FindsJobsOfItsKindByIdOrRequestId) {
  ASSERT_NO_FATAL_FAILURE(StartScheduler());
  EXPECT_TRUE(CheckAttachable(&scheduler(), nullptr).ok());
  EXPECT_EQ(CheckAttachable(&scheduler(), &scheduler()).code(), absl::StatusCode::kFailedPrecondition);
  const v1::JobInfo mine = Submit("test.steps", Steps(1, "mine"), "client-id.1");
  const v1::JobInfo other = Submit("test.other", Steps(1), "other-id");
  for (const std::string& id : {mine.job_id(), std::string("client-id.1")}) {
    absl::StatusOr<JobRecord> job = FindJob(&scheduler(), id, kSteps);
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(job->job_id, mine.job_id());
    v1::Progress spec;
    ASSERT_TRUE(UnpackJobSpec(*job, &spec));
    EXPECT_EQ(spec.stage(), "mine");
  }
  for (const std::string& id : {other.job_id(), std::string("other-id")}) {
    absl::StatusOr<JobRecord> job = FindJob(&scheduler(), id, kSteps);
    EXPECT_EQ(job.status().code(), absl::StatusCode::kNotFound);
    EXPECT_TRUE(absl::StrContains(job.status().message(), "not a steps job")) << job.status();
  }
  absl::StatusOr<JobRecord> missing = FindJob(&scheduler(), "no-such-job", kSteps);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "no steps job 'no-such-job'");
  v1::JobStatus status;
  ASSERT_TRUE(GetJobStatus(&scheduler(), "client-id.1", kSteps, &status).ok());
  EXPECT_EQ(status.job_id(), mine.job_id());
  EXPECT_EQ(GetJobStatus(&scheduler(), "other-id", kSteps, &status).code(), absl::StatusCode::kNotFound);
}

TEST_F(ServiceJobsTest, PendingJobsCancelAndAFullQueue) {
  ASSERT_NO_FATAL_FAILURE(StartScheduler(/*max_queued_per_priority=*/1));
  const v1::JobInfo running = Submit("test.steps", Steps(100000), "running");
  ASSERT_NO_FATAL_FAILURE(WaitUntilRunning(running.job_id()));
  const v1::JobInfo queued = Submit("test.steps", Steps(1));
  EXPECT_EQ(queued.state(), v1::JOB_STATE_QUEUED);
  absl::StatusOr<std::vector<JobRecord>> pending = PendingJobs(scheduler(), "test.steps");
  ASSERT_TRUE(pending.ok()) << pending.status();
  EXPECT_EQ(pending->size(), 2u);
  pending = PendingJobs(scheduler(), "test.other");
  ASSERT_TRUE(pending.ok()) << pending.status();
  EXPECT_TRUE(pending->empty());

  // The queue (one per priority) is full: RESOURCE_EXHAUSTED with gRPC's
  // retry-pushback trailer; other errors get no trailer.
  grpc::ServerContext context;
  absl::StatusOr<v1::JobInfo> refused = SubmitJob(scheduler(), context, "test.steps", Steps(1), "");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  auto trailers = grpc::testing::ServerContextTestSpouse(&context).GetTrailingMetadata();
  ASSERT_EQ(trailers.count("grpc-retry-pushback-ms"), 1u);
  EXPECT_EQ(trailers.find("grpc-retry-pushback-ms")->second, "2000");
  grpc::ServerContext other_context;
  EXPECT_EQ(SubmitJob(scheduler(), other_context, "test.steps", v1::JobSpec(), "").status().code(),
            absl::StatusCode::kInvalidArgument);  // not its spec type
  EXPECT_EQ(grpc::testing::ServerContextTestSpouse(&other_context).GetTrailingMetadata().size(), 0u);

  v1::JobStatus status;
  ASSERT_TRUE(CancelJob(&scheduler(), "running", kSteps, &status).ok());
  EXPECT_EQ(status.job_id(), running.job_id());
  absl::StatusOr<v1::JobInfo> ended = jobs_->WaitUntilEnded(running.job_id(), absl::Seconds(30));
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_EQ(ended->state(), v1::JOB_STATE_CANCELLED);
  ASSERT_TRUE(GetJobStatus(&scheduler(), running.job_id(), kSteps, &status).ok());
  EXPECT_EQ(status.state(), v1::JOB_STATE_CANCELLED);
  absl::StatusOr<JobRecord> record = FindJob(&scheduler(), running.job_id(), kSteps);
  ASSERT_TRUE(record.ok());
  EXPECT_EQ(CheckSucceeded(*record).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ServiceJobs, UploadFilesAreReusedAndSweptWhenNoJobNamesThem) {
  const std::string state_dir = TmpDir() + "/uploads-state";
  EXPECT_EQ(CreateStateSubdir("", "uploads", "upload directory").status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::string> dir = CreateStateSubdir(state_dir, "uploads", "upload directory");
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(*dir, fs::canonical(StateSubdir(state_dir, "uploads")).string());
  // A folder where a file is cannot be made.
  std::ofstream(state_dir + "/file") << "x";
  absl::StatusOr<std::string> blocked = CreateStateSubdir(state_dir + "/file", "uploads", "test folder");
  EXPECT_EQ(blocked.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(blocked.status().message(), "cannot create the test folder"));

  const std::string a = *dir + "/up-a.bin", b = *dir + "/up-b.bin", names = *dir + "/up-b.names";
  const std::string other = *dir + "/keep-me.txt";
  // Not there yet (the last file marks an upload complete).
  EXPECT_FALSE(ReuseUploadFiles({names, b}));
  for (const std::string& path : {a, b, names, other}) std::ofstream(path) << "x";
  const auto old = fs::file_time_type::clock::now() - std::chrono::hours(2);
  for (const std::string& path : {a, b, names, other}) fs::last_write_time(path, old);
  EXPECT_TRUE(ReuseUploadFiles({names, "", b}));  // touched: young again
  EXPECT_GT(fs::last_write_time(names), old + std::chrono::hours(1));

  // Within the grace period, or named by a pending job, or not an upload: kept.
  absl::StatusOr<int> removed = RemoveUnnamedUploadFiles(*dir, "up-", {}, absl::Hours(1));
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 1);  // a
  EXPECT_FALSE(fs::exists(a));
  removed = RemoveUnnamedUploadFiles(*dir, "up-", {b}, absl::ZeroDuration());
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 1);  // names
  EXPECT_TRUE(fs::exists(b));
  EXPECT_TRUE(fs::exists(other));
  EXPECT_EQ(RemoveUnnamedUploadFiles(*dir + "/missing", "up-", {}, absl::ZeroDuration()).status().code(),
            absl::StatusCode::kInternal);
}

TEST(ServiceJobs, TheSweepRunsAtMostEveryInterval) {
  int sweeps = 0;
  const auto sweep = [&]() -> absl::StatusOr<int> {
    ++sweeps;
    return 0;
  };
  UploadSweepThrottle seldom("test", absl::InfiniteDuration());
  seldom.MaybeSweep(sweep);  // the first call sweeps
  seldom.MaybeSweep(sweep);
  EXPECT_EQ(sweeps, 1);
  UploadSweepThrottle always("test", absl::ZeroDuration());
  always.MaybeSweep(sweep);
  always.MaybeSweep([]() -> absl::StatusOr<int> { return absl::InternalError("disk gone"); });  // logged
  always.MaybeSweep(sweep);
  EXPECT_EQ(sweeps, 3);
}

}  // namespace
}  // namespace tessera::scheduler
