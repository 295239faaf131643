// Bearer tokens, roles and the audit trail at the gRPC edge: token file parsing; every method of
// every hosted service is in the role table; over a real server with a token file and an audit
// log, no / wrong / expired token and a missing role get the right status and an audit record,
// refused calls never reach the handler, health stays open, and audited searches carry the
// candidate ids and scores; a non-loopback host is refused without TLS and tokens.
#include "services/server/auth.h"

#include <unistd.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "services/fingerprint/fingerprint_service.h"
#include "services/server/audit_log.h"
#include "services/server/auth_interceptor.h"
#include "services/server/bearer_channel.h"
#include "services/server/service_host.h"
#include "services/volume/volume_service.h"
#include "tessera/v1/access.pb.h"
#include "tessera/v1/fingerprint.grpc.pb.h"
#include "tessera/v1/operator.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tessera/v1/reconstruction.grpc.pb.h"
#include "tessera/v1/registration.grpc.pb.h"
#include "tessera/v1/rendezvous.grpc.pb.h"
#include "tessera/v1/scheduler.grpc.pb.h"
#include "tessera/v1/som.grpc.pb.h"
#include "tessera/v1/volume.grpc.pb.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string TmpDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name, "_", getpid());
  if (std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str()) != 0) ADD_FAILURE() << dir;
  return dir;
}

constexpr char kReader[] = "reader-token-0123456789abcdef";
constexpr char kEnroller[] = "enroller-token-0123456789abcdef";
constexpr char kAdmin[] = "admin-token-0123456789abcdef";
constexpr char kExpired[] = "expired-token-0123456789abcdef";

std::string TokenFileText() {
  return absl::StrCat("# token principal roles [expires=]\n", kReader, " rita reader\n", kEnroller,
                      "   eddie reader,enroller   # a comment\n\n", kAdmin, " ada admin expires=2999-01-01T00:00:00Z\n",
                      kExpired, " old enroller expires=2001-01-01T00:00:00Z\n");
}

TEST(TokenStoreTest, ParsesLooksUpAndExpires) {
  auto store = TokenStore::Parse(TokenFileText());
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->size(), 4u);
  auto eddie = (*store)->Lookup(kEnroller, absl::Now());
  ASSERT_TRUE(eddie.ok());
  EXPECT_EQ(eddie->principal, "eddie");
  EXPECT_EQ(eddie->role, Role::kEnroller);
  auto old = (*store)->Lookup(kExpired, absl::Now());
  EXPECT_EQ(old.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(old.status().message()), HasSubstr("expired"));
  EXPECT_TRUE((*store)->Lookup(kExpired, absl::FromUnixSeconds(0)).ok());
  auto unknown = (*store)->Lookup("not-a-token-at-all-000", absl::Now());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(unknown.status().message()), Not(HasSubstr("not-a-token")));

  EXPECT_FALSE(TokenStore::Parse("short p reader\n").ok());
  EXPECT_FALSE(TokenStore::Parse(absl::StrCat(kReader, " p superuser\n")).ok());
  EXPECT_FALSE(TokenStore::Parse(absl::StrCat(kReader, " p reader expires=tomorrow\n")).ok());
  EXPECT_FALSE(TokenStore::Parse(absl::StrCat(kReader, "\n")).ok());
}

// Every method of every service in the API protos states its required role
// (the required_role option), and RequiredRole reads it.
TEST(RequiredRoleTest, EveryHostedMethodStatesItsRole) {
  // A message of each API file (which also links its descriptors in).
  const std::vector<const google::protobuf::FileDescriptor*> api = {
      v1::DescribeFileRequest::descriptor()->file(), v1::RegisterRequest::descriptor()->file(),
      v1::SearchRequest::descriptor()->file(), v1::AtlasRequest::descriptor()->file(),
      v1::SubmitJobRequest::descriptor()->file(), v1::ReconstructRequest::descriptor()->file(),
      v1::JoinRendezvousRequest::descriptor()->file(), v1::ListAuditRecordsRequest::descriptor()->file()};
  int service_count = 0;
  for (const auto* file : api) {
    for (int i = 0; i < file->service_count(); ++i) {
      const auto* s = file->service(i);
      ++service_count;
      for (int m = 0; m < s->method_count(); ++m) {
        const std::string full = absl::StrCat("/", s->full_name(), "/", s->method(m)->name());
        EXPECT_NE(RequiredRole(full), Role::kNone)
            << full << " has no (tessera.v1.required_role) option in " << file->name();
        EXPECT_EQ(static_cast<int>(RequiredRole(full)),
                  static_cast<int>(s->method(m)->options().GetExtension(v1::required_role)))
            << full;
      }
    }
  }
  EXPECT_EQ(service_count, 9);  // Volume, Registration, Fingerprint, SomAtlas, Scheduler, Worker, Reconstruction,
                                // Rendezvous, Operator
  EXPECT_EQ(RequiredRole("/tessera.v1.FingerprintService/NoSuchMethod"), Role::kNone);
  EXPECT_EQ(RequiredRole("/tessera.v1.NoSuchService/Search"), Role::kNone);
  EXPECT_EQ(RequiredRole("tessera.v1.FingerprintService/Search"), Role::kNone);  // no leading slash
  EXPECT_EQ(RequiredRole("/tessera.v1.FingerprintService.Search"), Role::kNone);
  EXPECT_EQ(RequiredRole("/tessera.v1.RegisterRequest/volume"), Role::kNone);    // a message, not a service
  EXPECT_EQ(RequiredRole("/tessera.v1.FingerprintService/Delete"), Role::kAdmin);
  EXPECT_EQ(RequiredRole("/tessera.v1.FingerprintService/Enroll"), Role::kEnroller);
  EXPECT_EQ(RequiredRole("/tessera.v1.FingerprintService/Search"), Role::kReader);
}

std::vector<std::string> Fingers(int fingers, int impressions) {
  std::srand(7);
  std::vector<std::string> out;
  for (int f = 0; f < fingers; ++f) {
    std::vector<std::array<int, 3>> base;
    for (int m = 0; m < 35; ++m) base.push_back({40 + std::rand() % 220, 40 + std::rand() % 300, std::rand() % 360});
    for (int i = 0; i < impressions; ++i) {
      std::string text;
      for (const auto& m : base) {
        if (std::rand() % 10 == 0) continue;
        absl::StrAppend(&text, m[0] + std::rand() % 3, " ", m[1] + std::rand() % 3, " ", m[2], " 60\n");
      }
      out.push_back(text);
    }
  }
  return out;
}

class AuthServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TmpDir("auth_server");
    std::ofstream(dir_ + "/tokens") << TokenFileText();
    ServerOptions options;
    options.grpc_port = 0;
    options.metrics_port = -1;
    options.device = "cpu";
    options.token_file = dir_ + "/tokens";
    options.audit_log = dir_ + "/audit.jsonl";
    auto fp = FingerprintServiceImpl::Create(options, FingerprintServiceOptions());
    ASSERT_TRUE(fp.ok()) << fp.status();
    fingerprint_ = std::move(*fp);
    auto volume = VolumeServiceImpl::Create(options);
    ASSERT_TRUE(volume.ok()) << volume.status();
    volume_ = std::move(*volume);
    host_ = std::make_unique<ServiceHost>(options);
    host_->AddService(fingerprint_.get());
    host_->AddService(volume_.get());
    auto ports = host_->Start();
    ASSERT_TRUE(ports.ok()) << ports.status();
    target_ = absl::StrCat("127.0.0.1:", ports->grpc_port);
  }
  void TearDown() override {
    if (host_) host_->Drain();
    host_.reset();
  }

  std::unique_ptr<v1::FingerprintService::Stub> Stub(const std::string& token) {
    return v1::FingerprintService::NewStub(
        CreateBearerChannel(target_, grpc::InsecureChannelCredentials(), grpc::ChannelArguments(), token));
  }
  std::vector<AuditRecord> Records() {
    auto r = ReadAuditLog(dir_ + "/audit.jsonl");
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : std::vector<AuditRecord>();
  }
  int64_t GallerySize(v1::FingerprintService::Stub& stub) {
    grpc::ClientContext ctx;
    v1::ListRequest req;
    v1::ListResponse resp;
    EXPECT_TRUE(stub.List(&ctx, req, &resp).ok());
    return resp.gallery_size();
  }

  std::string dir_, target_;
  std::unique_ptr<FingerprintServiceImpl> fingerprint_;
  std::unique_ptr<VolumeServiceImpl> volume_;
  std::unique_ptr<ServiceHost> host_;
};

grpc::Status Enroll(v1::FingerprintService::Stub& stub, const std::string& id, const std::string& xyt) {
  grpc::ClientContext ctx;
  v1::EnrollRequest req;
  req.set_id(id);
  req.mutable_record()->set_data(xyt);
  v1::EnrollResponse resp;
  return stub.Enroll(&ctx, req, &resp);
}

TEST_F(AuthServerTest, RefusalsHaveTheRightStatusAndAreAudited) {
  const std::vector<std::string> prints = Fingers(3, 2);
  // No token.
  grpc::Status s = Enroll(*Stub(""), "a1", prints[0]);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  // A wrong token: never echoed.
  s = Enroll(*Stub("wrong-token-0123456789abcdef"), "a1", prints[0]);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(s.error_message(), Not(HasSubstr("wrong-token")));
  // Expired.
  s = Enroll(*Stub(kExpired), "a1", prints[0]);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(s.error_message(), HasSubstr("expired"));
  // Wrong role: names the missing role.
  s = Enroll(*Stub(kReader), "a1", prints[0]);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(), HasSubstr("enroller"));
  // A refused client stream enrolls nothing.
  {
    grpc::ClientContext ctx;
    v1::EnrollStreamResponse resp;
    auto stub = Stub(kReader);
    auto writer = stub->EnrollStream(&ctx, &resp);
    v1::EnrollRequest req;
    req.set_id("streamed");
    req.mutable_record()->set_data(prints[1]);
    writer->Write(req);
    writer->WritesDone();
    s = writer->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  }
  // None of the refused calls reached the handler.
  EXPECT_EQ(GallerySize(*Stub(kReader)), 0);
  // Enroller may enroll, not delete.
  ASSERT_TRUE(Enroll(*Stub(kEnroller), "a1", prints[0]).ok());
  {
    grpc::ClientContext ctx;
    v1::DeleteRequest req;
    req.set_id("a1");
    v1::DeleteResponse resp;
    s = Stub(kEnroller)->Delete(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_THAT(s.error_message(), HasSubstr("admin"));
  }
  // Health stays open without a token.
  {
    auto health = grpc::health::v1::Health::NewStub(grpc::CreateChannel(target_, grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckRequest req;
    grpc::health::v1::HealthCheckResponse resp;
    EXPECT_TRUE(health->Check(&ctx, req, &resp).ok());
  }

  const std::vector<AuditRecord> records = Records();
  ASSERT_EQ(records.size(), 8u);
  EXPECT_EQ(records[0].outcome, "UNAUTHENTICATED");
  EXPECT_EQ(records[0].principal, "");
  EXPECT_EQ(records[0].method, "/tessera.v1.FingerprintService/Enroll");
  EXPECT_THAT(records[0].line, HasSubstr("\"request_ids\":[\"a1\"]"));
  EXPECT_THAT(records[0].line, HasSubstr("\"peer\":\"ipv4:127.0.0.1:"));
  EXPECT_EQ(records[1].outcome, "UNAUTHENTICATED");
  EXPECT_THAT(records[1].line, Not(HasSubstr("wrong-token")));
  EXPECT_EQ(records[2].outcome, "UNAUTHENTICATED");
  EXPECT_THAT(records[2].line, HasSubstr("expired"));
  EXPECT_EQ(records[2].principal, "old");  // the expired line's principal (issue 31)
  EXPECT_EQ(records[3].outcome, "PERMISSION_DENIED");
  EXPECT_EQ(records[3].principal, "rita");
  EXPECT_EQ(records[4].outcome, "PERMISSION_DENIED");
  EXPECT_EQ(records[4].method, "/tessera.v1.FingerprintService/EnrollStream");
  EXPECT_EQ(records[5].method, "/tessera.v1.FingerprintService/List");
  EXPECT_EQ(records[6].outcome, "OK");
  EXPECT_EQ(records[6].principal, "eddie");
  EXPECT_EQ(records[7].outcome, "PERMISSION_DENIED");
  EXPECT_EQ(records[7].method, "/tessera.v1.FingerprintService/Delete");
  for (const auto& r : records) EXPECT_THAT(r.method, Not(HasSubstr("grpc.health")));
  auto verified = VerifyAuditLog(dir_ + "/audit.jsonl");
  ASSERT_TRUE(verified.ok());
  EXPECT_TRUE(verified->ok) << verified->reason;
}

TEST_F(AuthServerTest, RemovingATokenFromTheFileRevokesIt) {
  EXPECT_EQ(GallerySize(*Stub(kReader)), 0);
  std::ofstream(dir_ + "/tokens", std::ios::trunc) << kEnroller << " eddie enroller\n";
  absl::SleepFor(absl::Milliseconds(1200));  // the file is checked at most once a second
  grpc::ClientContext ctx;
  v1::ListResponse resp;
  grpc::Status s = Stub(kReader)->List(&ctx, v1::ListRequest(), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(GallerySize(*Stub(kEnroller)), 0);
  const std::vector<AuditRecord> records = Records();
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[1].outcome, "UNAUTHENTICATED");
  EXPECT_EQ(records[1].method, "/tessera.v1.FingerprintService/List");
}

// Issue 31: an edit that removes a token and also adds a bad line fails
// closed: the removed token is refused within 2 s, the good lines hold, the bad
// line grants nothing; a file that cannot be read holds no token at all.
TEST_F(AuthServerTest, ABrokenEditStillRevokesRemovedTokens) {
  EXPECT_EQ(GallerySize(*Stub(kReader)), 0);
  EXPECT_EQ(GallerySize(*Stub(kEnroller)), 0);
  std::ofstream(dir_ + "/tokens", std::ios::trunc)
      << kEnroller << " eddie enroller\n"
      << "short zed reader\n";  // line 2: a token shorter than 16 characters
  absl::SleepFor(absl::Milliseconds(1200));  // the file is checked at most once a second
  grpc::ClientContext ctx;
  v1::ListResponse resp;
  const grpc::Status removed = Stub(kReader)->List(&ctx, v1::ListRequest(), &resp);
  EXPECT_EQ(removed.error_code(), grpc::StatusCode::UNAUTHENTICATED) << removed.error_message();
  EXPECT_EQ(GallerySize(*Stub(kEnroller)), 0);  // the good line holds
  grpc::ClientContext bad_ctx;
  const grpc::Status bad = Stub("short")->List(&bad_ctx, v1::ListRequest(), &resp);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // Gone: nobody.
  std::filesystem::remove(dir_ + "/tokens");
  absl::SleepFor(absl::Milliseconds(1200));
  grpc::ClientContext gone_ctx;
  const grpc::Status gone = Stub(kEnroller)->List(&gone_ctx, v1::ListRequest(), &resp);
  EXPECT_EQ(gone.error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

TEST(TokenStore, ASkippingParseKeepsGoodLinesAndNamesBadOnes) {
  std::vector<absl::Status> bad;
  std::shared_ptr<const TokenStore> store = TokenStore::ParseSkippingBadLines(
      absl::StrCat(kReader, " rita reader\nnot-enough-fields\n", kEnroller, " eddie wizard\n", kAdmin, " ada admin\n"),
      &bad);
  EXPECT_EQ(store->size(), 2u);
  ASSERT_EQ(bad.size(), 2u);
  EXPECT_THAT(bad[0].message(), HasSubstr("line 2"));
  EXPECT_THAT(bad[1].message(), HasSubstr("line 3"));
  EXPECT_TRUE(store->Lookup(kReader, absl::Now()).ok());
  EXPECT_FALSE(store->Lookup(kEnroller, absl::Now()).ok());
  // The strict parse (start-up) refuses the same text.
  EXPECT_EQ(TokenStore::Parse(absl::StrCat(kReader, " rita reader\nnot-enough-fields\n")).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(AuthServerTest, AuditedSearchCarriesCandidateIdsAndScores) {
  const std::vector<std::string> prints = Fingers(4, 2);
  auto enroller = Stub(kEnroller);
  for (int f = 0; f < 4; ++f) ASSERT_TRUE(Enroll(*enroller, absl::StrCat("finger", f), prints[2 * f]).ok());
  grpc::ClientContext ctx;
  v1::SearchRequest req;
  req.mutable_probe()->set_data(prints[3]);  // finger 1, second impression
  req.set_top_k(3);
  v1::SearchResponse resp;
  grpc::Status s = Stub(kReader)->Search(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_GT(resp.candidates_size(), 0);
  const std::vector<AuditRecord> records = Records();
  ASSERT_FALSE(records.empty());
  const AuditRecord& search = records.back();
  EXPECT_EQ(search.method, "/tessera.v1.FingerprintService/Search");
  EXPECT_EQ(search.principal, "rita");
  EXPECT_EQ(search.outcome, "OK");
  for (const auto& c : resp.candidates()) {
    EXPECT_THAT(search.line, HasSubstr(absl::StrCat("[\"", c.id(), "\",", c.score(), "]")));
  }
  // Admin deletes; the audit names the template.
  {
    grpc::ClientContext dctx;
    v1::DeleteRequest dreq;
    dreq.set_id("finger0");
    v1::DeleteResponse dresp;
    ASSERT_TRUE(Stub(kAdmin)->Delete(&dctx, dreq, &dresp).ok());
    const AuditRecord del = Records().back();
    EXPECT_EQ(del.principal, "ada");
    EXPECT_THAT(del.line, HasSubstr("\"request_ids\":[\"finger0\"]"));
  }
}

TEST(AuditDetailsTest, IdsAndCandidatesAlsoInsideJobResults) {
  v1::SearchBatchResponse batch;
  auto* c = batch.add_results()->add_candidates();
  c->set_id("t1");
  c->set_score(0.75);
  c = batch.add_results()->add_candidates();
  c->set_id("t2");
  c->set_score(0.5);
  v1::JobResult result;
  result.set_job_id("job-7");
  result.mutable_result()->PackFrom(batch);
  v1::JobRef ref;
  ref.set_job_id("job-7");
  EXPECT_EQ(AuditDetailsJson(&ref, &result),
            "{\"request_ids\":[\"job-7\"],\"response_ids\":[\"job-7\"],"
            "\"candidates\":[[[\"t1\",0.75]],[[\"t2\",0.5]]]}");
  v1::DeleteRequest del;
  del.set_id("a \"quoted\" id");
  EXPECT_EQ(AuditDetailsJson(&del, nullptr), "{\"request_ids\":[\"a \\\"quoted\\\" id\"]}");
}

TEST(SafeDefaultsTest, NonLoopbackNeedsTlsAndTokensOrInsecure) {
  ServerOptions options;
  options.host = "0.0.0.0";
  options.grpc_port = 0;
  options.metrics_port = -1;
  {
    ServiceHost host(options);
    auto ports = host.Start();
    EXPECT_EQ(ports.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(ports.status().message()), HasSubstr("--insecure"));
  }
  options.insecure = true;
  ServiceHost host(options);
  EXPECT_TRUE(host.Start().ok());
  host.Drain();
}

}  // namespace
}  // namespace tessera
