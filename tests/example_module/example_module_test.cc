// A module added to a serving process by one line in its module list, driven
// over gRPC end to end: hosted with the real hosting code of `tessera serve`
// (CreateHostedServices, CreateHostedScheduler, ServiceHost), its roles read
// from its .proto, its jobs run and persisted by the scheduler, idempotent.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "cli/hosted_services.h"
#include "cli/scheduler_host.h"
#include "services/server/auth.h"
#include "services/server/bearer_channel.h"
#include "services/server/service_host.h"
#include "tessera/testing/example.grpc.pb.h"
#include "tessera/v1/scheduler.grpc.pb.h"
#include "tests/example_module/example_module.h"

namespace tessera {
namespace {

constexpr char kReader[] = "reader-token-0123456789abcdef";
constexpr char kEnroller[] = "enroller-token-0123456789abcdef";

// The module list of this test binary: the one line a new service adds.
const std::vector<cli::ModuleEntry>& TestModules() {
  static const auto* modules = new std::vector<cli::ModuleEntry>{
      {"example", [](const cli::ModuleOptions& o) { return example::NewExampleModule(o.server); }, {}, nullptr},
  };
  return *modules;
}

class ExampleModuleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/example_module_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::ofstream(dir_ + "/tokens") << kReader << " rita reader\n" << kEnroller << " eddie enroller\n";
    Start();
  }
  void TearDown() override {
    Stop();
    std::system(("rm -rf " + dir_).c_str());
  }

  void Start() {
    ServerOptions options;
    options.grpc_port = 0;
    options.metrics_port = -1;
    options.device = "cpu";
    options.token_file = dir_ + "/tokens";
    auto services = cli::CreateHostedServices(TestModules(), cli::ModuleOptions{options, {}});
    ASSERT_TRUE(services.ok()) << services.status();
    services_ = std::make_unique<cli::HostedServices>(std::move(*services));
    cli::SchedulerHostOptions scheduler_options;
    scheduler_options.state_dir = dir_ + "/state";  // the job store persists here across Stop/Start
    auto scheduler = cli::CreateHostedScheduler(scheduler_options, options, *services_);
    ASSERT_TRUE(scheduler.ok()) << scheduler.status();
    scheduler_ = std::make_unique<cli::HostedScheduler>(std::move(*scheduler));
    host_ = std::make_unique<ServiceHost>(options);
    services_->AddTo(*host_);
    scheduler_->AddTo(*host_);
    auto ports = host_->Start();
    ASSERT_TRUE(ports.ok()) << ports.status();
    target_ = absl::StrCat("127.0.0.1:", ports->grpc_port);
  }
  void Stop() {
    if (host_) host_->Drain();
    host_.reset();
    scheduler_.reset();
    services_.reset();
  }

  std::unique_ptr<testing::ExampleService::Stub> Stub(const std::string& token) {
    return testing::ExampleService::NewStub(
        CreateBearerChannel(target_, grpc::InsecureChannelCredentials(), grpc::ChannelArguments(), token));
  }
  static std::unique_ptr<grpc::ClientContext> Context() {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return context;
  }
  // Watches `job_id` to its end; returns its last progress.
  v1::Progress WatchToEnd(const std::string& job_id) {
    v1::JobRef ref;
    ref.set_job_id(job_id);
    auto context = Context();
    auto reader = Stub(kEnroller)->WatchJob(context.get(), ref);  // its owner
    v1::Progress progress, last;
    while (reader->Read(&progress)) last = progress;
    EXPECT_TRUE(reader->Finish().ok());
    return last;
  }

  std::string dir_, target_;
  std::unique_ptr<cli::HostedServices> services_;
  std::unique_ptr<cli::HostedScheduler> scheduler_;
  std::unique_ptr<ServiceHost> host_;
};

TEST_F(ExampleModuleTest, RunsItsJobsOverGrpcWithItsRolesAndIdempotency) {
  // Roles come from the module's .proto: nothing else lists them.
  EXPECT_EQ(RequiredRole("/tessera.testing.ExampleService/Sum"), Role::kEnroller);
  EXPECT_EQ(RequiredRole("/tessera.testing.ExampleService/GetResult"), Role::kReader);

  testing::SumRequest request;
  request.set_job_id("sum-1");
  double expected = 0;
  for (int i = 0; i < 5000; ++i) {
    request.add_values(0.25 * i - 3.5);
    expected += 0.25 * i - 3.5;
  }
  v1::JobStatus submitted;
  {
    auto context = Context();
    grpc::Status denied = Stub(kReader)->Sum(context.get(), request, &submitted);
    EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED) << denied.error_message();
  }
  {
    auto context = Context();
    grpc::Status s = Stub(kEnroller)->Sum(context.get(), request, &submitted);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  ASSERT_FALSE(submitted.job_id().empty());  // the scheduler's id; "sum-1" names it too
  const std::string job_id = submitted.job_id();
  const v1::Progress last = WatchToEnd(submitted.job_id());
  EXPECT_EQ(last.state(), v1::JOB_STATE_SUCCEEDED) << last.message();

  v1::JobRef ref;
  ref.set_job_id("sum-1");  // the request id finds the job as well as its own id
  testing::SumResult result;
  {
    // Another principal's job does not exist for a reader (issue 31).
    auto context = Context();
    const grpc::Status hidden = Stub(kReader)->GetResult(context.get(), ref, &result);
    EXPECT_EQ(hidden.error_code(), grpc::StatusCode::NOT_FOUND) << hidden.error_message();
    EXPECT_EQ(hidden.error_message(), "no sum job 'sum-1'");
  }
  {
    auto context = Context();
    ASSERT_TRUE(Stub(kEnroller)->GetResult(context.get(), ref, &result).ok());
  }
  EXPECT_EQ(result.job_id(), job_id);
  EXPECT_EQ(result.count(), 5000);
  EXPECT_DOUBLE_EQ(result.sum(), expected);

  // The scheduler sees the module's job kind like any other; a principal
  // lists its own jobs.
  for (const char* token : {kEnroller, kReader}) {
    v1::ListJobsRequest list;
    v1::ListJobsResponse jobs;
    auto context = Context();
    auto scheduler = v1::SchedulerService::NewStub(
        CreateBearerChannel(target_, grpc::InsecureChannelCredentials(), grpc::ChannelArguments(), token));
    ASSERT_TRUE(scheduler->List(context.get(), list, &jobs).ok());
    if (token == kReader) {
      EXPECT_EQ(jobs.jobs_size(), 0);
      continue;
    }
    ASSERT_EQ(jobs.jobs_size(), 1);
    EXPECT_EQ(jobs.jobs(0).kind(), "example.sum");
    EXPECT_EQ(jobs.jobs(0).owner(), "eddie");
  }

  // The job core's idempotency, across a restart of the whole process.
  Stop();
  Start();
  {
    v1::JobStatus again;
    auto context = Context();
    ASSERT_TRUE(Stub(kEnroller)->Sum(context.get(), request, &again).ok());
    EXPECT_EQ(again.job_id(), job_id);
    EXPECT_EQ(again.state(), v1::JOB_STATE_SUCCEEDED);
  }
  {
    testing::SumRequest other = request;
    other.add_values(1);
    v1::JobStatus refused;
    auto context = Context();
    grpc::Status s = Stub(kEnroller)->Sum(context.get(), other, &refused);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS) << s.error_message();
    EXPECT_NE(s.error_message().find("sum-1"), std::string::npos) << s.error_message();
  }
}

TEST_F(ExampleModuleTest, BadRequestsAreRefusedAtSubmit) {
  testing::SumRequest request;
  request.add_values(1);
  request.add_values(std::numeric_limits<double>::quiet_NaN());
  v1::JobStatus status;
  auto context = Context();
  grpc::Status s = Stub(kEnroller)->Sum(context.get(), request, &status);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("values[1]"), std::string::npos) << s.error_message();

  testing::SumRequest empty;
  auto context2 = Context();
  s = Stub(kEnroller)->Sum(context2.get(), empty, &status);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();

  v1::JobRef ref;
  ref.set_job_id("no-such-job");
  auto context3 = Context();
  s = Stub(kReader)->GetJob(context3.get(), ref, &status);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
}

}  // namespace
}  // namespace tessera
