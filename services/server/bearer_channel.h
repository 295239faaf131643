// Client channels that send "authorization: Bearer TOKEN" on every call (`--token-file`).
#ifndef TESSERA_SERVICES_SERVER_BEARER_CHANNEL_H_
#define TESSERA_SERVICES_SERVER_BEARER_CHANNEL_H_

#include <memory>
#include <string>

#include <grpcpp/channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include "absl/status/statusor.h"

namespace tessera {

// The token in FILE: its first non-empty, non-comment line, trimmed.
absl::StatusOr<std::string> ReadClientTokenFile(const std::string& path);

// A channel to `target`; with a non-empty token every call carries the bearer metadata.
std::shared_ptr<grpc::Channel> CreateBearerChannel(const std::string& target,
                                                   std::shared_ptr<grpc::ChannelCredentials> credentials,
                                                   const grpc::ChannelArguments& args, const std::string& token);

}  // namespace tessera

#endif  // TESSERA_SERVICES_SERVER_BEARER_CHANNEL_H_
