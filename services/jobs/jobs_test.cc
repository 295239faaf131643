// JobRegistry, Job transitions and waiters, WorkerPool bounds, proto mapping.
#include <atomic>
#include <chrono>
#include <limits>
#include <thread>

#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "services/jobs/job_proto.h"
#include "services/jobs/job_registry.h"
#include "services/jobs/worker_pool.h"

namespace tessera::jobs {
namespace {

struct Payload : JobPayload {
  int value = 0;
};

TEST(JobRegistryTest, CreatesLooksUpAndIsIdempotent) {
  JobRegistry registry;
  bool created = false;
  auto a = registry.GetOrCreate("", "k", &created);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(created);
  EXPECT_FALSE((*a)->id().empty());
  EXPECT_EQ((*a)->Snapshot().state, JobState::kQueued);

  auto b = registry.GetOrCreate("mine-1", "k", &created);
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(created);
  auto again = registry.GetOrCreate("mine-1", "k", &created);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(created);
  EXPECT_EQ(again->get(), b->get());
  EXPECT_EQ(registry.GetOrCreate("mine-1", "other", &created).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(registry.GetOrCreate("bad id", "k", &created).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.GetOrCreate(std::string(129, 'a'), "k", &created).status().code(),
            absl::StatusCode::kInvalidArgument);

  EXPECT_EQ(registry.Get("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry.Get("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(registry.Get("mine-1").ok());
  EXPECT_EQ(registry.size(), 2u);
  EXPECT_TRUE(registry.Remove("mine-1"));
  EXPECT_FALSE(registry.Remove("mine-1"));
  EXPECT_EQ(registry.List().size(), 1u);
}

TEST(JobTest, TransitionsAndCancellation) {
  Job job("j", "k");
  EXPECT_TRUE(job.Start());
  EXPECT_FALSE(job.Start());
  JobProgress p;
  p.stage = "affine";
  p.step = 3;
  p.metrics["loss"] = 0.5;
  job.SetProgress(p);
  JobSnapshot s = job.Snapshot();
  EXPECT_EQ(s.state, JobState::kRunning);
  EXPECT_EQ(s.progress.step, 3);
  EXPECT_EQ(s.version, 2);
  auto payload = std::make_shared<Payload>();
  payload->value = 7;
  job.Succeed(payload);
  job.Fail(absl::InternalError("late"));  // ignored: already ended
  s = job.Snapshot();
  EXPECT_EQ(s.state, JobState::kSucceeded);
  EXPECT_TRUE(s.error.ok());
  EXPECT_EQ(std::dynamic_pointer_cast<const Payload>(s.result)->value, 7);

  Job queued("q", "k");
  queued.RequestCancel();
  EXPECT_EQ(queued.Snapshot().state, JobState::kCancelled);
  EXPECT_FALSE(queued.Start());
  EXPECT_TRUE(queued.cancel_flag()->load());

  Job running("r", "k");
  ASSERT_TRUE(running.Start());
  running.RequestCancel();
  EXPECT_EQ(running.Snapshot().state, JobState::kRunning);
  EXPECT_TRUE(running.Snapshot().cancel_requested);
  running.Fail(absl::CancelledError("stopped"));
  EXPECT_EQ(running.Snapshot().state, JobState::kCancelled);

  Job failed("f", "k");
  ASSERT_TRUE(failed.Start());
  failed.Fail(absl::InvalidArgumentError("NaN voxels"));
  EXPECT_EQ(failed.Snapshot().state, JobState::kFailed);
  v1::JobStatus proto = ToJobStatusProto(failed.Snapshot());
  EXPECT_EQ(proto.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(proto.error_message(), "INVALID_ARGUMENT: NaN voxels");
  EXPECT_EQ(proto.last_progress().job_id(), "f");
  EXPECT_GT(proto.created_unix_ms(), 0);
}

TEST(JobTest, WaitersWakeOnProgressAndEnd) {
  Job job("w", "k");
  ASSERT_TRUE(job.Start());
  const int64_t v0 = job.Snapshot().version;
  // Times out without a change.
  const absl::Time start = absl::Now();
  EXPECT_EQ(job.WaitForChange(v0, absl::Now() + absl::Milliseconds(50)).version, v0);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(40));

  std::thread worker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    job.SetProgress(JobProgress{});
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    job.Fail(absl::DataLossError("gone"));
  });
  JobSnapshot s = job.WaitForChange(v0, absl::Now() + absl::Seconds(10));
  EXPECT_GT(s.version, v0);
  // Waiting only for the end.
  s = job.WaitForChange(std::numeric_limits<int64_t>::max(), absl::Now() + absl::Seconds(10));
  EXPECT_EQ(s.state, JobState::kFailed);
  worker.join();
}

TEST(JobRegistryTest, DropsOldAndExcessEndedJobs) {
  JobRegistryOptions options;
  options.max_finished_jobs = 2;
  JobRegistry registry(options);
  bool created;
  for (const char* id : {"a", "b", "c"}) {
    auto job = registry.GetOrCreate(id, "k", &created).value();
    job->Start();
    job->Fail(absl::InternalError("x"));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  auto running = registry.GetOrCreate("running", "k", &created).value();
  running->Start();
  // Creating "running" dropped the oldest ended job.
  EXPECT_EQ(registry.Get("a").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(registry.Get("b").ok());
  EXPECT_TRUE(registry.Get("c").ok());

  options.finished_ttl = absl::ZeroDuration();
  JobRegistry expiring(options);
  auto job = expiring.GetOrCreate("old", "k", &created).value();
  job->RequestCancel();
  expiring.GetOrCreate("new", "k", &created).value();
  EXPECT_EQ(expiring.Get("old").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(expiring.Get("new").ok());  // queued jobs never expire
  expiring.CancelAll();
  EXPECT_EQ(expiring.Get("new").value()->Snapshot().state, JobState::kCancelled);
}

TEST(WorkerPoolTest, BoundsTheQueue) {
  WorkerPool pool(1, 1);
  std::atomic<bool> release{false};
  std::atomic<int> ran{0};
  auto blocker = [&] {
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ++ran;
  };
  ASSERT_TRUE(pool.TrySubmit(blocker).ok());
  while (pool.running() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(pool.TrySubmit(blocker).ok());  // waits in the queue
  EXPECT_EQ(pool.queued(), 1);
  EXPECT_EQ(pool.TrySubmit(blocker).code(), absl::StatusCode::kResourceExhausted);
  release = true;
  pool.Shutdown();
  EXPECT_EQ(ran.load(), 2);
  EXPECT_EQ(pool.TrySubmit(blocker).code(), absl::StatusCode::kUnavailable);

  WorkerPool direct(1, 0);  // no queue: an idle worker or nothing
  release = false;
  ASSERT_TRUE(direct.TrySubmit(blocker).ok());
  EXPECT_EQ(direct.TrySubmit(blocker).code(), absl::StatusCode::kResourceExhausted);
  release = true;
}

}  // namespace
}  // namespace tessera::jobs
