// Trace context at the gRPC edge: a call's traceparent becomes the handler thread's current
// trace (log lines, CallIdentity, the audit record and the span carry it), the response echoes
// it with the server's span, a malformed one starts a new trace without failing the call, and
// a channel from CreateBearerChannel sends the calling thread's trace on.
#include "services/server/trace_interceptor.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/testing/temp_files.h"
#include "common/trace_context.h"
#include "services/server/audit_log.h"
#include "services/server/auth_interceptor.h"
#include "services/server/bearer_channel.h"
#include "tessera/v1/scheduler.grpc.pb.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

constexpr char kTrace[] = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr char kClientSpan[] = "00f067aa0ba902b7";

// Get answers the trace the handler's thread works for (trace_id) and the one its CallIdentity
// records (owner), and logs a line.
class EchoTraceService : public v1::SchedulerService::Service {
 public:
  grpc::Status Get(grpc::ServerContext* context, const v1::JobRef* request, v1::JobInfo* response) override {
    response->set_job_id(request->job_id());
    response->set_trace_id(CurrentTraceId());
    response->set_owner(CallerIdentity(context).trace_id);
    TESSERA_LOG(INFO) << "handled " << request->job_id();
    return grpc::Status::OK;
  }
};

class TraceInterceptorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    audit_path_ =
        testing::FreshTestDir(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "/audit.jsonl";
    auto audit = AuditLog::Open(audit_path_);
    ASSERT_TRUE(audit.ok()) << audit.status();
    InstallAuthGate(&service_);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
    // The order ServiceHost uses: auth/audit first, trace last.
    interceptors.push_back(
        std::make_unique<AuthAuditInterceptorFactory>(nullptr, std::shared_ptr<AuditLog>(std::move(*audit))));
    interceptors.push_back(std::make_unique<TraceInterceptorFactory>([this](ServerSpan span) {
      std::lock_guard<std::mutex> lock(mu_);
      spans_.push_back(std::move(span));
    }));
    builder.experimental().SetInterceptorCreators(std::move(interceptors));
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::SchedulerService::NewStub(CreateBearerChannel(absl::StrCat("127.0.0.1:", port_),
                                                               grpc::InsecureChannelCredentials(),
                                                               grpc::ChannelArguments(), "token-not-checked"));
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  std::vector<ServerSpan> Spans() {
    std::lock_guard<std::mutex> lock(mu_);
    return spans_;
  }

  std::string audit_path_;
  int port_ = 0;
  EchoTraceService service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::SchedulerService::Stub> stub_;
  std::mutex mu_;
  std::vector<ServerSpan> spans_;
};

TEST_F(TraceInterceptorTest, ClientTraceparentReachesHandlerLogsAuditAndSpan) {
  grpc::ClientContext context;
  context.AddMetadata("traceparent", absl::StrCat("00-", kTrace, "-", kClientSpan, "-01"));
  v1::JobRef request;
  request.set_job_id("job-7");
  v1::JobInfo response;
  ::testing::internal::CaptureStderr();
  const grpc::Status status = stub_->Get(&context, request, &response);
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.trace_id(), kTrace);
  EXPECT_EQ(response.owner(), kTrace);
  EXPECT_THAT(log, HasSubstr(absl::StrCat("trace_id=", kTrace, " handled job-7")));

  // The response names the server's own span in the same trace.
  auto echoed = context.GetServerInitialMetadata().find("traceparent");
  ASSERT_NE(echoed, context.GetServerInitialMetadata().end());
  std::optional<TraceContext> server = ParseTraceparent(std::string(echoed->second.data(), echoed->second.size()));
  ASSERT_TRUE(server.has_value());
  EXPECT_EQ(server->trace_id, kTrace);
  EXPECT_NE(server->span_id, kClientSpan);

  auto records = ReadAuditLog(audit_path_);
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 1u);
  EXPECT_EQ((*records)[0].trace_id, kTrace);
  auto verified = VerifyAuditLog(audit_path_);
  ASSERT_TRUE(verified.ok());
  EXPECT_TRUE(verified->ok) << verified->reason;

  const std::vector<ServerSpan> spans = Spans();
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0].name, "/tessera.v1.SchedulerService/Get");
  EXPECT_EQ(spans[0].trace_id, kTrace);
  EXPECT_EQ(spans[0].span_id, server->span_id);
  EXPECT_EQ(spans[0].parent_span_id, kClientSpan);
  EXPECT_EQ(spans[0].job_id, "job-7");
  EXPECT_EQ(spans[0].status_code, 0);
  EXPECT_LE(spans[0].start_unix_nanos, spans[0].end_unix_nanos);
}

TEST_F(TraceInterceptorTest, MalformedTraceparentStartsANewTraceAndTheCallSucceeds) {
  for (const char* bad : {"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
                          "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "garbage"}) {
    grpc::ClientContext context;
    context.AddMetadata("traceparent", bad);
    v1::JobInfo response;
    const grpc::Status status = stub_->Get(&context, v1::JobRef(), &response);
    ASSERT_TRUE(status.ok()) << bad << ": " << status.error_message();
    EXPECT_TRUE(IsValidTraceId(response.trace_id())) << bad << " -> " << response.trace_id();
    EXPECT_NE(response.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
    EXPECT_EQ(Spans().back().parent_span_id, "") << bad;
  }
}

TEST_F(TraceInterceptorTest, BearerChannelSendsTheCallingThreadsTrace) {
  const TraceContext mine = ContinueTrace(kTrace);
  v1::JobInfo first, second;
  {
    ScopedTraceContext scope(mine);
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->Get(&context, v1::JobRef(), &first).ok());
  }
  EXPECT_EQ(first.trace_id(), kTrace);
  EXPECT_EQ(Spans().back().parent_span_id.size(), 16u);
  EXPECT_NE(Spans().back().parent_span_id, mine.span_id);  // a new span for the hop
  grpc::ClientContext context;  // no current trace: each call starts one
  ASSERT_TRUE(stub_->Get(&context, v1::JobRef(), &second).ok());
  EXPECT_TRUE(IsValidTraceId(second.trace_id()));
  EXPECT_NE(second.trace_id(), kTrace);
}

}  // namespace
}  // namespace tessera
