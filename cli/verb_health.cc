// `tessera health --server HOST:PORT [--service NAME]`: one grpc.health.v1
// Check, for container HEALTHCHECKs and scripts (Kubernetes uses its own
// native gRPC probe on the same service names). Exit 0 SERVING, 1 anything
// else (NOT_SERVING, unknown service, unreachable, deadline), 2 usage.
// Health needs no token, even on a server with --token-file.
#include <cstdio>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cli/args.h"
#include "cli/verbs.h"
#include "protos/grpc/health/v1/health.grpc.pb.h"
#include "services/server/bearer_channel.h"

namespace tessera::cli {

int RunHealth(int argc, char** argv) {
  const std::vector<FlagSpec> specs = {
      {"server", "127.0.0.1:50051", "HOST:PORT of a tessera serve process"},
      {"service", "readiness",
       "health service name: readiness (ready for work; NOT_SERVING while draining), liveness, \"\" (the "
       "server as a whole) or a service such as tessera.v1.RegistrationService"},
      {"timeout-s", "2", "deadline of the check in seconds"},
      {"tls-ca", "", "CA certificate (PEM) of a TLS server"},
      {"tls-cert", "", "client certificate (PEM) for mutual TLS"},
      {"tls-key", "", "client key (PEM) for mutual TLS"},
      {"tls-server-name", "",
       "name to check the server certificate against instead of HOST (a probe dialing 127.0.0.1 inside a pod "
       "whose certificate names the Service)"},
      {"quiet", "", "print nothing; the exit code says it all", true},
  };
  auto args = Args::Parse(specs, argc, argv, 1);
  if (!args.ok() || args->help() || !args->positional().empty()) {
    FILE* out = args.ok() && args->help() ? stdout : stderr;
    if (!args.ok()) std::fprintf(stderr, "tessera health: %s\n", std::string(args.status().message()).c_str());
    if (args.ok() && !args->positional().empty()) {
      std::fprintf(stderr, "tessera health: unexpected argument '%s'\n", args->positional()[0].c_str());
    }
    std::fprintf(out, "usage: tessera health [--server HOST:PORT] [--service NAME]   (exit 0 SERVING, 1 not)\n%s",
                 FlagsHelp(specs).c_str());
    return args.ok() && args->help() ? 0 : 2;
  }
  auto timeout_s = args->GetInt("timeout-s");
  if (!timeout_s.ok() || *timeout_s <= 0) {
    std::fprintf(stderr, "tessera health: --timeout-s takes a positive integer\n");
    return 2;
  }
  auto credentials = ClientCredentials({args->Get("tls-ca"), args->Get("tls-cert"), args->Get("tls-key")});
  if (!credentials.ok()) {
    std::fprintf(stderr, "tessera health: %s\n", std::string(credentials.status().message()).c_str());
    return 2;
  }
  const std::string server = args->Get("server"), service = args->Get("service");
  grpc::ChannelArguments channel_args;
  if (!args->Get("tls-server-name").empty()) channel_args.SetSslTargetNameOverride(args->Get("tls-server-name"));
  auto stub = grpc::health::v1::Health::NewStub(CreateBearerChannel(server, *credentials, channel_args, /*token=*/""));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(*timeout_s)));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  const bool quiet = args->GetBool("quiet");
  const std::string what = absl::StrCat(server, " service '", service, "'");
  if (!status.ok()) {
    if (!quiet) {
      std::fprintf(stderr, "tessera health: %s: %s (%d)\n", what.c_str(), status.error_message().c_str(),
                   static_cast<int>(status.error_code()));
    }
    return 1;
  }
  const std::string name = grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status());
  if (!quiet) std::printf("%s: %s\n", what.c_str(), name.c_str());
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING ? 0 : 1;
}

}  // namespace tessera::cli
