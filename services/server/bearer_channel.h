// Client channels that send "authorization: Bearer TOKEN" (`--token-file`) and W3C
// `traceparent` on every call.
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

// A channel to `target`; with a non-empty token every call carries the bearer metadata. Every
// call carries `traceparent`: the calling thread's current trace (trace_context.h) with a new
// span id, or a new trace when it has none.
std::shared_ptr<grpc::Channel> CreateBearerChannel(const std::string& target,
                                                   std::shared_ptr<grpc::ChannelCredentials> credentials,
                                                   const grpc::ChannelArguments& args, const std::string& token);

// How a scheduler reaches its peers (workers, gallery shards): TLS with the
// CA in `credentials` (null: plaintext), each certificate checked against
// `server_name` when set (one peer certificate for a whole StatefulSet) or
// else against the dialed host, and the peer bearer token.
struct PeerChannelSecurity {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  std::string server_name;
  std::string token;
};

// A channel to a peer with `security` applied on top of `args`.
std::shared_ptr<grpc::Channel> CreatePeerChannel(const std::string& target, const PeerChannelSecurity& security,
                                                 grpc::ChannelArguments args);

}  // namespace tessera

#endif  // TESSERA_SERVICES_SERVER_BEARER_CHANNEL_H_
