#include "services/server/bearer_channel.h"

#include <fstream>
#include <sstream>
#include <vector>

#include <grpcpp/create_channel.h>
#include <grpcpp/support/client_interceptor.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

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
  if (token.empty()) return grpc::CreateCustomChannel(target, credentials, args);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> factories;
  factories.push_back(std::make_unique<BearerInterceptorFactory>(token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(target, credentials, args, std::move(factories));
}

}  // namespace tessera
