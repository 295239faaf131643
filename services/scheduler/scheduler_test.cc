// The scheduler over a real store (SQLite file; PostgreSQL when a server can
// be started), with a test engine whose behaviour the spec sets, in-process
// workers, fake workers that vanish, and a WorkerService over loopback gRPC.
#include "services/scheduler/scheduler.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/trace_context.h"
#include "gtest/gtest.h"
#include "services/jobs/testing/postgres_server.h"
#include "services/scheduler/in_process_worker.h"
#include "services/scheduler/remote_worker.h"
#include "services/scheduler/worker_service.h"
#include "services/server/bearer_channel.h"
#include "services/server/trace_interceptor.h"
#include "tessera/v1/common.pb.h"

namespace tessera::scheduler {
namespace {

namespace fs = std::filesystem;
using jobs::JobState;

// Spec: a tessera.v1.Progress used as a small parameter record:
// total_steps = iterations, step = milliseconds per iteration,
// stage = "fail" to fail at the end, message = bytes written to out.txt.
class StepsEngine : public jobs::Engine {
 public:
  std::string kind() const override { return "test.steps"; }
  std::string spec_type() const override { return "tessera.v1.Progress"; }
  absl::Status Validate(const google::protobuf::Any& spec) const override {
    v1::Progress p;
    TESSERA_RETURN_IF_ERROR(jobs::UnpackSpec(spec, &p));
    if (p.total_steps() < 0 || p.total_steps() > 100000) return absl::InvalidArgumentError("total_steps out of range");
    return absl::OkStatus();
  }
  // metrics["device_bytes"]: a GPU job needing that much device memory.
  jobs::ResourceNeeds Needs(const google::protobuf::Any& spec) const override {
    v1::Progress p;
    jobs::ResourceNeeds needs;
    if (jobs::UnpackSpec(spec, &p).ok() && p.metrics().count("device_bytes")) {
      needs.needs_gpu = true;
      needs.device_bytes = static_cast<int64_t>(p.metrics().at("device_bytes"));
    }
    return needs;
  }
  // job_id: a job whose results this one "reads".
  std::vector<std::string> ReferencedJobs(const google::protobuf::Any& spec) const override {
    v1::Progress p;
    if (!jobs::UnpackSpec(spec, &p).ok() || p.job_id().empty()) return {};
    return {p.job_id()};
  }
  absl::StatusOr<jobs::EngineOutput> Run(const google::protobuf::Any& spec, jobs::EngineContext& ctx) const override {
    v1::Progress p;
    TESSERA_RETURN_IF_ERROR(jobs::UnpackSpec(spec, &p));
    for (int64_t i = 0; i < p.total_steps(); ++i) {
      TESSERA_RETURN_IF_ERROR(ctx.CheckContinue());
      iterations.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(p.step()));
      jobs::JobProgress progress;
      progress.stage = "step";
      progress.step = i + 1;
      progress.total_steps = p.total_steps();
      progress.fraction = static_cast<double>(i + 1) / p.total_steps();
      progress.metrics["i"] = static_cast<double>(i);
      ctx.Report(progress);
    }
    if (p.stage() == "fail") return absl::InvalidArgumentError("asked to fail");
    std::ofstream(fs::path(ctx.work_dir()) / "out.txt") << p.message();
    jobs::EngineOutput out;
    v1::Progress result;
    result.set_message(absl::StrCat("done ", p.total_steps()));
    out.result.PackFrom(result);
    out.files.push_back({"out.txt", static_cast<int64_t>(p.message().size())});
    return out;
  }
  mutable std::atomic<int64_t> iterations{0};
};

v1::SubmitJobRequest StepsJob(int steps, int ms, const std::string& request_id = "", int priority = 0,
                              const std::string& stage = "", const std::string& message = "hello") {
  v1::Progress p;
  p.set_total_steps(steps);
  p.set_step(ms);
  p.set_stage(stage);
  p.set_message(message);
  v1::SubmitJobRequest r;
  r.mutable_spec()->mutable_spec()->PackFrom(p);
  r.set_request_id(request_id);
  r.set_priority(priority);
  return r;
}

// A worker that loses every attempt (its process "dies").
class VanishingWorker : public Worker {
 public:
  explicit VanishingWorker(std::string name) : name_(std::move(name)) {}
  const std::string& name() const override { return name_; }
  absl::StatusOr<v1::WorkerInfo> Describe() override {
    v1::WorkerInfo info;
    info.add_kinds("test.steps");
    info.add_devices()->set_name("cpu");
    return info;
  }
  AttemptResult Execute(const AttemptCall&) override {
    calls.fetch_add(1);
    AttemptResult r;
    r.worker_lost = true;
    r.status = absl::UnavailableError("connection reset");
    return r;
  }
  std::atomic<int> calls{0};

 private:
  std::string name_;
};

// An in-process worker that says it has one GPU with `free_bytes` free.
class GpuWorker : public InProcessWorker {
 public:
  GpuWorker(std::string name, const jobs::EngineRegistry* engines, std::string results, int64_t free_bytes)
      : InProcessWorker(std::move(name), engines, std::move(results), 1), free_bytes_(free_bytes) {}
  absl::StatusOr<v1::WorkerInfo> Describe() override {
    absl::StatusOr<v1::WorkerInfo> info = InProcessWorker::Describe();
    if (!info.ok()) return info;
    v1::WorkerDevice* gpu = info->add_devices();
    gpu->set_name("cuda:0 test GPU");
    gpu->set_total_bytes(free_bytes_);
    gpu->set_free_bytes(free_bytes_);
    return info;
  }

 private:
  const int64_t free_bytes_;
};

class SchedulerTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / absl::StrCat("sched-test-", getpid(), "-", counter_++);
    fs::create_directories(dir_ / "results");
    engine_ = std::make_shared<StepsEngine>();
    ASSERT_TRUE(engines_.Add(engine_).ok());
    if (GetParam() == "postgresql") {
      absl::StatusOr<std::unique_ptr<jobs::testing::PostgresServer>> pg = jobs::testing::PostgresServer::Start();
      if (!pg.ok()) GTEST_SKIP() << "PostgreSQL cannot start here: " << pg.status();
      pg_ = *std::move(pg);
    }
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::unique_ptr<jobs::JobStore> OpenStore() {
    absl::StatusOr<std::unique_ptr<jobs::SqlDatabase>> db =
        GetParam() == "postgresql" ? jobs::OpenPostgresDatabase(pg_->conninfo())
                                   : jobs::OpenSqliteDatabase((dir_ / "jobs.db").string());
    EXPECT_TRUE(db.ok()) << db.status();
    absl::StatusOr<std::unique_ptr<jobs::JobStore>> store = jobs::JobStore::Open(*std::move(db));
    EXPECT_TRUE(store.ok()) << store.status();
    return *std::move(store);
  }

  SchedulerOptions FastOptions(const std::string& name = "s1") {
    SchedulerOptions o;
    o.name = name;
    o.heartbeat = absl::Milliseconds(50);
    o.idle_poll = absl::Milliseconds(20);
    o.lease = absl::Milliseconds(600);
    o.progress_interval = absl::Milliseconds(0);
    o.max_queued = 8;
    return o;
  }

  std::unique_ptr<Scheduler> MakeScheduler(const std::string& name = "s1", int slots = 1,
                                           std::vector<WorkerSlots> extra = {}, bool local = true,
                                           absl::Duration job_retention = absl::ZeroDuration(),
                                           int64_t results_max_bytes = 0) {
    std::vector<WorkerSlots> workers = std::move(extra);
    if (local) {
      workers.push_back({std::make_shared<InProcessWorker>(name + "/local", &engines_, (dir_ / "results").string(),
                                                            slots),
                         slots});
    }
    SchedulerOptions options = FastOptions(name);
    options.job_retention = job_retention;
    options.retention_sweep_interval = absl::Milliseconds(50);
    options.results_max_bytes = results_max_bytes;
    auto s = std::make_unique<Scheduler>(options, OpenStore(), &engines_, std::move(workers));
    EXPECT_TRUE(s->Start().ok());
    return s;
  }

  v1::JobInfo WaitForEnd(Scheduler& s, const std::string& id, absl::Duration timeout = absl::Seconds(30)) {
    const absl::Time until = absl::Now() + timeout;
    while (absl::Now() < until) {
      absl::StatusOr<v1::JobInfo> info = s.Get(id);
      EXPECT_TRUE(info.ok()) << info.status();
      if (info.ok() && info->state() >= v1::JOB_STATE_SUCCEEDED) return *info;
      absl::SleepFor(absl::Milliseconds(10));
    }
    ADD_FAILURE() << "job " << id << " did not end";
    return s.Get(id).value_or(v1::JobInfo());
  }

  v1::JobInfo WaitForState(Scheduler& s, const std::string& id, v1::JobState state) {
    const absl::Time until = absl::Now() + absl::Seconds(20);
    v1::JobInfo info;
    while (absl::Now() < until) {
      info = s.Get(id).value_or(v1::JobInfo());
      if (info.state() == state) return info;
      absl::SleepFor(absl::Milliseconds(5));
    }
    ADD_FAILURE() << "job " << id << " never reached " << v1::JobState_Name(state) << "; it is "
                  << v1::JobState_Name(info.state());
    return info;
  }

  static inline int counter_ = 0;
  fs::path dir_;
  jobs::EngineRegistry engines_;
  std::shared_ptr<StepsEngine> engine_;
  std::unique_ptr<jobs::testing::PostgresServer> pg_;
};

TEST_P(SchedulerTest, RunsAJobAndKeepsItsEventsResultAndFiles) {
  auto s = MakeScheduler();
  absl::StatusOr<v1::JobInfo> submitted = s->Submit(StepsJob(5, 5, "", 0, "", "payload"));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_EQ(submitted->kind(), "test.steps");
  v1::JobInfo done = WaitForEnd(*s, submitted->job_id());
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.error_message();
  EXPECT_EQ(done.attempts(), 1);
  EXPECT_EQ(done.worker(), "s1/local");

  absl::StatusOr<v1::JobResult> result = s->GetResult(done.job_id());
  ASSERT_TRUE(result.ok()) << result.status();
  v1::Progress typed;
  ASSERT_TRUE(result->result().UnpackTo(&typed));
  EXPECT_EQ(typed.message(), "done 5");
  ASSERT_EQ(result->files_size(), 1);
  std::ifstream in(result->files(0).path());
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "payload");

  // Events: queued, started, 5 progress, succeeded; numbered 1.. without gaps.
  std::vector<v1::JobEvent> events;
  ASSERT_TRUE(s->Watch(done.job_id(), 0, [&](const v1::JobEvent& e) { events.push_back(e); return true; }, nullptr).ok());
  ASSERT_EQ(events.size(), 8u);
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i].sequence(), static_cast<int64_t>(i) + 1);
  EXPECT_EQ(events.front().message(), "queued");
  EXPECT_EQ(events[1].state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(events[6].progress().step(), 5);
  EXPECT_EQ(events.back().state(), v1::JOB_STATE_SUCCEEDED);
  // Resumable: after event 6 come 7 and 8 only.
  std::vector<int64_t> tail;
  ASSERT_TRUE(s->Watch(done.job_id(), 6, [&](const v1::JobEvent& e) { tail.push_back(e.sequence()); return true; }, nullptr).ok());
  EXPECT_EQ(tail, (std::vector<int64_t>{7, 8}));
}

TEST_P(SchedulerTest, SameRequestIdReturnsTheSameJob) {
  auto s = MakeScheduler();
  absl::StatusOr<v1::JobInfo> a = s->Submit(StepsJob(1, 1, "client-42"));
  absl::StatusOr<v1::JobInfo> b = s->Submit(StepsJob(1, 1, "client-42"));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->job_id(), b->job_id());
  // Another request under the same id: ALREADY_EXISTS naming it.
  absl::StatusOr<v1::JobInfo> other = s->Submit(StepsJob(99, 1, "client-42"));
  EXPECT_EQ(other.status().code(), absl::StatusCode::kAlreadyExists) << other.status();
  EXPECT_NE(other.status().message().find("client-42"), std::string::npos) << other.status();
  WaitForEnd(*s, a->job_id());
  // After it ended: the same job, not a new run.
  absl::StatusOr<v1::JobInfo> after = s->Submit(StepsJob(1, 1, "client-42"));
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->job_id(), a->job_id());
  EXPECT_EQ(after->state(), v1::JOB_STATE_SUCCEEDED);
  absl::StatusOr<v1::ListJobsResponse> all = s->List(v1::ListJobsRequest());
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->jobs_size(), 1);
  absl::StatusOr<jobs::JobRecord> by_request = s->store().FindByRequestId("client-42");
  ASSERT_TRUE(by_request.ok()) << by_request.status();
  EXPECT_EQ(by_request->job_id, a->job_id());
  EXPECT_EQ(s->store().FindByRequestId("client-43").status().code(), absl::StatusCode::kNotFound);
}

// A spec naming another job's results (Engine::ReferencedJobs) is taken only
// when that job exists and the submit's may_read_job lets the caller read it;
// both refusals read as a missing job (nothing about another owner leaks).
TEST_P(SchedulerTest, ReferencedJobsMustBeVisibleToTheCaller) {
  auto s = MakeScheduler();
  SubmitOptions ada;
  ada.owner = "ada";
  absl::StatusOr<v1::JobInfo> base = s->Submit(StepsJob(1, 1), ada);
  ASSERT_TRUE(base.ok()) << base.status();
  v1::SubmitJobRequest reader = StepsJob(1, 1);
  v1::Progress p;
  ASSERT_TRUE(reader.spec().spec().UnpackTo(&p));
  p.set_job_id(base->job_id());
  reader.mutable_spec()->mutable_spec()->PackFrom(p);
  SubmitOptions bob;
  bob.owner = "bob";
  bob.may_read_job = [](const jobs::JobRecord& job) {
    return job.owner == "bob" ? absl::OkStatus() : absl::PermissionDeniedError("not bob's");
  };
  absl::Status refused = s->Submit(reader, bob).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kNotFound) << refused;
  EXPECT_NE(refused.message().find(base->job_id()), std::string::npos) << refused;
  p.set_job_id("job-that-does-not-exist");
  v1::SubmitJobRequest missing = reader;
  missing.mutable_spec()->mutable_spec()->PackFrom(p);
  EXPECT_EQ(s->Submit(missing, bob).status().code(), absl::StatusCode::kNotFound);
  ada.may_read_job = [](const jobs::JobRecord& job) {
    return job.owner == "ada" ? absl::OkStatus() : absl::PermissionDeniedError("not ada's");
  };
  absl::StatusOr<v1::JobInfo> taken = s->Submit(reader, ada);
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ(WaitForEnd(*s, taken->job_id()).state(), v1::JOB_STATE_SUCCEEDED);
}

TEST_P(SchedulerTest, BadSpecsFailTheirSubmit) {
  auto s = MakeScheduler();
  v1::SubmitJobRequest empty;
  EXPECT_EQ(s->Submit(empty).status().code(), absl::StatusCode::kInvalidArgument);
  v1::SubmitJobRequest unknown;
  unknown.mutable_spec()->mutable_spec()->PackFrom(v1::JobRef());
  absl::Status st = s->Submit(unknown).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("test.steps"), std::string::npos) << st;  // names what the server runs
  EXPECT_EQ(s->Submit(StepsJob(-1, 1)).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s->Submit(StepsJob(1, 1, "bad id!")).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s->Submit(StepsJob(1, 1, "", 11)).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s->Get("nope").status().code(), absl::StatusCode::kNotFound);
  v1::ListJobsRequest bad_page;
  bad_page.set_page_token("garbage");
  EXPECT_EQ(s->List(bad_page).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(SchedulerTest, CancelStopsRunningWorkWithinAnIterationAndQueuedAtOnce) {
  auto s = MakeScheduler();
  absl::StatusOr<v1::JobInfo> running = s->Submit(StepsJob(100000, 2));
  absl::StatusOr<v1::JobInfo> queued = s->Submit(StepsJob(1, 1));
  ASSERT_TRUE(running.ok() && queued.ok());
  WaitForState(*s, running->job_id(), v1::JOB_STATE_RUNNING);
  absl::StatusOr<v1::JobInfo> c = s->Cancel(queued->job_id());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->state(), v1::JOB_STATE_CANCELLED);
  const int64_t before = engine_->iterations.load();
  ASSERT_TRUE(s->Cancel(running->job_id()).ok());
  v1::JobInfo ended = WaitForEnd(*s, running->job_id());
  EXPECT_EQ(ended.state(), v1::JOB_STATE_CANCELLED);
  EXPECT_LE(engine_->iterations.load() - before, 2) << "the engine kept working after the cancel";
  EXPECT_EQ(s->GetResult(ended.job_id()).status().code(), absl::StatusCode::kFailedPrecondition);
}

// Issue 31: deleting a job's results removes its files and stored result and
// keeps the job as a tombstone; a queued or running job is refused.
TEST_P(SchedulerTest, DeletedResultsLeaveATombstone) {
  auto s = MakeScheduler();
  absl::StatusOr<v1::JobInfo> submitted = s->Submit(StepsJob(2, 1, "", 0, "", "evidence"));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const v1::JobInfo done = WaitForEnd(*s, submitted->job_id());
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED);
  absl::StatusOr<v1::JobResult> result = s->GetResult(done.job_id());
  ASSERT_TRUE(result.ok() && result->files_size() == 1);
  const fs::path file = result->files(0).path();
  ASSERT_TRUE(fs::exists(file));
  absl::StatusOr<v1::JobInfo> deleted = s->DeleteResults(done.job_id(), "deleted by ada");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_FALSE(fs::exists(file));
  EXPECT_FALSE(fs::exists(file.parent_path()));  // <results>/<job>/ went with it
  EXPECT_EQ(deleted->results_deleted_reason(), "deleted by ada");
  EXPECT_GT(deleted->results_deleted_unix_ms(), 0);
  absl::Status gone = s->GetResult(done.job_id()).status();
  EXPECT_EQ(gone.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(gone.message().find("deleted"), std::string::npos) << gone;
  EXPECT_TRUE(s->DeleteResults(done.job_id(), "again").ok());  // unchanged
  EXPECT_EQ(s->Get(done.job_id())->results_deleted_reason(), "deleted by ada");
  s.reset();
  auto idle = MakeScheduler("s1", 1, {}, /*local=*/false);  // nothing runs: the job stays queued
  absl::StatusOr<v1::JobInfo> queued = idle->Submit(StepsJob(1, 1));
  ASSERT_TRUE(queued.ok());
  EXPECT_EQ(idle->DeleteResults(queued->job_id(), "x").status().code(), absl::StatusCode::kFailedPrecondition);
}

// Issue 31: with a retention, every finished job's files go once it has
// passed, and its row stays; attempt folders a crash left are removed at start.
TEST_P(SchedulerTest, RetentionDeletesEveryFinishedJobsFiles) {
  const fs::path results = dir_ / "results";
  fs::create_directories(results / "job-dead.attempt-2.tmp");
  std::ofstream(results / "job-dead.attempt-2.tmp" / "half.nii") << "partial";
  absl::StatusOr<int> leftovers = InProcessWorker::RemoveLeftoverAttempts(results.string());
  ASSERT_TRUE(leftovers.ok()) << leftovers.status();
  EXPECT_EQ(*leftovers, 1);
  EXPECT_FALSE(fs::exists(results / "job-dead.attempt-2.tmp"));

  auto s = MakeScheduler("s1", 1, {}, true, /*job_retention=*/absl::Milliseconds(300));
  std::vector<std::string> ids;
  for (int i = 0; i < 6; ++i) {
    absl::StatusOr<v1::JobInfo> job = s->Submit(StepsJob(1, 1, "", 0, "", absl::StrCat("result ", i)));
    ASSERT_TRUE(job.ok()) << job.status();
    ids.push_back(job->job_id());
  }
  for (const std::string& id : ids) ASSERT_EQ(WaitForEnd(*s, id).state(), v1::JOB_STATE_SUCCEEDED);
  const absl::Time until = absl::Now() + absl::Seconds(20);
  int deleted = 0;
  while (absl::Now() < until && deleted < 6) {
    deleted = 0;
    for (const std::string& id : ids) deleted += s->Get(id)->results_deleted_unix_ms() > 0 ? 1 : 0;
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(deleted, 6);
  EXPECT_TRUE(fs::is_empty(results)) << "files left under " << results;
  EXPECT_NE(s->Get(ids[0])->results_deleted_reason().find("retention"), std::string::npos);
}

// Issue 31: past --results-max-bytes a submit is refused naming the budget;
// deleting results makes room again.
TEST_P(SchedulerTest, ResultsBudgetRefusesSubmitsUntilResultsAreDeleted) {
  auto s = MakeScheduler("s1", 1, {}, true, absl::ZeroDuration(), /*results_max_bytes=*/5);
  absl::StatusOr<v1::JobInfo> first = s->Submit(StepsJob(1, 1, "", 0, "", "0123456789"));  // a 10-byte file
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(WaitForEnd(*s, first->job_id()).state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(s->store().ResultBytesHeld().value(), 10);
  absl::Status refused = s->Submit(StepsJob(1, 1)).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("--results-max-bytes=5"), std::string::npos) << refused;
  ASSERT_TRUE(s->DeleteResults(first->job_id(), "make room").ok());
  EXPECT_EQ(s->store().ResultBytesHeld().value(), 0);
  EXPECT_TRUE(s->Submit(StepsJob(1, 1)).ok());
}

TEST_P(SchedulerTest, FullQueueAnswersResourceExhaustedWithRetryHint) {
  auto s = MakeScheduler("s1", 1, {}, /*local=*/false);  // no workers: everything stays queued
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(s->Submit(StepsJob(1, 1)).ok());
  absl::Status full = s->Submit(StepsJob(1, 1)).status();
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("retry after"), std::string::npos) << full;
  // The bound is the whole queue's (issue 31): another priority is no way around it.
  EXPECT_EQ(s->Submit(StepsJob(1, 1, "", 5)).status().code(), absl::StatusCode::kResourceExhausted);
  absl::StatusOr<std::map<JobState, int64_t>> counts = s->store().CountByState();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ((*counts)[JobState::kQueued], 8);
}

TEST_P(SchedulerTest, HigherPriorityRunsFirst) {
  auto s = MakeScheduler("s1", 1, {}, false);
  absl::StatusOr<v1::JobInfo> low = s->Submit(StepsJob(1, 1, "", -1));
  absl::StatusOr<v1::JobInfo> mid = s->Submit(StepsJob(1, 1, "", 0));
  absl::StatusOr<v1::JobInfo> high = s->Submit(StepsJob(1, 1, "", 3));
  ASSERT_TRUE(low.ok() && mid.ok() && high.ok());
  s.reset();
  auto runner = MakeScheduler("s1", 1);
  const v1::JobInfo a = WaitForEnd(*runner, high->job_id());
  const v1::JobInfo b = WaitForEnd(*runner, mid->job_id());
  const v1::JobInfo c = WaitForEnd(*runner, low->job_id());
  EXPECT_LE(a.started_unix_ms(), b.started_unix_ms());
  EXPECT_LE(b.started_unix_ms(), c.started_unix_ms());
}

TEST_P(SchedulerTest, GpuJobsGoWhereTheyFitAndNeverToCpuOnlyWorkers) {
  auto small = std::make_shared<GpuWorker>("small-gpu", &engines_, (dir_ / "results").string(), int64_t{1} << 30);
  auto large = std::make_shared<GpuWorker>("large-gpu", &engines_, (dir_ / "results").string(), int64_t{8} << 30);
  auto s = MakeScheduler("s1", 1, {{small, 1}}, /*local=*/true);  // local: CPU only
  v1::SubmitJobRequest big = StepsJob(1, 1);
  (*big.mutable_spec()->mutable_spec()) = [] {
    v1::Progress p;
    p.set_total_steps(1);
    (*p.mutable_metrics())["device_bytes"] = 4.0 * (1 << 30);
    google::protobuf::Any any;
    any.PackFrom(p);
    return any;
  }();
  absl::StatusOr<v1::JobInfo> j = s->Submit(big);
  ASSERT_TRUE(j.ok()) << j.status();
  absl::SleepFor(absl::Milliseconds(300));  // many claim rounds: neither the CPU worker nor the 1 GiB GPU takes it
  EXPECT_EQ(s->Get(j->job_id())->state(), v1::JOB_STATE_QUEUED);
  s.reset();
  auto with_large = MakeScheduler("s1", 1, {{small, 1}, {large, 1}}, /*local=*/true);
  v1::JobInfo ended = WaitForEnd(*with_large, j->job_id());
  EXPECT_EQ(ended.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(ended.worker(), "large-gpu");
}

TEST_P(SchedulerTest, FailureKeepsTheEnginesReason) {
  auto s = MakeScheduler();
  absl::StatusOr<v1::JobInfo> j = s->Submit(StepsJob(2, 1, "", 0, "fail"));
  ASSERT_TRUE(j.ok());
  v1::JobInfo ended = WaitForEnd(*s, j->job_id());
  EXPECT_EQ(ended.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(ended.error_message(), "INVALID_ARGUMENT: asked to fail");
  EXPECT_EQ(ended.attempts(), 1);  // the job's own failure is not retried
}

TEST_P(SchedulerTest, LostWorkerRequeuesUntilAttemptsRunOut) {
  auto vanishing = std::make_shared<VanishingWorker>("flaky");
  auto s = MakeScheduler("s1", 1, {{vanishing, 1}}, /*local=*/false);
  v1::SubmitJobRequest r = StepsJob(1, 1);
  r.set_max_attempts(2);
  absl::StatusOr<v1::JobInfo> j = s->Submit(r);
  ASSERT_TRUE(j.ok());
  v1::JobInfo ended = WaitForEnd(*s, j->job_id());
  EXPECT_EQ(ended.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(ended.attempts(), 2);
  EXPECT_EQ(vanishing->calls.load(), 2);
  EXPECT_NE(ended.error_message().find("worker flaky lost"), std::string::npos) << ended.error_message();
  EXPECT_NE(ended.error_message().find("gave up after 2 attempts"), std::string::npos) << ended.error_message();
}

TEST_P(SchedulerTest, ExpiredLeaseOfADeadSchedulerIsRequeuedAndRun) {
  std::string id;
  {
    // A scheduler that claimed the job and died before finishing: its row is
    // RUNNING on a worker nobody renews.
    std::unique_ptr<jobs::JobStore> store = OpenStore();
    jobs::JobRecord job;
    job.job_id = "orphan";
    job.kind = "test.steps";
    v1::JobSpec spec;
    v1::Progress p;
    p.set_total_steps(1);
    spec.set_kind("test.steps");
    spec.mutable_spec()->PackFrom(p);
    job.spec = spec.SerializeAsString();
    job.created_ms = absl::ToUnixMillis(absl::Now());
    bool created = false;
    ASSERT_TRUE(store->Create(job, {}, &created).ok());
    jobs::ClaimRequest claim;
    claim.worker = "dead/local";
    claim.kinds = {"test.steps"};
    claim.now_ms = job.created_ms;
    claim.lease_ms = 100;
    absl::StatusOr<std::optional<jobs::JobRecord>> claimed = store->ClaimNext(claim);
    ASSERT_TRUE(claimed.ok() && claimed->has_value());
    id = (*claimed)->job_id;
  }
  auto s = MakeScheduler("s2");
  v1::JobInfo ended = WaitForEnd(*s, id);
  EXPECT_EQ(ended.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(ended.attempts(), 2);
  EXPECT_EQ(ended.worker(), "s2/local");
}

TEST_P(SchedulerTest, RestartRequeuesItsOwnRunningJobsAtOnce) {
  std::string id;
  {
    auto s = MakeScheduler("s1");
    absl::StatusOr<v1::JobInfo> j = s->Submit(StepsJob(100000, 2));
    ASSERT_TRUE(j.ok());
    id = j->job_id();
    WaitForState(*s, id, v1::JOB_STATE_RUNNING);
  }  // Stop(): the attempt is cancelled and the job re-queued
  auto s = MakeScheduler("s1");
  v1::JobInfo running = WaitForState(*s, id, v1::JOB_STATE_RUNNING);
  EXPECT_EQ(running.attempts(), 2);
  ASSERT_TRUE(s->Cancel(id).ok());
  EXPECT_EQ(WaitForEnd(*s, id).state(), v1::JOB_STATE_CANCELLED);
}

TEST_P(SchedulerTest, QueuedJobPastItsDeadlineFails) {
  auto s = MakeScheduler("s1", 1, {}, false);
  v1::SubmitJobRequest r = StepsJob(1, 1);
  r.set_deadline_unix_ms(absl::ToUnixMillis(absl::Now() + absl::Milliseconds(100)));
  absl::StatusOr<v1::JobInfo> j = s->Submit(r);
  ASSERT_TRUE(j.ok());
  v1::JobInfo ended = WaitForEnd(*s, j->job_id());
  EXPECT_EQ(ended.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(ended.error_code(), static_cast<int>(absl::StatusCode::kDeadlineExceeded));
}

TEST_P(SchedulerTest, TwoSchedulersOnOneStoreRunEachJobOnce) {
  auto a = MakeScheduler("a", 2);
  auto b = MakeScheduler("b", 2);
  std::vector<std::string> ids;
  for (int i = 0; i < 8; ++i) {
    absl::StatusOr<v1::JobInfo> j = (i % 2 ? a : b)->Submit(StepsJob(3, 2));
    ASSERT_TRUE(j.ok()) << j.status();
    ids.push_back(j->job_id());
  }
  for (const std::string& id : ids) {
    v1::JobInfo ended = WaitForEnd(*a, id);
    EXPECT_EQ(ended.state(), v1::JOB_STATE_SUCCEEDED);
    EXPECT_EQ(ended.attempts(), 1);
  }
  EXPECT_EQ(engine_->iterations.load(), 8 * 3);
}

TEST_P(SchedulerTest, RemoteWorkerRunsJobsAndItsDeathRequeuesThem) {
  InProcessWorker local("remote-process", &engines_, (dir_ / "worker_results").string(), 1);
  WorkerServiceImpl service(&local);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  const std::string address = absl::StrCat("127.0.0.1:", port);
  auto remote = std::make_shared<RemoteWorker>(
      address, grpc::CreateChannel(address, grpc::InsecureChannelCredentials()), (dir_ / "results").string(),
      absl::Seconds(1));
  auto s = MakeScheduler("s1", 1, {{remote, 1}}, /*local=*/false);

  absl::StatusOr<v1::JobInfo> quick = s->Submit(StepsJob(3, 1, "", 0, "", "remote bytes"));
  ASSERT_TRUE(quick.ok());
  v1::JobInfo done = WaitForEnd(*s, quick->job_id());
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.error_message();
  EXPECT_EQ(done.worker(), "worker@" + address);
  EXPECT_GE(done.last_sequence(), 6);  // progress crossed the wire
  // The result file came home: it is on the scheduler's disk, not the worker's.
  absl::StatusOr<v1::JobResult> result = s->GetResult(done.job_id());
  ASSERT_TRUE(result.ok() && result->files_size() == 1) << result.status();
  EXPECT_EQ(fs::path(result->files(0).path()).parent_path(), dir_ / "results" / done.job_id());
  std::ifstream in(result->files(0).path());
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()), "remote bytes");
  EXPECT_FALSE(fs::exists(dir_ / "worker_results" / done.job_id()));

  // The worker process goes away mid-job: the job is re-queued (no other
  // worker here, so it waits QUEUED with its attempt counted).
  absl::StatusOr<v1::JobInfo> slow = s->Submit(StepsJob(100000, 2));
  ASSERT_TRUE(slow.ok());
  WaitForState(*s, slow->job_id(), v1::JOB_STATE_RUNNING);
  server->Shutdown(std::chrono::system_clock::now());
  v1::JobInfo requeued = WaitForState(*s, slow->job_id(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(requeued.attempts(), 1);
  EXPECT_TRUE(s->Cancel(slow->job_id()).ok());
}

// Issue 35: a job records its submitter's trace; every event carries it, and the remote worker's
// Execute call continues it (the worker's server sees the same trace id).
TEST_P(SchedulerTest, TheSubmittersTraceReachesTheRemoteWorkerAndEveryEvent) {
  InProcessWorker local("remote-process", &engines_, (dir_ / "worker_results").string(), 1);
  WorkerServiceImpl service(&local);
  std::mutex mu;
  std::vector<ServerSpan> spans;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<TraceInterceptorFactory>([&](ServerSpan span) {
    std::lock_guard<std::mutex> lock(mu);
    spans.push_back(std::move(span));
  }));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  const std::string address = absl::StrCat("127.0.0.1:", port);
  auto remote = std::make_shared<RemoteWorker>(address, CreatePeerChannel(address, {}, grpc::ChannelArguments()),
                                               (dir_ / "results").string(), absl::Seconds(1));
  auto s = MakeScheduler("s1", 1, {{remote, 1}}, /*local=*/false);

  const std::string trace = "4bf92f3577b34da6a3ce929d0e0e4736";
  absl::StatusOr<v1::JobInfo> submitted;
  {
    ScopedTraceContext submitter(ContinueTrace(trace));  // what the server's interceptor sets for Submit
    submitted = s->Submit(StepsJob(3, 1));
  }
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_EQ(submitted->trace_id(), trace);
  v1::JobInfo done = WaitForEnd(*s, submitted->job_id());
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.error_message();
  EXPECT_EQ(done.trace_id(), trace);
  std::vector<v1::JobEvent> events;
  ASSERT_TRUE(
      s->Watch(done.job_id(), 0, [&](const v1::JobEvent& e) { events.push_back(e); return true; }, nullptr).ok());
  ASSERT_GE(events.size(), 3u);
  for (const v1::JobEvent& e : events) EXPECT_EQ(e.trace_id(), trace) << e.message();

  {
    std::lock_guard<std::mutex> lock(mu);
    int executes = 0;
    for (const ServerSpan& span : spans) {
      if (span.name != "/tessera.v1.WorkerService/Execute") continue;
      ++executes;
      EXPECT_EQ(span.trace_id, trace);
      EXPECT_EQ(span.parent_span_id.size(), 16u);  // the scheduler's hop, not a new trace
      EXPECT_EQ(span.job_id, done.job_id());
    }
    EXPECT_EQ(executes, 1);
  }

  // A job submitted outside any trace has none, and its events carry none.
  absl::StatusOr<v1::JobInfo> untraced = s->Submit(StepsJob(1, 1));
  ASSERT_TRUE(untraced.ok());
  EXPECT_EQ(untraced->trace_id(), "");
  WaitForEnd(*s, untraced->job_id());
}

// A job database written before trace ids (schema version 2) gains the column on open; its jobs
// have no trace, and new jobs record theirs.
TEST_P(SchedulerTest, ADatabaseFromBeforeTraceIdsGainsTheColumn) {
  std::string old_id;
  {
    auto s = MakeScheduler();
    absl::StatusOr<v1::JobInfo> old = s->Submit(StepsJob(1, 1));
    ASSERT_TRUE(old.ok());
    old_id = old->job_id();
    WaitForEnd(*s, old_id);
  }
  {
    absl::StatusOr<std::unique_ptr<jobs::SqlDatabase>> db =
        GetParam() == "postgresql" ? jobs::OpenPostgresDatabase(pg_->conninfo())
                                   : jobs::OpenSqliteDatabase((dir_ / "jobs.db").string());
    ASSERT_TRUE(db.ok()) << db.status();
    for (const char* sql : {"ALTER TABLE tessera_jobs DROP COLUMN trace_id", "UPDATE tessera_schema SET version = 2"}) {
      absl::StatusOr<std::vector<jobs::SqlRow>> r = (*db)->Query(sql);
      ASSERT_TRUE(r.ok()) << sql << ": " << r.status();
    }
  }
  auto s = MakeScheduler();
  absl::StatusOr<v1::JobInfo> old = s->Get(old_id);
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->trace_id(), "");
  v1::SubmitJobRequest request = StepsJob(1, 1);
  SubmitOptions options;
  options.trace_id = "0af7651916cd43dd8448eb211c80319c";
  absl::StatusOr<v1::JobInfo> traced = s->Submit(request, options);
  ASSERT_TRUE(traced.ok()) << traced.status();
  EXPECT_EQ(s->Get(traced->job_id())->trace_id(), "0af7651916cd43dd8448eb211c80319c");
  WaitForEnd(*s, traced->job_id());
}

INSTANTIATE_TEST_SUITE_P(Stores, SchedulerTest, ::testing::Values("sqlite", "postgresql"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace tessera::scheduler
