// Issue 35, the must-hold case: one fingerprint search through the shard router (a `--role
// scheduler` process fronting two `--fp-shard` processes) with a client-supplied traceparent
// shows that single trace id in the scheduler's and both shards' log lines (each call's DEBUG
// line) and in their audit records, and the answer echoes the trace. The router exports its
// spans (serve --otlp-endpoint) to a collector here: the search's span is among them.
#include <signal.h>

#include <gmock/gmock.h>
#include <grpcpp/create_channel.h>
#include <gtest/gtest.h>

#include <httplib.h>

#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "services/server/audit_log.h"
#include "tessera/v1/fingerprint.grpc.pb.h"
#include "tests/process_testing.h"

namespace tessera::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kTrace[] = "0af7651916cd43dd8448eb211c80319c";
constexpr char kTraceparent[] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The lines of `text` holding `needle`.
std::vector<std::string> LinesWith(const std::string& text, const std::string& needle) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string line; std::getline(ss, line);) {
    if (absl::StrContains(line, needle)) out.push_back(line);
  }
  return out;
}

TEST(TraceProcessTest, OneSearchThroughTheShardRouterKeepsOneTraceId) {
  const std::string dir = TempDir() + "/trace";
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  setenv("TESSERA_LOG_LEVEL", "DEBUG", 1);  // the children's per-call lines
  std::vector<std::unique_ptr<Child>> shards;
  std::vector<std::string> shard_addresses;
  for (int s = 0; s < 2; ++s) {
    shards.push_back(std::make_unique<Child>(
        std::vector<std::string>{"serve", "--role=worker", "--grpc-port=0", "--metrics-port=-1",
                                 "--services=fingerprint", "--data-root=" + dir,
                                 absl::StrCat("--state-dir=", dir, "/state", s),
                                 absl::StrCat("--gallery-dir=", dir, "/gallery", s),
                                 absl::StrCat("--audit-log=", dir, "/shard", s, "_audit.jsonl")},
        absl::StrCat("shard", s, ".txt")));
    shard_addresses.push_back(absl::StrCat("127.0.0.1:", PortFrom(shards.back()->ReadLine(), "grpc_port")));
    shards.back()->ReadLine();
  }
  // An OTLP/HTTP collector for the router's spans.
  std::mutex collected_mu;
  std::vector<nlohmann::json> collected;
  httplib::Server collector;
  collector.Post("/v1/traces", [&](const httplib::Request& req, httplib::Response&) {
    const nlohmann::json doc = nlohmann::json::parse(req.body);
    std::lock_guard<std::mutex> lock(collected_mu);
    for (const auto& span : doc["resourceSpans"][0]["scopeSpans"][0]["spans"]) collected.push_back(span);
  });
  const int collector_port = collector.bind_to_any_port("127.0.0.1");
  std::thread collector_thread([&] { collector.listen_after_bind(); });

  Child router({"serve", "--role=scheduler", "--grpc-port=0", "--metrics-port=-1", "--data-root=" + dir,
                absl::StrCat("--otlp-endpoint=http://127.0.0.1:", collector_port, "/v1/traces"),
                "--state-dir=" + dir + "/router", "--worker=" + shard_addresses[0], "--fp-shard=" + shard_addresses[0],
                "--fp-shard=" + shard_addresses[1], "--audit-log=" + dir + "/router_audit.jsonl"},
               "router.txt");
  const int port = PortFrom(router.ReadLine(), "grpc_port");
  router.ReadLine();
  auto stub = v1::FingerprintService::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));

  // Enough prints that both shards hold some (ids are hashed to shards), each in its own trace.
  for (int f = 0; f < 8; ++f) {
    grpc::ClientContext ctx;
    v1::EnrollRequest req;
    req.set_id(absl::StrCat("finger", f));
    req.mutable_record()->set_data(SyntheticXyt(f, 0));
    v1::EnrollResponse resp;
    const grpc::Status enrolled = stub->Enroll(&ctx, req, &resp);
    ASSERT_TRUE(enrolled.ok()) << enrolled.error_message();
  }

  grpc::ClientContext ctx;
  ctx.AddMetadata("traceparent", kTraceparent);
  v1::SearchRequest req;
  req.mutable_probe()->set_data(SyntheticXyt(3, 1));
  req.set_top_k(3);
  v1::SearchResponse resp;
  const grpc::Status searched = stub->Search(&ctx, req, &resp);
  ASSERT_TRUE(searched.ok()) << searched.error_message();
  ASSERT_GT(resp.candidates_size(), 0);
  EXPECT_EQ(resp.candidates(0).id(), "finger3");
  auto echoed = ctx.GetServerInitialMetadata().find("traceparent");
  ASSERT_NE(echoed, ctx.GetServerInitialMetadata().end());
  EXPECT_THAT(std::string(echoed->second.data(), echoed->second.size()), HasSubstr(kTrace));

  // Stop all three so their logs and audit trails are complete.
  for (Child* c : {&router, shards[0].get(), shards[1].get()}) {
    kill(c->pid(), SIGTERM);
    EXPECT_EQ(c->WaitExit(std::chrono::seconds(30)), 0);
  }

  collector.stop();
  collector_thread.join();
  int search_spans = 0;
  for (const nlohmann::json& span : collected) {
    if (span["traceId"] != kTrace) continue;
    ++search_spans;
    EXPECT_EQ(span["name"], "/tessera.v1.FingerprintService/Search");
    EXPECT_EQ(span["parentSpanId"], "b7ad6b7169203331");  // the client's span
  }
  EXPECT_EQ(search_spans, 1);
  EXPECT_GE(collected.size(), 9u);  // the enrollments' too

  const std::string trace = absl::StrCat("trace_id=", kTrace);
  const std::string router_log = ReadFile(TempDir() + "/router.txt");
  EXPECT_THAT(LinesWith(router_log, trace),
              ::testing::Contains(HasSubstr("call /tessera.v1.FingerprintService/Search OK")))
      << router_log;
  for (int s = 0; s < 2; ++s) {
    const std::string log = ReadFile(TempDir() + absl::StrCat("/shard", s, ".txt"));
    EXPECT_THAT(LinesWith(log, trace), ::testing::Contains(HasSubstr("/tessera.v1.FingerprintService/")))
        << "shard " << s << ":\n" << log;
  }
  // Only the search's calls carry it: the enrollments each had their own trace.
  EXPECT_THAT(LinesWith(router_log, trace), ::testing::Not(::testing::Contains(HasSubstr("/Enroll"))));

  for (const std::string& name : {std::string("router"), std::string("shard0"), std::string("shard1")}) {
    const std::string audit = absl::StrCat(dir, "/", name, "_audit.jsonl");
    absl::StatusOr<std::vector<AuditRecord>> records = ReadAuditLog(audit);
    ASSERT_TRUE(records.ok()) << records.status();
    int traced = 0;
    for (const AuditRecord& r : *records) {
      EXPECT_FALSE(r.trace_id.empty()) << name << ": " << r.line;  // every call has a trace
      if (r.trace_id == kTrace) {
        ++traced;
        EXPECT_THAT(r.method, HasSubstr("/tessera.v1.FingerprintService/")) << r.line;
      }
    }
    EXPECT_GE(traced, 1) << name;
    absl::StatusOr<AuditVerifyResult> verified = VerifyAuditLog(audit);
    ASSERT_TRUE(verified.ok()) << verified.status();
    EXPECT_TRUE(verified->ok) << name << ": " << verified->reason;
  }
  // `tessera audit show --trace-id` finds the search's record in the router's trail.
  Child show({"audit", "show", "--log", dir + "/router_audit.jsonl", "--trace-id", kTrace}, "show.txt");
  const std::string shown = show.ReadAll();
  EXPECT_EQ(show.WaitExit(std::chrono::seconds(30)), 0);
  EXPECT_EQ(LinesWith(shown, "\"seq\"").size(), 1u) << shown;
  EXPECT_THAT(shown, HasSubstr("/tessera.v1.FingerprintService/Search"));
}

}  // namespace
}  // namespace tessera::testing
