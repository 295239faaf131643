// Named galleries with per-gallery access: gallery names (bidi overrides, paths), the token
// file's galleries= grants and the right each method needs on a gallery; over a real server
// with a token file and an audit log: a principal searches the gallery it is granted and is
// refused another (PERMISSION_DENIED naming principal, right and gallery, and an audit record
// of the refusal naming the gallery), two galleries hold separate templates, an unknown
// gallery is NOT_FOUND only to a principal that may use the name, a refused stream stores
// nothing, admins create and list galleries, and a job spec's gallery is found for the check.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "kernels/fingerprint/test_templates.h"
#include "services/fingerprint/fingerprint_service.h"
#include "services/fingerprint/gallery_set.h"
#include "services/fingerprint/service_testing.h"
#include "services/server/audit_log.h"
#include "services/server/auth.h"
#include "services/server/auth_interceptor.h"
#include "services/server/bearer_channel.h"
#include "services/server/gallery_names.h"
#include "services/server/service_host.h"
#include "tessera/v1/fingerprint.grpc.pb.h"
#include "tessera/v1/scheduler.grpc.pb.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kSearchMethod[] = "/tessera.v1.FingerprintService/Search";
constexpr char kEnrollMethod[] = "/tessera.v1.FingerprintService/Enroll";

TEST(GalleryNamesTest, StrictCharsetNoPathsNoBidi) {
  EXPECT_TRUE(CheckGalleryName("default").ok());
  EXPECT_TRUE(CheckGalleryName("lab-7.north_2").ok());
  for (const char* bad : {"", ".", "..", "../etc", "a/b", "-lead", "sp ace", "caf\xC3\xA9"}) {
    EXPECT_EQ(CheckGalleryName(bad).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  const absl::Status bidi = CheckGalleryName("lab\xE2\x80\xAE" "cba");  // U+202E RIGHT-TO-LEFT OVERRIDE
  EXPECT_EQ(bidi.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bidi.message()), HasSubstr("U+202E"));
  EXPECT_FALSE(CheckGalleryName(std::string(65, 'a')).ok());
  EXPECT_EQ(GalleryOrDefault(""), "default");
}

TEST(GalleryGrantsTest, ParsesCapsAndWildcard) {
  auto g = GalleryGrants::Parse("lab,national:reader");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->RoleOn("lab", Role::kEnroller), Role::kEnroller);
  EXPECT_EQ(g->RoleOn("national", Role::kEnroller), Role::kReader);
  EXPECT_EQ(g->RoleOn("default", Role::kEnroller), Role::kNone);
  auto all = GalleryGrants::Parse("*:reader,lab");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->RoleOn("anything", Role::kAdmin), Role::kReader);
  EXPECT_EQ(all->RoleOn("lab", Role::kAdmin), Role::kAdmin);
  EXPECT_EQ(GalleryGrants::DefaultOnly().RoleOn("default", Role::kReader), Role::kReader);
  EXPECT_EQ(GalleryGrants::DefaultOnly().RoleOn("lab", Role::kAdmin), Role::kNone);
  EXPECT_FALSE(GalleryGrants::Parse("../x").ok());
  EXPECT_FALSE(GalleryGrants::Parse("lab:superuser").ok());
  EXPECT_FALSE(GalleryGrants::Parse("").ok());
  // In a token file.
  EXPECT_TRUE(TokenStore::Parse("reader-token-0123456789 rita reader galleries=a,b:reader\n").ok());
  EXPECT_TRUE(TokenStore::Parse("reader-token-0123456789 rita reader galleries=* expires=2999-01-01T00:00:00Z\n").ok());
  EXPECT_FALSE(TokenStore::Parse("reader-token-0123456789 rita reader galleries=a/b\n").ok());
  EXPECT_FALSE(TokenStore::Parse("reader-token-0123456789 rita reader galleries=a galleries=b\n").ok());
}

TEST(GalleryAccessTest, TheMessageNamesPrincipalRightAndGallery) {
  CallIdentity rita;
  rita.principal = "rita";
  rita.role = Role::kEnroller;
  rita.galleries = *GalleryGrants::Parse("a,national:reader");
  EXPECT_TRUE(CheckGalleryAccess(rita, kSearchMethod, "a").ok());
  EXPECT_TRUE(CheckGalleryAccess(rita, kEnrollMethod, "a").ok());
  EXPECT_TRUE(CheckGalleryAccess(rita, kSearchMethod, "national").ok());
  const absl::Status enroll = CheckGalleryAccess(rita, kEnrollMethod, "national");
  EXPECT_EQ(enroll.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(enroll.message()), HasSubstr("principal 'rita' may not enroll into gallery 'national'"));
  const absl::Status search = CheckGalleryAccess(rita, kSearchMethod, "b");
  EXPECT_EQ(search.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(search.message()), HasSubstr("principal 'rita' may not search gallery 'b'"));
  EXPECT_EQ(CheckGalleryAccess(rita, kSearchMethod, "").code(), absl::StatusCode::kPermissionDenied);  // default
  // A bad name is INVALID_ARGUMENT before any access decision, and never echoed raw.
  const absl::Status bidi = CheckGalleryAccess(rita, kSearchMethod, "a\xE2\x80\xAE");
  EXPECT_EQ(bidi.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bidi.message()), Not(HasSubstr("\xE2\x80\xAE")));
}

TEST(RequestGalleryTest, FoundInRequestsAndInsideJobSpecs) {
  std::string g = "unset";
  v1::SearchRequest search;
  EXPECT_TRUE(RequestGallery(search, &g));
  EXPECT_EQ(g, "");  // unset: "default"
  search.set_gallery("b");
  EXPECT_TRUE(RequestGallery(search, &g));
  EXPECT_EQ(g, "b");
  v1::SearchBatchRequest spec;
  spec.set_gallery("national");
  v1::SubmitJobRequest submit;
  submit.mutable_spec()->set_kind("fingerprint.search");
  submit.mutable_spec()->mutable_spec()->PackFrom(spec);
  EXPECT_TRUE(RequestGallery(submit, &g));
  EXPECT_EQ(g, "national");
  v1::ListGalleriesRequest none;
  EXPECT_FALSE(RequestGallery(none, &g));
}

constexpr char kAlice[] = "alice-token-0123456789abcdef";  // reader + enroller on gallery a
constexpr char kBob[] = "bob-token-0123456789abcdef";      // enroller on gallery b
constexpr char kRita[] = "rita-token-0123456789abcdef";    // reader, no galleries=: default only
constexpr char kAda[] = "ada-token-0123456789abcdef";      // admin everywhere

class GalleryServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/gallery_access_", getpid());
    ASSERT_EQ(std::system(("rm -rf '" + dir_ + "' && mkdir -p '" + dir_ + "'").c_str()), 0);
    std::ofstream(dir_ + "/tokens") << kAlice << " alice reader,enroller galleries=a\n"
                                    << kBob << " bob enroller galleries=b\n"
                                    << kRita << " rita reader\n"
                                    << kAda << " ada admin galleries=*\n";
    ServerOptions options;
    options.grpc_port = 0;
    options.metrics_port = -1;
    options.device = "cpu";
    options.token_file = dir_ + "/tokens";
    options.audit_log = dir_ + "/audit.jsonl";
    FingerprintServiceOptions fp;
    fp.galleries_root = dir_ + "/galleries";
    auto service = FingerprintServiceImpl::Create(options, fp);
    ASSERT_TRUE(service.ok()) << service.status();
    service_ = std::move(*service);
    host_ = std::make_unique<ServiceHost>(options);
    host_->AddService(service_.get());
    auto ports = host_->Start();
    ASSERT_TRUE(ports.ok()) << ports.status();
    target_ = absl::StrCat("127.0.0.1:", ports->grpc_port);
    templates_ = fingerprint::testing::SyntheticTemplates(8, 11);
  }
  void TearDown() override {
    if (host_) host_->Drain();
    host_.reset();
  }

  std::unique_ptr<v1::FingerprintService::Stub> Stub(const std::string& token) {
    return v1::FingerprintService::NewStub(
        CreateBearerChannel(target_, grpc::InsecureChannelCredentials(), grpc::ChannelArguments(), token));
  }
  grpc::Status Create(const std::string& token, const std::string& gallery) {
    grpc::ClientContext ctx;
    v1::CreateGalleryRequest req;
    req.set_gallery(gallery);
    v1::GalleryInfo resp;
    return Stub(token)->CreateGallery(&ctx, req, &resp);
  }
  grpc::Status Enroll(const std::string& token, const std::string& gallery, const std::string& id, int t) {
    grpc::ClientContext ctx;
    v1::EnrollRequest req;
    req.set_gallery(gallery);
    req.set_id(id);
    *req.mutable_record() = fingerprint::testing::XytTemplate(templates_[t]);
    v1::EnrollResponse resp;
    return Stub(token)->Enroll(&ctx, req, &resp);
  }
  grpc::Status Search(const std::string& token, const std::string& gallery, int t, v1::SearchResponse* resp) {
    grpc::ClientContext ctx;
    v1::SearchRequest req;
    req.set_gallery(gallery);
    req.set_top_k(10);
    *req.mutable_probe() = fingerprint::testing::XytTemplate(templates_[t]);
    return Stub(token)->Search(&ctx, req, resp);
  }
  std::vector<AuditRecord> Records() {
    auto r = ReadAuditLog(dir_ + "/audit.jsonl");
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : std::vector<AuditRecord>();
  }

  std::string dir_, target_;
  std::unique_ptr<FingerprintServiceImpl> service_;
  std::unique_ptr<ServiceHost> host_;
  std::vector<std::vector<fingerprint::MinutiaPoint>> templates_;
};

TEST_F(GalleryServerTest, GrantedGalleryWorksOtherIsRefusedAndAudited) {
  ASSERT_TRUE(Create(kAda, "a").ok());
  ASSERT_TRUE(Create(kAda, "b").ok());
  EXPECT_EQ(Create(kAda, "a").error_code(), grpc::StatusCode::ALREADY_EXISTS);
  // Creating is an admin right, and on a gallery the admin is granted.
  EXPECT_EQ(Create(kAlice, "c").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  ASSERT_TRUE(Enroll(kAlice, "a", "a0", 0).ok());
  ASSERT_TRUE(Enroll(kBob, "b", "b0", 0).ok());  // the same finger, in the other gallery

  v1::SearchResponse resp;
  ASSERT_TRUE(Search(kAlice, "a", 0, &resp).ok());
  ASSERT_GT(resp.candidates_size(), 0);
  EXPECT_EQ(resp.candidates(0).id(), "a0");

  resp.Clear();
  const grpc::Status refused = Search(kAlice, "b", 0, &resp);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(refused.error_message(), HasSubstr("principal 'alice' may not search gallery 'b'"));
  EXPECT_EQ(resp.candidates_size(), 0);
  EXPECT_THAT(refused.error_message(), Not(HasSubstr("b0")));  // never data
  const AuditRecord refusal = Records().back();
  EXPECT_EQ(refusal.method, kSearchMethod);
  EXPECT_EQ(refusal.principal, "alice");
  EXPECT_EQ(refusal.gallery, "b");
  EXPECT_EQ(refusal.outcome, "PERMISSION_DENIED");
  EXPECT_THAT(refusal.line, HasSubstr("may not search gallery 'b'"));

  // Enroller on b only: may not enroll into a. Reader without galleries=: the default only.
  EXPECT_EQ(Enroll(kBob, "a", "sneak", 1).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Search(kRita, "a", 0, &resp).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(Search(kRita, "", 0, &resp).ok());
  EXPECT_EQ(Records().back().gallery, "default");

  // Every record of the gallery calls names its gallery; the chain holds.
  for (const AuditRecord& r : Records()) {
    if (absl::StrContains(r.method, "/FingerprintService/") && !absl::EndsWith(r.method, "/ListGalleries")) {
      EXPECT_FALSE(r.gallery.empty()) << r.line;
    }
  }
  auto verified = VerifyAuditLog(dir_ + "/audit.jsonl");
  ASSERT_TRUE(verified.ok());
  EXPECT_TRUE(verified->ok) << verified->reason;
}

TEST_F(GalleryServerTest, GalleriesHoldSeparateTemplates) {
  ASSERT_TRUE(Create(kAda, "a").ok());
  ASSERT_TRUE(Create(kAda, "b").ok());
  for (int t = 0; t < 4; ++t) ASSERT_TRUE(Enroll(kAda, "a", absl::StrCat("a", t), t).ok());
  for (int t = 4; t < 8; ++t) ASSERT_TRUE(Enroll(kAda, "b", absl::StrCat("b", t), t).ok());
  ASSERT_TRUE(Enroll(kAda, "b", "b-of-0", 0).ok());
  for (int t = 0; t < 8; ++t) {
    for (const char* g : {"a", "b"}) {
      v1::SearchResponse resp;
      ASSERT_TRUE(Search(kAda, g, t, &resp).ok());
      for (const auto& c : resp.candidates()) EXPECT_EQ(c.id().substr(0, 1), g) << "probe " << t;
    }
  }
  // The search of b with a's template 0 finds b's copy of it first.
  v1::SearchResponse resp;
  ASSERT_TRUE(Search(kAda, "b", 0, &resp).ok());
  ASSERT_GT(resp.candidates_size(), 0);
  EXPECT_EQ(resp.candidates(0).id(), "b-of-0");
  // Listing: by name, with sizes; the default is always there.
  grpc::ClientContext ctx;
  v1::ListGalleriesResponse list;
  ASSERT_TRUE(Stub(kAda)->ListGalleries(&ctx, v1::ListGalleriesRequest(), &list).ok());
  ASSERT_EQ(list.galleries_size(), 3);
  EXPECT_EQ(list.galleries(0).gallery(), "a");
  EXPECT_EQ(list.galleries(0).size(), 4);
  EXPECT_EQ(list.galleries(1).gallery(), "b");
  EXPECT_EQ(list.galleries(1).size(), 5);
  EXPECT_EQ(list.galleries(2).gallery(), "default");
  grpc::ClientContext denied;
  EXPECT_EQ(Stub(kRita)->ListGalleries(&denied, v1::ListGalleriesRequest(), &list).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(GalleryServerTest, UnknownAndMalformedGalleries) {
  v1::SearchResponse resp;
  // Unknown: NOT_FOUND to who may use the name; to others the refusal (nothing learned).
  grpc::Status s = Search(kAda, "nope", 0, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("no gallery 'nope'"));
  EXPECT_EQ(Search(kAlice, "nope", 0, &resp).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // Malformed: INVALID_ARGUMENT for everyone, the text never echoed raw, nothing created.
  for (const char* token : {kAda, kAlice}) {
    s = Search(token, "a\xE2\x80\xAE" "bc", 0, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(), HasSubstr("U+202E"));
    EXPECT_THAT(s.error_message(), Not(HasSubstr("\xE2\x80\xAE")));
    EXPECT_EQ(Search(token, "../default", 0, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  EXPECT_EQ(Create(kAda, "../escape").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(access((dir_ + "/escape").c_str(), F_OK), -1);
  EXPECT_EQ(Records().back().gallery, "'../escape'");
}

TEST_F(GalleryServerTest, ARefusedStreamStoresNothing) {
  ASSERT_TRUE(Create(kAda, "b").ok());
  {
    grpc::ClientContext ctx;
    v1::EnrollStreamResponse resp;
    auto stub = Stub(kAlice);
    auto writer = stub->EnrollStream(&ctx, &resp);
    for (int t = 0; t < 3; ++t) {
      v1::EnrollRequest req;
      req.set_gallery("b");
      req.set_id(absl::StrCat("s", t));
      *req.mutable_record() = fingerprint::testing::XytTemplate(templates_[t]);
      writer->Write(req);
    }
    writer->WritesDone();
    const grpc::Status s = writer->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_THAT(s.error_message(), HasSubstr("may not enroll into gallery 'b'"));
  }
  EXPECT_EQ(Records().back().gallery, "b");
  auto b = service_->galleries().Get("b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->gallery->size(), 0);
  // A granted stream: items naming another gallery than the first are per-item errors.
  ASSERT_TRUE(Create(kAda, "a").ok());
  grpc::ClientContext ctx;
  v1::EnrollStreamResponse resp;
  auto stub = Stub(kAlice);
  auto writer = stub->EnrollStream(&ctx, &resp);
  for (int t = 0; t < 3; ++t) {
    v1::EnrollRequest req;
    req.set_gallery(t == 1 ? "b" : "a");
    req.set_id(absl::StrCat("s", t));
    *req.mutable_record() = fingerprint::testing::XytTemplate(templates_[t]);
    writer->Write(req);
  }
  writer->WritesDone();
  ASSERT_TRUE(writer->Finish().ok());
  EXPECT_EQ(resp.enrolled(), 2);
  ASSERT_EQ(resp.errors_size(), 1);
  EXPECT_EQ(resp.errors(0).index(), 1);
  EXPECT_THAT(resp.errors(0).message(), HasSubstr("stream's gallery 'a'"));
  EXPECT_EQ((*b)->gallery->size(), 0);
}

}  // namespace
}  // namespace tessera
