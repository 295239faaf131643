#include "services/server/bearer_channel.h"

#include <fstream>
#include <sstream>
#include <vector>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/client_interceptor.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/trace_context.h"

namespace tessera {
namespace {

using grpc::experimental::InterceptionHookPoints;

class BearerInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit BearerInterceptor(const std::string* value) : value_(value) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", *value_});
    }
    methods->Proceed();
  }

 private:
  const std::string* value_;
};

class BearerInterceptorFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerInterceptorFactory(std::string token) : value_(absl::StrCat("Bearer ", token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(grpc::experimental::ClientRpcInfo*) override {
    return new BearerInterceptor(&value_);
  }

 private:
  const std::string value_;  // lives as long as the channel
};

// Sends `traceparent` (trace_context.h): the current trace's id with a new span id, or a new
// trace when the calling thread has none; one the caller put into its ClientContext (the HTTP
// gateway forwarding its header) is left alone.
class ClientTraceInterceptor : public grpc::experimental::Interceptor {
 public:
  // Made when the call is created, on the caller's thread: the trace is read there (an async
  // call's metadata may be sent from another thread).
  ClientTraceInterceptor()
      : value_(FormatTraceparent(CurrentTrace() != nullptr ? ChildSpan(*CurrentTrace()) : NewTrace())) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      auto* metadata = methods->GetSendInitialMetadata();
      if (metadata->find(kTraceparentHeader) == metadata->end()) metadata->insert({kTraceparentHeader, value_});
    }
    methods->Proceed();
  }

 private:
  const std::string value_;
};

class TraceparentInterceptorFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateClientInterceptor(grpc::experimental::ClientRpcInfo*) override {
    return new ClientTraceInterceptor();
  }
};

}  // namespace

absl::StatusOr<std::string> ReadClientTokenFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read token file ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  for (absl::string_view line : absl::StrSplit(ss.str(), '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    // A server-style line (TOKEN PRINCIPAL ROLES) works too: the token is its first word.
    std::vector<absl::string_view> words = absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    return std::string(words[0]);
  }
  return absl::InvalidArgumentError(absl::StrCat("token file ", path, " holds no token"));
}

std::shared_ptr<grpc::Channel> CreateBearerChannel(const std::string& target,
                                                   std::shared_ptr<grpc::ChannelCredentials> credentials,
                                                   const grpc::ChannelArguments& args, const std::string& token) {
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> factories;
  if (!token.empty()) factories.push_back(std::make_unique<BearerInterceptorFactory>(token));
  factories.push_back(std::make_unique<TraceparentInterceptorFactory>());
  return grpc::experimental::CreateCustomChannelWithInterceptors(target, credentials, args, std::move(factories));
}

std::shared_ptr<grpc::Channel> CreatePeerChannel(const std::string& target, const PeerChannelSecurity& security,
                                                 grpc::ChannelArguments args) {
  if (!security.server_name.empty()) args.SetSslTargetNameOverride(security.server_name);
  return CreateBearerChannel(target, security.credentials ? security.credentials : grpc::InsecureChannelCredentials(),
                             args, security.token);
}

namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", what, " '", path, "'"));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string pem = ss.str();
  if (pem.find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", path, "' is not a PEM file"));
  }
  return pem;
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ClientCredentials(const ClientTlsFiles& tls) {
  if (tls.ca.empty() && tls.cert.empty() && tls.key.empty()) return grpc::InsecureChannelCredentials();
  if (tls.cert.empty() != tls.key.empty()) {
    return absl::InvalidArgumentError("a client certificate and its key go together (--tls-cert and --tls-key)");
  }
  if (tls.ca.empty()) {
    return absl::InvalidArgumentError("TLS needs the CA that signed the server's certificate (--tls-ca)");
  }
  grpc::SslCredentialsOptions ssl;
  absl::StatusOr<std::string> ca = ReadPem(tls.ca, "TLS CA");
  if (!ca.ok()) return ca.status();
  ssl.pem_root_certs = *std::move(ca);
  if (!tls.cert.empty()) {
    absl::StatusOr<std::string> cert = ReadPem(tls.cert, "TLS client certificate");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem(tls.key, "TLS client key");
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *std::move(cert);
    ssl.pem_private_key = *std::move(key);
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace tessera
