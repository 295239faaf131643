// Issue 39: the resubmission checks every job kind passes through its own
// entry point (RegistrationService.Register, SomAtlasService.CreateAtlas,
// ReconstructionService.Reconstruct, SchedulerService.Submit of a
// fingerprint.search spec). A resubmit under a known request id returns the
// existing job whatever its state — after success, after failure, after a
// cancel, and after a restart on the same job store and state directory —
// and runs nothing new; another request under that id is ALREADY_EXISTS
// naming the id.
//
// A kind derives from ResubmitKind (its engine, its service attached to the
// scheduler, its requests) with a static Create(data_dir), and one macro
// makes its four tests (AfterSuccess, AfterFailure, AfterCancel,
// AcrossARestart), each on a fresh directory:
//
//   class RegistrationKind : public jobs::testing::ResubmitKind { ... };
//   TESSERA_RESUBMISSION_TESTS(RegistrationResubmitTest, RegistrationKind, "reg")
#ifndef TESSERA_SERVICES_JOBS_TESTING_RESUBMISSION_H_
#define TESSERA_SERVICES_JOBS_TESTING_RESUBMISSION_H_

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/server_context.h>
#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/grpc_status.h"
#include "services/jobs/engine.h"
#include "services/scheduler/scheduler.h"
#include "services/scheduler/testing/in_process_scheduler.h"
#include "tessera/v1/common.pb.h"
#include "tessera/v1/jobs.pb.h"

namespace tessera::jobs::testing {

// What a kind's entry point answered a submit with.
struct SubmitAnswer {
  std::string job_id;
  v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
};

// The requests a kind submits.
enum class KindRequest {
  kSucceeds,  // a small job that succeeds
  kChanged,   // kSucceeds with one field changed: another request
  kFails,     // passes the submit's checks, fails when it runs
  kSlow,      // runs long enough to be cancelled while running
};

// One job kind as its clients submit it. Start creates the kind's engines and
// service, a scheduler with one in-process worker over <state_dir>/jobs.db
// (services/scheduler/testing), and attaches the service; Stop destroys the
// scheduler, then the service. Start again on the same directory is a restart.
// A kind's destructor calls Stop() (the base cannot: its service is gone).
class ResubmitKind {
 public:
  virtual ~ResubmitKind();

  absl::Status Start(const std::string& state_dir);
  void Stop();
  scheduler::testing::InProcessScheduler& jobs() { return *jobs_; }

  // The kind's engine (once per Start; it may create the service, which
  // Attach then attaches to the started scheduler).
  virtual absl::StatusOr<std::shared_ptr<const Engine>> CreateEngine(const std::string& state_dir) = 0;
  virtual absl::Status Attach(scheduler::Scheduler* scheduler, const std::string& state_dir) = 0;
  // Destroys the service (after the scheduler is gone).
  virtual void DestroyService() = 0;

  // Submits `which` under `request_id` through the kind's entry point.
  virtual absl::StatusOr<SubmitAnswer> Submit(KindRequest which, const std::string& request_id) = 0;
  // Cancels through the kind's entry point.
  virtual absl::Status Cancel(const std::string& job_id) = 0;
  // Reads a succeeded job's result through the kind's entry point.
  virtual absl::Status ReadResult(const std::string& job_id) = 0;

 private:
  std::unique_ptr<scheduler::testing::InProcessScheduler> jobs_;
};

// <$TEST_TMPDIR or /tmp>/<name>, emptied and created.
std::string FreshStateDir(const std::string& name);

// Each check returns the job's id ("" after a failed assertion).
// (a) Submits kSucceeds under `request_id` and runs it to SUCCEEDED; the same
// request again is that job, SUCCEEDED, its result readable; kChanged under
// the id is ALREADY_EXISTS naming it; no second job was made.
std::string ExpectResubmitAfterSuccess(ResubmitKind& kind, const std::string& request_id);
// (b) kFails runs to FAILED; a resubmit is the FAILED job, not a new run.
std::string ExpectResubmitAfterFailure(ResubmitKind& kind, const std::string& request_id);
// (c) kSlow is cancelled while it runs; a resubmit is the CANCELLED job.
std::string ExpectResubmitAfterCancel(ResubmitKind& kind, const std::string& request_id);
// (d) The three above on `state_dir`, then Stop and Start on the same
// directory: each resubmit is its job, in its state (the succeeded one's
// result still readable), kChanged still ALREADY_EXISTS, nothing new runs.
void ExpectResubmitAcrossARestart(ResubmitKind& kind, const std::string& state_dir);

// Calls a job RPC of `service` that takes a JobRef (CancelJob, GetResult,
// ...) as the server would, with a context of its own.
template <typename Service, typename Response>
absl::Status CallJobRpc(Service& service,
                        grpc::Status (Service::*rpc)(grpc::ServerContext*, const v1::JobRef*, Response*),
                        const std::string& job_id, Response* response) {
  grpc::ServerContext context;
  v1::JobRef ref;
  ref.set_job_id(job_id);
  return FromGrpcStatus((service.*rpc)(&context, &ref, response));
}

// The fixture TESSERA_RESUBMISSION_TESTS makes: Kind::Create(<dir>/data) on
// a fresh <dir> per test, started on <dir>/state.
template <typename Kind>
class ResubmitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
    const std::string dir = FreshStateDir(std::string(test->test_suite_name()) + "-" + test->name());
    std::filesystem::create_directories(dir + "/data");
    state_dir_ = dir + "/state";
    absl::StatusOr<std::unique_ptr<Kind>> kind = Kind::Create(dir + "/data");
    ASSERT_TRUE(kind.ok()) << kind.status();
    kind_ = *std::move(kind);
    absl::Status started = kind_->Start(state_dir_);
    ASSERT_TRUE(started.ok()) << started;
  }

  std::string state_dir_;
  std::unique_ptr<Kind> kind_;
};

}  // namespace tessera::jobs::testing

// The four resubmission tests of `Kind` as Suite.AfterSuccess, AfterFailure,
// AfterCancel and AcrossARestart; request ids start with `prefix`.
#define TESSERA_RESUBMISSION_TESTS(Suite, Kind, prefix)                                              \
  using Suite = ::tessera::jobs::testing::ResubmitTest<Kind>;                                        \
  TEST_F(Suite, AfterSuccess) { ::tessera::jobs::testing::ExpectResubmitAfterSuccess(*kind_, prefix "-ok"); } \
  TEST_F(Suite, AfterFailure) { ::tessera::jobs::testing::ExpectResubmitAfterFailure(*kind_, prefix "-fail"); } \
  TEST_F(Suite, AfterCancel) { ::tessera::jobs::testing::ExpectResubmitAfterCancel(*kind_, prefix "-cancel"); } \
  TEST_F(Suite, AcrossARestart) { ::tessera::jobs::testing::ExpectResubmitAcrossARestart(*kind_, state_dir_); }

#endif  // TESSERA_SERVICES_JOBS_TESTING_RESUBMISSION_H_
