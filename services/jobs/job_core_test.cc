// The job core every job-running service calls: JobStatus / Progress as the
// service APIs show them, idempotent submits (decided before any check or
// side effect, across a restart too), finding jobs of a kind, the shared
// statuses (worker process, no result, full queue with its retry trailer) and
// upload files with their sweep, over an InProcessScheduler with two test
// engines.
#include "services/jobs/job_core.h"

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
#include "services/jobs/job_rpcs.h"
#include "services/jobs/request_fingerprint.h"
#include "services/scheduler/testing/in_process_scheduler.h"
#include "tessera/v1/scheduler.pb.h"

namespace tessera::jobs {
namespace {

namespace fs = std::filesystem;
using scheduler::Scheduler;

std::string TmpDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

// Spec: a tessera.v1.Progress; runs total_steps steps of 10 ms; a stage
// "fail" fails the job, a negative total_steps is refused at submit.
class StepsEngine : public Engine {
 public:
  explicit StepsEngine(std::string kind) : kind_(std::move(kind)) {}
  std::string kind() const override { return kind_; }
  std::string spec_type() const override { return "tessera.v1.Progress"; }
  absl::Status Validate(const google::protobuf::Any& spec) const override {
    v1::Progress p;
    TESSERA_RETURN_IF_ERROR(UnpackSpec(spec, &p));
    if (p.total_steps() < 0) return absl::InvalidArgumentError("total_steps must not be negative");
    return absl::OkStatus();
  }
  absl::StatusOr<EngineOutput> Run(const google::protobuf::Any& spec, EngineContext& ctx) const override {
    v1::Progress p;
    TESSERA_RETURN_IF_ERROR(UnpackSpec(spec, &p));
    if (p.stage() == "fail") return absl::InvalidArgumentError("asked to fail");
    for (int64_t i = 0; i < p.total_steps(); ++i) {
      TESSERA_RETURN_IF_ERROR(ctx.CheckContinue());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EngineOutput out;
    out.result.PackFrom(p);
    return out;
  }

 private:
  const std::string kind_;
};

constexpr ServiceJobKind kSteps{"test.steps", "steps"};
constexpr ServiceJobKind kOther{"test.other", "other"};

v1::Progress Steps(int64_t n, const std::string& stage = "") {
  v1::Progress p;
  p.set_total_steps(n);
  p.set_stage(stage);
  return p;
}

// A scheduler (one slot) running "test.steps" and "test.other" jobs.
class ServiceJobsTest : public ::testing::Test {
 protected:
  void StartScheduler(int64_t max_queued = 256, int64_t max_queued_per_principal = 64) {
    const std::string state_dir = TmpDir() + "/" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    jobs_.reset();  // a restart: the same state directory
    scheduler::testing::InProcessSchedulerOptions options;
    options.max_queued = max_queued;
    options.max_queued_per_principal = max_queued_per_principal;
    auto jobs = scheduler::testing::InProcessScheduler::Start(
        state_dir, {std::make_shared<StepsEngine>("test.steps"), std::make_shared<StepsEngine>("test.other")},
        options);
    ASSERT_TRUE(jobs.ok()) << jobs.status();
    jobs_ = *std::move(jobs);
  }

  Scheduler& scheduler() { return jobs_->scheduler(); }

  // A core for `kind` attached to the scheduler (a new one after a restart).
  JobCore& Core(const ServiceJobKind& kind = kSteps) {
    auto core = std::make_unique<JobCore>(JobCoreOptions{kind});
    EXPECT_TRUE(core->Attach(&scheduler(), jobs_->state_dir()).ok());
    cores_.push_back(std::move(core));
    return *cores_.back();
  }

  // Submits `spec` through a core of `kind`; `prepared` counts the prepare
  // steps that ran.
  absl::StatusOr<SubmittedJob> TrySubmit(JobCore& core, const v1::Progress& spec, const std::string& request_id,
                                         int* prepared = nullptr, const JobCaller& caller = JobCaller()) {
    return core.Submit({caller, &spec, request_id, "request_id",
                        [&]() -> absl::StatusOr<std::unique_ptr<google::protobuf::Message>> {
                          if (prepared != nullptr) ++*prepared;
                          return std::make_unique<v1::Progress>(spec);
                        }});
  }

  v1::JobInfo Submit(const std::string& kind, const v1::Progress& spec, const std::string& request_id = "") {
    JobCore& core = Core(kind == "test.steps" ? kSteps : kOther);
    absl::StatusOr<SubmittedJob> job = TrySubmit(core, spec, request_id);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? job->info : v1::JobInfo();
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

  std::vector<std::unique_ptr<JobCore>> cores_;  // each attached to the scheduler of its time
  std::unique_ptr<scheduler::testing::InProcessScheduler> jobs_;
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
  JobCore core(JobCoreOptions{kSteps});
  EXPECT_EQ(core.Attach(nullptr, TmpDir()).code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<Scheduler*> s = core.scheduler();
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(s.status().message(), "SchedulerService"));
  // An empty id is the caller's mistake first.
  EXPECT_EQ(core.Find(JobCaller(), "").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(core.Find(JobCaller(), "job-1").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(core.Get(JobCaller(), "job-1").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(core.Cancel(JobCaller(), "job-1").status().code(), absl::StatusCode::kFailedPrecondition);
  v1::Progress spec;
  EXPECT_EQ(core.Submit({JobCaller(), &spec, "", "request_id", [] { return absl::StatusOr<std::unique_ptr<google::protobuf::Message>>(nullptr); }})
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(core.SweepUploads().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(ServiceJobsTest, FindsJobsOfItsKindByIdOrRequestId) {
  ASSERT_NO_FATAL_FAILURE(StartScheduler());
  JobCore& core = Core();
  EXPECT_EQ(core.Attach(&scheduler(), jobs_->state_dir()).code(), absl::StatusCode::kFailedPrecondition);
  const v1::JobInfo mine = Submit("test.steps", Steps(1, "mine"), "client-id.1");
  const v1::JobInfo other = Submit("test.other", Steps(1), "other-id");
  for (const std::string& id : {mine.job_id(), std::string("client-id.1")}) {
    absl::StatusOr<JobRecord> job = core.Find(JobCaller(), id);
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(job->job_id, mine.job_id());
    v1::Progress spec;
    ASSERT_TRUE(UnpackJobSpec(*job, &spec));
    EXPECT_EQ(spec.stage(), "mine");
  }
  for (const std::string& id : {other.job_id(), std::string("other-id")}) {
    absl::StatusOr<JobRecord> job = core.Find(JobCaller(), id);
    EXPECT_EQ(job.status().code(), absl::StatusCode::kNotFound);
    EXPECT_TRUE(absl::StrContains(job.status().message(), "not a steps job")) << job.status();
  }
  absl::StatusOr<JobRecord> missing = core.Find(JobCaller(), "no-such-job");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "no steps job 'no-such-job'");
  absl::StatusOr<v1::JobStatus> status = core.Get(JobCaller(), "client-id.1");
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->job_id(), mine.job_id());
  EXPECT_EQ(core.Get(JobCaller(), "other-id").status().code(), absl::StatusCode::kNotFound);
}

JobCaller Authenticated(const std::string& principal, Role role, const std::string& gallery = "") {
  JobCaller caller;
  caller.identity.principal = principal;
  caller.identity.role = role;
  caller.identity.gallery = gallery;
  if (!gallery.empty()) caller.identity.galleries = GalleryGrants::Parse(gallery).value();
  return caller;
}

// Issue 31: a job is its owner's (and admins'); to anyone else it does not exist.
TEST_F(ServiceJobsTest, JobsAreTheirOwnersAndAdmins) {
  ASSERT_NO_FATAL_FAILURE(StartScheduler());
  JobCore& core = Core();
  const JobCaller ada = Authenticated("ada", Role::kEnroller);
  absl::StatusOr<SubmittedJob> job = TrySubmit(core, Steps(1, "ada's"), "ada-1", nullptr, ada);
  ASSERT_TRUE(job.ok()) << job.status();
  const std::string id = job->info.job_id();
  EXPECT_EQ(job->info.owner(), "ada");
  ASSERT_TRUE(jobs_->WaitUntilEnded(id, absl::Seconds(30)).ok());

  const JobCaller bob = Authenticated("bob", Role::kEnroller);
  for (const std::string& ref : {id, std::string("ada-1")}) {
    absl::StatusOr<JobRecord> hidden = core.Find(bob, ref);
    EXPECT_EQ(hidden.status().code(), absl::StatusCode::kNotFound);
    EXPECT_EQ(hidden.status().message(), absl::StrCat("no steps job '", ref, "'"));  // as for no job at all
    EXPECT_EQ(core.Result(bob, ref).status().code(), absl::StatusCode::kNotFound);
    EXPECT_EQ(core.Cancel(bob, ref).status().code(), absl::StatusCode::kNotFound);
  }
  EXPECT_TRUE(core.Result(ada, id).ok());
  EXPECT_TRUE(core.Get(Authenticated("root", Role::kAdmin), id).ok());
  EXPECT_TRUE(core.Get(JobCaller(), id).ok());  // without authentication: everyone's
  // Another principal reusing the request id gets neither the job nor its name.
  absl::StatusOr<SubmittedJob> taken = TrySubmit(core, Steps(1, "ada's"), "ada-1", nullptr, bob);
  EXPECT_EQ(taken.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_FALSE(absl::StrContains(taken.status().message(), id)) << taken.status();
  // A gallery job: its gallery is recorded, and each caller that sees it is told.
  const JobCaller lab_admin = Authenticated("lee", Role::kAdmin, "lab");
  absl::StatusOr<SubmittedJob> lab = TrySubmit(core, Steps(1, "lab"), "", nullptr, lab_admin);
  ASSERT_TRUE(lab.ok()) << lab.status();
  EXPECT_EQ(lab->info.gallery(), "lab");
  std::string seen;
  JobCaller watcher = Authenticated("lee", Role::kAdmin, "lab");
  watcher.saw_gallery = [&](const std::string& gallery) { seen = gallery; };
  EXPECT_TRUE(core.Get(watcher, lab->info.job_id()).ok());
  EXPECT_EQ(seen, "lab");
  EXPECT_EQ(core.Get(Authenticated("root", Role::kAdmin), lab->info.job_id()).status().code(),
            absl::StatusCode::kNotFound);  // an admin of "default" only
}

// Issue 31: --max-queued bounds the whole queue (every priority together) and
// --max-queued-per-principal one principal's share of it.
TEST_F(ServiceJobsTest, TheQueueIsBoundedWholeAndPerPrincipal) {
  ASSERT_NO_FATAL_FAILURE(StartScheduler(/*max_queued=*/3, /*max_queued_per_principal=*/2));
  const v1::JobInfo running = Submit("test.steps", Steps(100000), "busy");  // holds the one slot
  ASSERT_NO_FATAL_FAILURE(WaitUntilRunning(running.job_id()));
  JobCore& core = Core();
  const JobCaller ada = Authenticated("ada", Role::kEnroller), bob = Authenticated("bob", Role::kEnroller);
  ASSERT_TRUE(TrySubmit(core, Steps(1), "", nullptr, ada).ok());
  ASSERT_TRUE(TrySubmit(core, Steps(2), "", nullptr, ada).ok());
  absl::StatusOr<SubmittedJob> third = TrySubmit(core, Steps(3), "", nullptr, ada);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(third.status().message(), "principal 'ada' has 2 jobs queued")) << third.status();
  ASSERT_TRUE(TrySubmit(core, Steps(4), "", nullptr, bob).ok());  // others still get in
  // The whole queue: 3 queued, at any priority.
  absl::StatusOr<SubmittedJob> full = TrySubmit(core, Steps(5), "", nullptr, Authenticated("cy", Role::kEnroller));
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(full.status().message(), "the job queue is full (3 jobs queued")) << full.status();
  ASSERT_TRUE(core.Cancel(JobCaller(), running.job_id()).ok());
}

TEST_F(ServiceJobsTest, PendingJobsCancelAndAFullQueue) {
  ASSERT_NO_FATAL_FAILURE(StartScheduler(/*max_queued=*/1));
  const v1::JobInfo running = Submit("test.steps", Steps(100000), "running");
  ASSERT_NO_FATAL_FAILURE(WaitUntilRunning(running.job_id()));
  const v1::JobInfo queued = Submit("test.steps", Steps(1));
  EXPECT_EQ(queued.state(), v1::JOB_STATE_QUEUED);
  JobCore& core = Core();
  absl::StatusOr<std::vector<JobRecord>> pending = core.Pending();
  ASSERT_TRUE(pending.ok()) << pending.status();
  EXPECT_EQ(pending->size(), 2u);
  pending = Core(kOther).Pending();
  ASSERT_TRUE(pending.ok()) << pending.status();
  EXPECT_TRUE(pending->empty());

  // The queue is full: RESOURCE_EXHAUSTED, which the gRPC
  // edge answers with the retry-pushback trailer; other errors get no trailer.
  absl::StatusOr<SubmittedJob> refused = TrySubmit(core, Steps(1), "");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  grpc::ServerContext context;
  EXPECT_EQ(JobRpcStatus(context, refused.status()).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  auto trailers = grpc::testing::ServerContextTestSpouse(&context).GetTrailingMetadata();
  ASSERT_EQ(trailers.count("grpc-retry-pushback-ms"), 1u);
  EXPECT_EQ(trailers.find("grpc-retry-pushback-ms")->second, "2000");
  grpc::ServerContext other_context;
  absl::StatusOr<SubmittedJob> invalid = TrySubmit(core, Steps(-1), "");
  EXPECT_EQ(invalid.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(JobRpcStatus(other_context, invalid.status()).ok());
  EXPECT_EQ(grpc::testing::ServerContextTestSpouse(&other_context).GetTrailingMetadata().size(), 0u);

  absl::StatusOr<v1::JobStatus> status = core.Cancel(JobCaller(), "running");
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->job_id(), running.job_id());
  absl::StatusOr<v1::JobInfo> ended = jobs_->WaitUntilEnded(running.job_id(), absl::Seconds(30));
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_EQ(ended->state(), v1::JOB_STATE_CANCELLED);
  status = core.Get(JobCaller(), running.job_id());
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(core.Result(JobCaller(), running.job_id()).status().code(), absl::StatusCode::kFailedPrecondition);
}

// A retried submit (the client never saw the first answer) gets the job it
// made, whatever became of it — succeeded, failed, cancelled, across a
// restart — without running the service's checks and side effects again; the
// same id with another request is ALREADY_EXISTS naming the id.
TEST_F(ServiceJobsTest, ResubmitsAreIdempotentInEveryStateAndAcrossARestart) {
  ASSERT_NO_FATAL_FAILURE(StartScheduler());
  int prepared = 0;
  JobCore* core = &Core();
  const v1::Progress ok = Steps(1, "ok"), fail = Steps(1, "fail"), slow = Steps(100000, "slow");
  absl::StatusOr<SubmittedJob> a = TrySubmit(*core, ok, "retry-ok", &prepared);
  absl::StatusOr<SubmittedJob> b = TrySubmit(*core, fail, "retry-fail", &prepared);
  absl::StatusOr<SubmittedJob> c = TrySubmit(*core, slow, "retry-cancel", &prepared);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_TRUE(a->created && b->created && c->created);
  EXPECT_EQ(prepared, 3);
  ASSERT_TRUE(core->Cancel(JobCaller(), "retry-cancel").ok());
  for (const auto* job : {&*a, &*b, &*c}) ASSERT_TRUE(jobs_->WaitUntilEnded(job->info.job_id(), absl::Seconds(30)).ok());

  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "same process" : "after a restart");
    const struct {
      const v1::Progress* spec;
      const char* id;
      const SubmittedJob* first;
      v1::JobState state;
    } cases[] = {{&ok, "retry-ok", &*a, v1::JOB_STATE_SUCCEEDED},
                 {&fail, "retry-fail", &*b, v1::JOB_STATE_FAILED},
                 {&slow, "retry-cancel", &*c, v1::JOB_STATE_CANCELLED}};
    for (const auto& k : cases) {
      absl::StatusOr<SubmittedJob> again = TrySubmit(*core, *k.spec, k.id, &prepared);
      ASSERT_TRUE(again.ok()) << k.id << ": " << again.status();
      EXPECT_FALSE(again->created);
      EXPECT_EQ(again->info.job_id(), k.first->info.job_id());
      EXPECT_EQ(again->info.state(), k.state);
      // Another request under the same id.
      absl::StatusOr<SubmittedJob> other = TrySubmit(*core, Steps(2, "other"), k.id, &prepared);
      EXPECT_EQ(other.status().code(), absl::StatusCode::kAlreadyExists) << other.status();
      EXPECT_TRUE(absl::StrContains(other.status().message(), k.id)) << other.status();
      // The same request straight to the scheduler (SchedulerService.Submit).
      v1::SubmitJobRequest direct;
      direct.mutable_spec()->mutable_spec()->PackFrom(*k.spec);
      direct.set_request_id(k.id);
      absl::StatusOr<v1::JobInfo> info = scheduler().Submit(direct);
      ASSERT_TRUE(info.ok()) << info.status();
      EXPECT_EQ(info->job_id(), k.first->info.job_id());
    }
    EXPECT_EQ(prepared, 3);  // no retry ran the checks and side effects again
    // The id of a steps job, submitted as another kind's.
    EXPECT_EQ(TrySubmit(Core(kOther), ok, "retry-ok").status().code(), absl::StatusCode::kAlreadyExists);
    if (round == 0) {
      ASSERT_NO_FATAL_FAILURE(StartScheduler());
      core = &Core();
    }
  }
}

TEST(ServiceJobs, RequestFingerprintsIgnoreTheIdempotencyKeyOnly) {
  v1::JobRef a, b;
  a.set_job_id("x");
  b.set_job_id("y");
  EXPECT_EQ(RequestFingerprint(a), RequestFingerprint(b));  // job_id is the key
  v1::Progress p = Steps(3, "s"), q = Steps(3, "s");
  (*p.mutable_metrics())["a"] = 1;
  (*p.mutable_metrics())["b"] = 2;
  (*q.mutable_metrics())["b"] = 2;
  (*q.mutable_metrics())["a"] = 1;
  EXPECT_EQ(RequestFingerprint(p), RequestFingerprint(q));  // maps in any order
  q.set_step(1);
  EXPECT_NE(RequestFingerprint(p), RequestFingerprint(q));
  google::protobuf::Any packed;
  packed.PackFrom(p);
  EXPECT_EQ(SpecFingerprint(packed), RequestFingerprint(p));
  EXPECT_EQ(RequestFingerprint(p).size(), 64u);
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

TEST_F(ServiceJobsTest, TheCoreSweepsUploadFilesNoPendingJobNames) {
  ASSERT_NO_FATAL_FAILURE(StartScheduler());
  int listed = 0;
  JobCoreOptions options{kSteps};
  options.uploads.dir = {"test-uploads", "test upload directory", "up-"};
  options.uploads.grace = absl::ZeroDuration();
  options.uploads.sweep_interval = absl::InfiniteDuration();
  std::string kept;
  options.uploads.named_files = [&](const JobRecord& job) {
    ++listed;
    v1::Progress spec;
    EXPECT_TRUE(UnpackJobSpec(job, &spec));
    return std::vector<std::string>{spec.message()};
  };
  JobCore core(options);
  ASSERT_TRUE(core.Attach(&scheduler(), jobs_->state_dir()).ok());
  ASSERT_FALSE(core.upload_dir().empty());
  kept = core.upload_dir() + "/up-kept";
  const std::string gone = core.upload_dir() + "/up-gone";
  std::ofstream(kept) << "x";
  std::ofstream(gone) << "x";
  v1::Progress spec = Steps(100000, "slow");
  spec.set_message(kept);
  absl::StatusOr<SubmittedJob> job = TrySubmit(core, spec, "");
  ASSERT_TRUE(job.ok()) << job.status();
  absl::StatusOr<int> removed = core.SweepUploads();
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 1);
  EXPECT_GE(listed, 1);
  EXPECT_TRUE(fs::exists(kept));
  EXPECT_FALSE(fs::exists(gone));
  ASSERT_TRUE(core.Cancel(JobCaller(), job->info.job_id()).ok());
  ASSERT_TRUE(jobs_->WaitUntilEnded(job->info.job_id(), absl::Seconds(30)).ok());
  removed = core.SweepUploads();  // no pending job names it now
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 1);
  EXPECT_FALSE(fs::exists(kept));
}

}  // namespace
}  // namespace tessera::jobs
