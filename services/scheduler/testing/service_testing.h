// Helpers for the end-to-end tests of the services that submit their jobs to
// the scheduler (RegistrationService, SomAtlasService): a service hosted on a
// loopback port with a channel to it, as a test server (with an
// InProcessScheduler attached) and as a worker process (none attached) host it.
//
//   ServerOptions options = LoopbackServerOptions();
//   options.data_roots = {root};
//   TESSERA_ASSIGN_OR_RETURN(LoopbackHost hosted, StartLoopbackHost(options, service.get()));
//   auto stub = v1::RegistrationService::NewStub(hosted.channel);
#ifndef TESSERA_SERVICES_SCHEDULER_TESTING_SERVICE_TESTING_H_
#define TESSERA_SERVICES_SCHEDULER_TESTING_SERVICE_TESTING_H_

#include <chrono>
#include <memory>
#include <string>

#include <grpcpp/channel.h>
#include <grpcpp/impl/service_type.h>

#include "absl/status/statusor.h"
#include "services/server/server_options.h"
#include "services/server/service_host.h"

namespace tessera::scheduler::testing {

// $TEST_TMPDIR, else /tmp.
std::string TmpDir();
// A client deadline `ms` from now.
std::chrono::system_clock::time_point In(std::chrono::milliseconds ms);
bool Exists(const std::string& path);

// A server on a loopback port the system picks, without metrics, whose jobs
// default to the CPU.
ServerOptions LoopbackServerOptions();

// A started ServiceHost and a channel to it. Destroy the host before the
// service it hosts.
struct LoopbackHost {
  std::unique_ptr<ServiceHost> host;
  std::shared_ptr<grpc::Channel> channel;
};

// Hosts `service` (not owned; it must outlive the host) with `options` and
// starts it.
absl::StatusOr<LoopbackHost> StartLoopbackHost(const ServerOptions& options, grpc::Service* service);

}  // namespace tessera::scheduler::testing

#endif  // TESSERA_SERVICES_SCHEDULER_TESTING_SERVICE_TESTING_H_
