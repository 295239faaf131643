// OperatorService (issue 35) on a host with a token file and an audit log, as
// `tessera serve` runs it: an admin lists the newest audit records (the
// refused call of a reader among them), filtered by principal, trace and
// sequence; a reader is refused ListAuditRecords by its role option but reads
// the server's stats, which include the in-flight and queue metrics; a server
// without an audit log answers FAILED_PRECONDITION.
#include "services/operator/operator_service.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/metrics.h"
#include "services/scheduler/testing/in_process_scheduler.h"
#include "services/scheduler/testing/service_testing.h"
#include "services/server/bearer_channel.h"
#include "services/server/service_host.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr char kRita[] = "rita-token-0123456789abcdef";  // reader
constexpr char kAda[] = "ada-token-0123456789abcdef";    // admin
constexpr char kTrace[] = "4bf92f3577b34da6a3ce929d0e0e4736";

class OperatorServiceTest : public ::testing::Test {
 protected:
  void Start(bool with_audit_log) {
    dir_ = scheduler::testing::TmpDir() + "/" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ + "/tokens") << kRita << " rita reader\n" << kAda << " ada admin\n";
    ServerOptions options = scheduler::testing::LoopbackServerOptions();
    options.token_file = dir_ + "/tokens";
    if (with_audit_log) options.audit_log = dir_ + "/audit.jsonl";
    // A scheduler in the process: its queue gauges are in the registry.
    auto jobs = scheduler::testing::InProcessScheduler::Start(dir_ + "/state", {});
    ASSERT_TRUE(jobs.ok()) << jobs.status();
    jobs_ = *std::move(jobs);
    service_ = std::make_unique<OperatorServiceImpl>(options.audit_log, ProcessRegistry());
    host_ = std::make_unique<ServiceHost>(options);
    host_->AddService(service_.get());
    absl::StatusOr<BoundPorts> ports = host_->Start();
    ASSERT_TRUE(ports.ok()) << ports.status();
    target_ = absl::StrCat("127.0.0.1:", ports->grpc_port);
  }
  void TearDown() override {
    host_.reset();
    service_.reset();
    jobs_.reset();
  }

  std::unique_ptr<v1::OperatorService::Stub> Stub(const std::string& token) {
    return v1::OperatorService::NewStub(
        CreateBearerChannel(target_, grpc::InsecureChannelCredentials(), grpc::ChannelArguments(), token));
  }
  grpc::Status List(const std::string& token, const v1::ListAuditRecordsRequest& request,
                    v1::ListAuditRecordsResponse* response) {
    grpc::ClientContext context;
    return Stub(token)->ListAuditRecords(&context, request, response);
  }
  grpc::Status Stats(const std::string& token, v1::ServerStats* stats, const std::string& traceparent = "") {
    grpc::ClientContext context;
    if (!traceparent.empty()) context.AddMetadata("traceparent", traceparent);
    return Stub(token)->GetServerStats(&context, v1::GetServerStatsRequest(), stats);
  }

  std::string dir_, target_;
  std::unique_ptr<scheduler::testing::InProcessScheduler> jobs_;
  std::unique_ptr<OperatorServiceImpl> service_;
  std::unique_ptr<ServiceHost> host_;
};

TEST_F(OperatorServiceTest, AnAdminListsTheNewestRecordsFiltered) {
  Start(true);
  v1::ServerStats stats;
  ASSERT_TRUE(Stats(kRita, &stats).ok());
  ASSERT_TRUE(Stats(kRita, &stats, absl::StrCat("00-", kTrace, "-00f067aa0ba902b7-01")).ok());
  v1::ListAuditRecordsResponse refused;
  const grpc::Status denied = List(kRita, v1::ListAuditRecordsRequest(), &refused);
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);

  v1::ListAuditRecordsResponse all;
  ASSERT_TRUE(List(kAda, v1::ListAuditRecordsRequest(), &all).ok());
  ASSERT_GE(all.records_size(), 3);
  // Newest first: rita's refused listing, then her two stats calls.
  EXPECT_EQ(all.records(0).principal(), "rita");
  EXPECT_EQ(all.records(0).method(), "/tessera.v1.OperatorService/ListAuditRecords");
  EXPECT_EQ(all.records(0).outcome(), "PERMISSION_DENIED");
  EXPECT_EQ(all.records(1).method(), "/tessera.v1.OperatorService/GetServerStats");
  EXPECT_EQ(all.records(1).outcome(), "OK");
  for (int i = 1; i < all.records_size(); ++i) EXPECT_LT(all.records(i).seq(), all.records(i - 1).seq());
  EXPECT_EQ(all.records(0).hash().size(), 64u);
  EXPECT_THAT(all.records(0).details_json(), ::testing::StartsWith("{"));
  EXPECT_FALSE(all.records(0).peer().empty());

  v1::ListAuditRecordsRequest request;
  request.set_limit(1);
  v1::ListAuditRecordsResponse page;
  ASSERT_TRUE(List(kAda, request, &page).ok());
  ASSERT_EQ(page.records_size(), 1);
  // ada's own first listing is now the newest.
  EXPECT_EQ(page.records(0).principal(), "ada");
  // The next page: before that record.
  request.set_limit(2);
  request.set_before_seq(page.records(0).seq());
  ASSERT_TRUE(List(kAda, request, &page).ok());
  ASSERT_EQ(page.records_size(), 2);
  EXPECT_EQ(page.records(0).seq(), all.records(0).seq());

  request = v1::ListAuditRecordsRequest();
  request.set_principal("rita");
  ASSERT_TRUE(List(kAda, request, &page).ok());
  EXPECT_EQ(page.records_size(), 3);
  for (const v1::AuditRecordInfo& r : page.records()) EXPECT_EQ(r.principal(), "rita");
  request.set_principal("nobody");
  ASSERT_TRUE(List(kAda, request, &page).ok());
  EXPECT_EQ(page.records_size(), 0);

  // The trace filter (records carry the call's trace id where the server
  // records them).
  request = v1::ListAuditRecordsRequest();
  request.set_trace_id(kTrace);
  ASSERT_TRUE(List(kAda, request, &page).ok());
  for (const v1::AuditRecordInfo& r : page.records()) EXPECT_EQ(r.trace_id(), kTrace);
  if (!all.records(1).trace_id().empty()) {
    ASSERT_EQ(page.records_size(), 1);
    EXPECT_EQ(page.records(0).seq(), all.records(1).seq());
  }

  request = v1::ListAuditRecordsRequest();
  request.set_limit(1001);
  EXPECT_EQ(List(kAda, request, &page).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  request.set_limit(0);
  request.set_before_seq(-1);
  EXPECT_EQ(List(kAda, request, &page).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(OperatorServiceTest, StatsHoldTheQueueAndInFlightMetrics) {
  Start(true);
  v1::ServerStats stats;
  ASSERT_TRUE(Stats(kRita, &stats).ok());
  const auto has = [&](const std::string& name) {
    for (const v1::MetricSample& s : stats.samples()) {
      if (s.name() == name) return true;
    }
    return false;
  };
  // The scheduler sets its queue gauges on its first heartbeat.
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(Stats(kRita, &stats).ok());
    if (has("tessera_scheduler_jobs")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_GT(stats.unix_ms(), 0);
  bool in_flight = false, queued = false, handled_count = false;
  for (const v1::MetricSample& s : stats.samples()) {
    EXPECT_EQ(s.name().rfind("tessera_", 0), 0u) << s.name();
    if (s.name() == "tessera_grpc_server_in_flight" && s.labels().count("grpc_method") &&
        s.labels().at("grpc_method") == "GetServerStats") {
      in_flight = true;
      EXPECT_EQ(s.value(), 1);  // this very call
    }
    if (s.name() == "tessera_scheduler_jobs" && s.labels().count("state")) queued = true;
    if (s.name() == "tessera_grpc_server_handling_seconds_count" && s.labels().count("grpc_method") &&
        s.labels().at("grpc_method") == "GetServerStats") {
      handled_count = s.value() >= 1;
    }
  }
  EXPECT_TRUE(in_flight);
  EXPECT_TRUE(queued);
  EXPECT_TRUE(handled_count);
}

TEST_F(OperatorServiceTest, WithoutAnAuditLogListingIsAFailedPrecondition) {
  Start(false);
  v1::ListAuditRecordsResponse page;
  const grpc::Status s = List(kAda, v1::ListAuditRecordsRequest(), &page);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("--audit-log"));
}

}  // namespace
}  // namespace tessera
