// The scheduler across real processes: `tessera serve` killed with -9 while
// jobs are queued and running and started again on the same state directory;
// a `--role worker` process killed mid-job while a `--role scheduler` process
// places jobs on two workers; a cancel from the `tessera job` CLI. Jobs are
// real registrations of a small phantom (no installed data needed).
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/nifti_io.h"
#include "gtest/gtest.h"
#include "kernels/registration/pipeline/synthetic.h"
#include "tessera/v1/registration.pb.h"
#include "tessera/v1/scheduler.grpc.pb.h"
#include "tests/process_testing.h"

namespace tessera {
namespace {

using testing::Child;
using testing::PortFrom;
using testing::TempDir;

namespace fs = std::filesystem;

// A registration problem on disk: fixed and moving phantoms and labels.
struct Problem {
  std::string fixed, moving, fixed_labels, moving_labels;
};

Problem WriteProblem(const std::string& dir) {
  Problem p;
  absl::StatusOr<registration::Phantom> phantom = registration::MakePhantom(32, 4.0);
  EXPECT_TRUE(phantom.ok()) << phantom.status();
  registration::SyntheticOptions options;
  absl::StatusOr<registration::SyntheticPair> pair =
      registration::MakeSyntheticPair(phantom->image, &phantom->labels, options);
  EXPECT_TRUE(pair.ok()) << pair.status();
  fs::create_directories(dir);
  p.fixed = dir + "/fixed.nii.gz";
  p.moving = dir + "/moving.nii.gz";
  p.fixed_labels = dir + "/fixed_labels.nii.gz";
  p.moving_labels = dir + "/moving_labels.nii.gz";
  EXPECT_TRUE(WriteNifti(phantom->image, p.fixed).ok());
  EXPECT_TRUE(WriteNifti(pair->moving, p.moving).ok());
  EXPECT_TRUE(WriteNifti(phantom->labels, p.fixed_labels).ok());
  EXPECT_TRUE(WriteNifti(*pair->moving_labels, p.moving_labels).ok());
  return p;
}

// A deformable registration that takes a while on the CPU: `iterations`
// steps with convergence checks off.
v1::SubmitJobRequest RegistrationJob(const Problem& p, int iterations, const std::string& out_dir = "") {
  v1::RegisterRequest r;
  r.mutable_fixed()->set_path(p.fixed);
  r.mutable_moving()->set_path(p.moving);
  r.mutable_fixed_labels()->set_path(p.fixed_labels);
  r.mutable_moving_labels()->set_path(p.moving_labels);
  r.set_output_dir(out_dir);
  v1::RegistrationOptions* o = r.mutable_options();
  o->set_device("cpu");
  o->set_metric("lncc");
  o->add_stages("affine");
  o->add_stages("deformable");
  o->add_scales(1);
  o->add_affine_iterations(10);
  o->add_deformable_iterations(iterations);
  o->set_patience(std::min(iterations + 1, 100000));
  o->set_tolerance(0);
  v1::SubmitJobRequest submit;
  submit.mutable_spec()->mutable_spec()->PackFrom(r);
  return submit;
}

class Server {
 public:
  explicit Server(std::vector<std::string> flags, const std::string& log) {
    std::vector<std::string> args = {"serve", "--grpc-port=0", "--metrics-port=-1", "--drain-timeout-s=2"};
    args.insert(args.end(), flags.begin(), flags.end());
    child_ = std::make_unique<Child>(args, log);
    port_ = PortFrom(child_->ReadLine(), "grpc_port");
    child_->ReadLine();  // metrics_port
    address_ = absl::StrCat("127.0.0.1:", port_);
  }
  const std::string& address() const { return address_; }
  Child& child() { return *child_; }
  std::unique_ptr<v1::SchedulerService::Stub> Stub() const {
    return v1::SchedulerService::NewStub(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  }

 private:
  std::unique_ptr<Child> child_;
  int port_ = 0;
  std::string address_;
};

v1::JobInfo Submit(v1::SchedulerService::Stub& stub, const v1::SubmitJobRequest& r) {
  grpc::ClientContext context;
  v1::JobInfo info;
  grpc::Status s = stub.Submit(&context, r, &info);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return info;
}

v1::JobInfo Get(v1::SchedulerService::Stub& stub, const std::string& id) {
  grpc::ClientContext context;
  v1::JobRef ref;
  ref.set_job_id(id);
  v1::JobInfo info;
  grpc::Status s = stub.Get(&context, ref, &info);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return info;
}

v1::JobInfo WaitFor(v1::SchedulerService::Stub& stub, const std::string& id, bool (*done)(const v1::JobInfo&),
                    absl::Duration timeout = absl::Seconds(120)) {
  const absl::Time until = absl::Now() + timeout;
  v1::JobInfo info;
  while (absl::Now() < until) {
    info = Get(stub, id);
    if (info.job_id().empty()) return info;  // Get failed (reported)
    if (done(info)) return info;
    absl::SleepFor(absl::Milliseconds(50));
  }
  ADD_FAILURE() << "job " << id << " stuck in " << v1::JobState_Name(info.state());
  return info;
}

bool Ended(const v1::JobInfo& i) { return i.state() >= v1::JOB_STATE_SUCCEEDED; }
bool Running(const v1::JobInfo& i) { return i.state() == v1::JOB_STATE_RUNNING; }

TEST(SchedulerProcess, KillNineWithJobsQueuedAndRunningLosesNothing) {
  const std::string root = TempDir() + "/kill9";
  const Problem p = WriteProblem(root + "/data");
  const std::vector<std::string> flags = {"--data-root=" + root, "--state-dir=" + root + "/state",
                                          "--services=registration"};
  std::string done_id, running_id;
  std::vector<std::string> queued_ids;
  std::string done_file;
  {
    Server server(flags, "kill9_first.txt");
    auto stub = server.Stub();
    done_id = Submit(*stub, RegistrationJob(p, 5, root + "/out_done")).job_id();
    ASSERT_EQ(WaitFor(*stub, done_id, Ended).state(), v1::JOB_STATE_SUCCEEDED);
    running_id = Submit(*stub, RegistrationJob(p, 400)).job_id();
    for (int i = 0; i < 2; ++i) queued_ids.push_back(Submit(*stub, RegistrationJob(p, 20)).job_id());
    WaitFor(*stub, running_id, Running);
    server.child().Kill9();
  }
  Server again(flags, "kill9_second.txt");
  auto stub = again.Stub();
  // The finished job's result survived.
  grpc::ClientContext context;
  v1::JobRef ref;
  ref.set_job_id(done_id);
  v1::JobResult result;
  ASSERT_TRUE(stub->GetResult(&context, ref, &result).ok());
  v1::RegistrationResult typed;
  ASSERT_TRUE(result.result().UnpackTo(&typed));
  EXPECT_TRUE(typed.has_dice_after());
  ASSERT_GT(result.files_size(), 0);
  for (const v1::ResultFile& f : result.files()) EXPECT_TRUE(fs::exists(f.path())) << f.path();
  // The running job ran again; the queued ones ran once.
  v1::JobInfo rerun = WaitFor(*stub, running_id, Ended);
  EXPECT_EQ(rerun.state(), v1::JOB_STATE_SUCCEEDED) << rerun.error_message();
  EXPECT_EQ(rerun.attempts(), 2);
  for (const std::string& id : queued_ids) {
    v1::JobInfo q = WaitFor(*stub, id, Ended);
    EXPECT_EQ(q.state(), v1::JOB_STATE_SUCCEEDED) << q.error_message();
    EXPECT_EQ(q.attempts(), 1);
  }
  // Its event history tells the story: re-queued when the scheduler restarted.
  grpc::ClientContext watch_context;
  v1::WatchJobRequest watch;
  watch.set_job_id(running_id);
  auto reader = stub->Watch(&watch_context, watch);
  v1::JobEvent e;
  bool requeued = false;
  int64_t last = 0;
  while (reader->Read(&e)) {
    EXPECT_EQ(e.sequence(), last + 1);
    last = e.sequence();
    if (e.message().find("restarted") != std::string::npos) requeued = true;
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_TRUE(requeued);
}

// The server commits a submitted job and dies before it answers (fault
// injection: TESSERA_FAULT_EXIT_AFTER_COMMIT); the client, which never saw an
// answer, retries with the same request id after the restart and gets that
// job — one job, run once — also after it has finished; another request under
// the id is ALREADY_EXISTS (issue 39).
TEST(SchedulerProcess, ASubmitRetriedAfterTheAnswerWasLostGetsItsJob) {
  const std::string root = TempDir() + "/lost-ack";
  const Problem p = WriteProblem(root + "/data");
  const std::vector<std::string> flags = {"--data-root=" + root, "--state-dir=" + root + "/state",
                                          "--services=registration"};
  v1::SubmitJobRequest request = RegistrationJob(p, 5);
  request.set_request_id("lost-ack-1");
  {
    setenv("TESSERA_FAULT_EXIT_AFTER_COMMIT", "lost-ack-1", 1);
    Server server(flags, "lost_ack_first.txt");
    unsetenv("TESSERA_FAULT_EXIT_AFTER_COMMIT");
    auto stub = server.Stub();
    grpc::ClientContext context;
    v1::JobInfo info;
    grpc::Status s = stub->Submit(&context, request, &info);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  }
  Server again(flags, "lost_ack_second.txt");
  auto stub = again.Stub();
  const v1::JobInfo retried = Submit(*stub, request);
  ASSERT_FALSE(retried.job_id().empty());
  EXPECT_EQ(retried.request_id(), "lost-ack-1");
  EXPECT_EQ(WaitFor(*stub, retried.job_id(), Ended).state(), v1::JOB_STATE_SUCCEEDED);
  const v1::JobInfo after = Submit(*stub, request);
  EXPECT_EQ(after.job_id(), retried.job_id());
  EXPECT_EQ(after.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(after.attempts(), 1);
  grpc::ClientContext list_context;
  v1::ListJobsRequest list;
  v1::ListJobsResponse jobs;
  ASSERT_TRUE(stub->List(&list_context, list, &jobs).ok());
  EXPECT_EQ(jobs.jobs_size(), 1);
  v1::SubmitJobRequest other = RegistrationJob(p, 6);
  other.set_request_id("lost-ack-1");
  grpc::ClientContext other_context;
  v1::JobInfo refused;
  grpc::Status s = stub->Submit(&other_context, other, &refused);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS) << s.error_message();
}

TEST(SchedulerProcess, KilledWorkersJobFinishesOnTheOtherWorker) {
  const std::string root = TempDir() + "/workers";
  const Problem p = WriteProblem(root + "/data");
  Server w1({"--role=worker", "--data-root=" + root, "--state-dir=" + root + "/w1", "--services=registration"},
            "worker1.txt");
  Server w2({"--role=worker", "--data-root=" + root, "--state-dir=" + root + "/w2", "--services=registration"},
            "worker2.txt");
  Server scheduler({"--role=scheduler", "--data-root=" + root, "--state-dir=" + root + "/sched",
                    "--worker=" + w1.address(), "--worker=" + w2.address()},
                   "scheduler.txt");
  auto stub = scheduler.Stub();
  const std::string id = Submit(*stub, RegistrationJob(p, 300)).job_id();
  const v1::JobInfo running = WaitFor(*stub, id, Running);
  const bool on_first = running.worker() == "worker@" + w1.address();
  ASSERT_TRUE(on_first || running.worker() == "worker@" + w2.address()) << running.worker();
  (on_first ? w1 : w2).child().Kill9();
  const v1::JobInfo ended = WaitFor(*stub, id, Ended);
  EXPECT_EQ(ended.state(), v1::JOB_STATE_SUCCEEDED) << ended.error_message();
  EXPECT_EQ(ended.attempts(), 2);
  EXPECT_EQ(ended.worker(), "worker@" + (on_first ? w2 : w1).address());
}

TEST(SchedulerProcess, CliSubmitsWatchesAndCancels) {
  const std::string root = TempDir() + "/cli";
  const Problem p = WriteProblem(root + "/data");
  Server server({"--data-root=" + root, "--state-dir=" + root + "/state", "--services=registration"}, "cli.txt");
  // A long job through the gRPC API, cancelled through the CLI.
  auto stub = server.Stub();
  const std::string id = Submit(*stub, RegistrationJob(p, 50000)).job_id();
  WaitFor(*stub, id, Running);
  Child cancel({"job", "cancel", "--server", server.address(), id}, "cli_cancel.txt");
  EXPECT_EQ(cancel.WaitExit(std::chrono::seconds(30)), 0);
  const absl::Time asked = absl::Now();
  const v1::JobInfo ended = WaitFor(*stub, id, Ended, absl::Seconds(30));
  EXPECT_EQ(ended.state(), v1::JOB_STATE_CANCELLED);
  EXPECT_LT(absl::Now() - asked, absl::Seconds(5)) << "the registration kept running after the cancel";
  // A registration submitted with the same flags as `tessera register`, watched to the end.
  Child submit({"job", "submit", "--server", server.address(), "--id", "cli-job-1", "--watch", "register",
                "--fixed", p.fixed, "--moving", p.moving, "--fixed-labels", p.fixed_labels, "--moving-labels",
                p.moving_labels, "--out", root + "/cli_out", "--scales", "2,1", "--stages", "affine",
                "--device", "cpu"},
               "cli_submit.txt");
  const std::string output = submit.ReadAll();
  EXPECT_EQ(submit.WaitExit(std::chrono::seconds(120)), 0) << output;
  EXPECT_NE(output.find("SUCCEEDED"), std::string::npos) << output;
  EXPECT_TRUE(fs::exists(root + "/cli_out/warped.nii.gz"));
  // The same request id with the same request again is the same job, also
  // after it finished; with another request it is refused (ALREADY_EXISTS).
  Child again({"job", "submit", "--server", server.address(), "--id", "cli-job-1", "register", "--fixed", p.fixed,
               "--moving", p.moving, "--fixed-labels", p.fixed_labels, "--moving-labels", p.moving_labels, "--out",
               root + "/cli_out", "--scales", "2,1", "--stages", "affine", "--device", "cpu"},
              "cli_again.txt");
  const std::string again_out = again.ReadAll();
  EXPECT_EQ(again.WaitExit(std::chrono::seconds(30)), 0);
  EXPECT_NE(again_out.find("\"state\":\"JOB_STATE_SUCCEEDED\""), std::string::npos) << again_out;
  Child other({"job", "submit", "--server", server.address(), "--id", "cli-job-1", "register", "--fixed", p.fixed,
               "--moving", p.moving, "--out", root + "/other"},
              "cli_other.txt");
  other.ReadAll();
  EXPECT_NE(other.WaitExit(std::chrono::seconds(30)), 0);
  // Bad input: a clear error, exit code 2.
  Child bad({"job", "submit", "--server", server.address(), "bake", "--cake"}, "cli_bad.txt");
  EXPECT_EQ(bad.WaitExit(std::chrono::seconds(30)), 2);
}

// Issue 34: `job submit register --output-format both` on a scheduler whose
// one worker is another process: the DICOM series (one result file per slice,
// one folder deep: warped_dicom/IM00001.dcm ...) and the SEG reach the
// scheduler's results whole, and the output_dir copies the folder too.
TEST(SchedulerProcess, DicomOutputsOfARemoteWorkerArePublished) {
  const std::string root = TempDir() + "/dicom_out";
  const Problem p = WriteProblem(root + "/data");
  Server worker({"--role=worker", "--data-root=" + root, "--state-dir=" + root + "/w", "--services=registration"},
                "dicom_worker.txt");
  Server scheduler({"--role=scheduler", "--data-root=" + root, "--state-dir=" + root + "/sched",
                    "--worker=" + worker.address()},
                   "dicom_scheduler.txt");
  Child submit({"job", "submit", "--server", scheduler.address(), "--watch", "register", "--fixed", p.fixed,
                "--moving", p.moving, "--moving-labels", p.moving_labels, "--out", root + "/out", "--scales", "1",
                "--stages", "affine", "--device", "cpu", "--output-format", "both", "--series-description",
                "remote worker test"},
               "dicom_submit.txt");
  const std::string output = submit.ReadAll();
  ASSERT_EQ(submit.WaitExit(std::chrono::seconds(120)), 0) << output;
  const size_t at = output.find("\"job_id\":\"");
  ASSERT_NE(at, std::string::npos) << output;
  const std::string id = output.substr(at + 10, output.find('"', at + 10) - (at + 10));
  auto stub = scheduler.Stub();
  grpc::ClientContext context;
  v1::JobRef ref;
  ref.set_job_id(id);
  v1::JobResult result;
  ASSERT_TRUE(stub->GetResult(&context, ref, &result).ok()) << id;
  int slices = 0;
  bool seg = false;
  for (const v1::ResultFile& f : result.files()) {
    EXPECT_TRUE(fs::exists(f.path())) << f.path();
    EXPECT_EQ(static_cast<int64_t>(fs::file_size(f.path())), f.bytes()) << f.path();
    if (f.name().rfind("warped_dicom/", 0) == 0) {
      ++slices;
      const std::string tail = "/results/" + id + "/" + f.name();
      EXPECT_EQ(f.path().substr(f.path().size() - std::min(f.path().size(), tail.size())), tail);
    }
    seg |= f.name() == "warped_labels_seg.dcm";
  }
  EXPECT_EQ(slices, 32);
  EXPECT_TRUE(seg);
  int copies = 0;
  for (const auto& e : fs::directory_iterator(root + "/out/warped_dicom")) copies += e.is_regular_file();
  EXPECT_EQ(copies, 32);
  EXPECT_TRUE(fs::exists(root + "/out/warped.nii.gz"));
}

}  // namespace
}  // namespace tessera
