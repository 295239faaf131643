// Mutual-TLS client certificates as the principal source, with real certificates made by the
// openssl CLI: a call with a verified certificate and no bearer token gets the principal of the
// token file's cert:CN= / cert:SAN= line (roles and galleries as for tokens); a certificate no
// line maps is UNAUTHENTICATED; a certificate mapped to reader is refused an enroll; a bearer
// token sent along wins; the audit trail names the certificate's principal. Without client
// certificate verification the cert: lines are not used.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "kernels/fingerprint/test_templates.h"
#include "services/fingerprint/fingerprint_service.h"
#include "services/fingerprint/service_testing.h"
#include "services/server/audit_log.h"
#include "services/server/auth.h"
#include "services/server/bearer_channel.h"
#include "services/server/service_host.h"
#include "tessera/v1/fingerprint.grpc.pb.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

constexpr char kAdminToken[] = "admin-token-0123456789abcdef";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(CertificateLinesTest, ParseAndLookUp) {
  auto store = TokenStore::Parse(
      "cert:CN=lab-portal portal reader galleries=*\n"
      "cert:SAN=svc.lab.example ingest enroller galleries=lab\n"
      "cert:CN=old-box old reader expires=2001-01-01T00:00:00Z\n");
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->certificate_lines(), 3u);
  auto portal = (*store)->LookupCertificate({"lab-portal"}, {}, absl::Now());
  ASSERT_TRUE(portal.ok());
  EXPECT_EQ(portal->principal, "portal");
  EXPECT_EQ(portal->role, Role::kReader);
  EXPECT_EQ(portal->source, "certificate");
  auto ingest = (*store)->LookupCertificate({"whatever"}, {"other.example", "svc.lab.example"}, absl::Now());
  ASSERT_TRUE(ingest.ok());
  EXPECT_EQ(ingest->principal, "ingest");
  EXPECT_EQ(ingest->galleries.RoleOn("lab", ingest->role), Role::kEnroller);
  // A CN is not a SAN: the SAN line does not match a CN of the same text.
  EXPECT_EQ((*store)->LookupCertificate({"svc.lab.example"}, {}, absl::Now()).status().code(),
            absl::StatusCode::kUnauthenticated);
  auto old = (*store)->LookupCertificate({"old-box"}, {}, absl::Now());
  EXPECT_EQ(old.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(old.status().message()), HasSubstr("expired"));
  EXPECT_FALSE(TokenStore::Parse("cert:OU=lab p reader\n").ok());
  EXPECT_FALSE(TokenStore::Parse("cert:CN= p reader\n").ok());
}

class CertPrincipalTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = new std::string(absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/cert_principal_", getpid()));
    // One CA; a server certificate; clients: CN=lab-portal, CN=ingest-7 with SAN svc.lab.example,
    // and CN=stranger (signed by the same CA, but mapped by no line).
    const std::string client = [] {
      std::string out;
      for (const auto& [name, san] : std::vector<std::pair<std::string, std::string>>{
               {"lab-portal", ""}, {"ingest-7", "subjectAltName=DNS:svc.lab.example\\n"}, {"stranger", ""}}) {
        absl::StrAppend(&out, "openssl req $K -keyout ", name, ".key -out ", name, ".csr -subj '/CN=", name, "';",
                        "printf 'basicConstraints=CA:FALSE\\nextendedKeyUsage=clientAuth\\n", san, "' > ", name,
                        ".ext;", "openssl x509 -req -in ", name, ".csr -CA ca.pem -CAkey ca.key -CAcreateserial -out ",
                        name, ".pem -days 2 -extfile ", name, ".ext;");
      }
      return out;
    }();
    const std::string script = absl::StrCat(
        "set -e; rm -rf '", *dir_, "'; mkdir -p '", *dir_, "'; cd '", *dir_, "';",
        "K='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes';",
        "openssl req -x509 $K -keyout ca.key -out ca.pem -days 2 -subj '/CN=Tessera Test CA';",
        "openssl req $K -keyout server.key -out server.csr -subj '/CN=localhost';",
        "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\nbasicConstraints=CA:FALSE\\n"
        "extendedKeyUsage=serverAuth\\n' > server.ext;",
        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 "
        "-extfile server.ext;",
        client);
    openssl_ok_ = std::system(absl::StrCat("(", script, ") > '", *dir_, ".log' 2>&1").c_str()) == 0;
  }

  void SetUp() override {
    if (!openssl_ok_) {
      if (std::system("command -v openssl > /dev/null") != 0) GTEST_SKIP() << "no openssl CLI";
      FAIL() << "openssl failed: " << ReadFile(*dir_ + ".log");
    }
    std::ofstream(Path("tokens")) << "cert:CN=lab-portal portal reader galleries=*\n"
                                  << "cert:SAN=svc.lab.example ingest enroller\n"
                                  << kAdminToken << " ada admin galleries=*\n";
    std::remove(Path("audit.jsonl").c_str());
  }

  void TearDown() override {
    if (host_) host_->Drain();
    host_.reset();
  }

  void StartServer(bool mutual) {
    ServerOptions options;
    options.grpc_port = 0;
    options.metrics_port = -1;
    options.device = "cpu";
    options.tls_cert = Path("server.pem");
    options.tls_key = Path("server.key");
    if (mutual) options.tls_client_ca = Path("ca.pem");
    options.token_file = Path("tokens");
    options.audit_log = Path("audit.jsonl");
    auto service = FingerprintServiceImpl::Create(options, FingerprintServiceOptions());
    ASSERT_TRUE(service.ok()) << service.status();
    service_ = std::move(*service);
    host_ = std::make_unique<ServiceHost>(options);
    host_->AddService(service_.get());
    auto ports = host_->Start();
    ASSERT_TRUE(ports.ok()) << ports.status();
    target_ = absl::StrCat("127.0.0.1:", ports->grpc_port);
  }

  static std::string Path(const std::string& name) { return *dir_ + "/" + name; }

  // A stub presenting `client`'s certificate ("" for none) and `token` ("" for none).
  std::unique_ptr<v1::FingerprintService::Stub> Stub(const std::string& client, const std::string& token = "") {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ReadFile(Path("ca.pem"));
    if (!client.empty()) {
      ssl.pem_cert_chain = ReadFile(Path(client + ".pem"));
      ssl.pem_private_key = ReadFile(Path(client + ".key"));
    }
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride("localhost");
    return v1::FingerprintService::NewStub(CreateBearerChannel(target_, grpc::SslCredentials(ssl), args, token));
  }

  static grpc::Status List(v1::FingerprintService::Stub& stub) {
    grpc::ClientContext ctx;
    v1::ListResponse resp;
    return stub.List(&ctx, v1::ListRequest(), &resp);
  }
  static grpc::Status Enroll(v1::FingerprintService::Stub& stub, const std::string& id) {
    grpc::ClientContext ctx;
    v1::EnrollRequest req;
    req.set_id(id);
    *req.mutable_record() = fingerprint::testing::XytTemplate(fingerprint::testing::SyntheticTemplates(1, 5)[0]);
    v1::EnrollResponse resp;
    return stub.Enroll(&ctx, req, &resp);
  }
  std::vector<AuditRecord> Records() {
    auto r = ReadAuditLog(Path("audit.jsonl"));
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : std::vector<AuditRecord>();
  }

  static std::string* dir_;
  static bool openssl_ok_;
  std::string target_;
  std::unique_ptr<FingerprintServiceImpl> service_;
  std::unique_ptr<ServiceHost> host_;
};

std::string* CertPrincipalTest::dir_ = nullptr;
bool CertPrincipalTest::openssl_ok_ = false;

TEST_F(CertPrincipalTest, VerifiedCertificateNamesThePrincipal) {
  StartServer(/*mutual=*/true);
  // Mapped by CN to reader: may list, may not enroll.
  auto portal = Stub("lab-portal");
  EXPECT_TRUE(List(*portal).ok());
  EXPECT_EQ(Records().back().principal, "portal");
  const grpc::Status enroll = Enroll(*portal, "x1");
  EXPECT_EQ(enroll.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(enroll.error_message(), HasSubstr("requires role 'enroller'; principal 'portal' has 'reader'"));
  EXPECT_EQ(Records().back().outcome, "PERMISSION_DENIED");
  // Mapped by a DNS subject alternative name to enroller (default gallery only).
  auto ingest = Stub("ingest-7");
  ASSERT_TRUE(Enroll(*ingest, "x1").ok());
  EXPECT_EQ(Records().back().principal, "ingest");
  EXPECT_EQ(Records().back().gallery, "default");
  // Verified by the CA, but no line maps it.
  const grpc::Status stranger = List(*Stub("stranger"));
  EXPECT_EQ(stranger.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(stranger.error_message(), HasSubstr("CN 'stranger'"));
  EXPECT_THAT(stranger.error_message(), HasSubstr("not mapped"));
  EXPECT_EQ(Records().back().outcome, "UNAUTHENTICATED");
  EXPECT_EQ(Records().back().principal, "");
  // A bearer token sent along wins over the certificate.
  ASSERT_TRUE(Enroll(*Stub("lab-portal", kAdminToken), "x2").ok());
  EXPECT_EQ(Records().back().principal, "ada");
  auto verified = VerifyAuditLog(Path("audit.jsonl"));
  ASSERT_TRUE(verified.ok());
  EXPECT_TRUE(verified->ok) << verified->reason;
}

// Plain TLS (the server does not verify client certificates): cert: lines are ignored, so a
// client certificate names nobody and the call needs a token.
TEST_F(CertPrincipalTest, CertificateLinesNeedClientCertificateVerification) {
  StartServer(/*mutual=*/false);
  EXPECT_EQ(List(*Stub("")).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(List(*Stub("", kAdminToken)).ok());
}

}  // namespace
}  // namespace tessera
