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

// A client's TLS files (PEM): the CA that signed the server's certificate
// (enables TLS), and for mutual TLS the client's certificate and key. All
// empty: plaintext.
struct ClientTlsFiles {
  std::string ca;
  std::string cert;
  std::string key;
};

// Channel credentials for `tls`: INVALID_ARGUMENT for a cert without its key
// (or the reverse) or a client certificate without a CA, NOT_FOUND naming a
// missing file, INVALID_ARGUMENT for a file that is not PEM.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ClientCredentials(const ClientTlsFiles& tls);

// A channel to `target`; with a non-empty token every call carries the bearer metadata.
std::shared_ptr<grpc::Channel> CreateBearerChannel(const std::string& target,
                                                   std::shared_ptr<grpc::ChannelCredentials> credentials,
                                                   const grpc::ChannelArguments& args, const std::string& token);

}  // namespace tessera

#endif  // TESSERA_SERVICES_SERVER_BEARER_CHANNEL_H_
