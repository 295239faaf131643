// One entry of the module list (cli/modules.cc): everything a service adds to
// the `tessera` binary, declared once — its --services name, how a serving
// process creates it (gRPC services, engines, scheduler hook: HostedModule),
// its CLI verbs and its step in `tessera demo`. `serve`, `demo`, the engine
// list and the verb table loop over the list; the method -> role table is
// each .proto's required_role option. See docs/ADDING_A_SERVICE.md.
#ifndef TESSERA_CLI_MODULE_H_
#define TESSERA_CLI_MODULE_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/fingerprint/fingerprint_service.h"
#include "services/server/hosted_module.h"
#include "services/server/server_options.h"

namespace tessera::cli {

struct DemoContext;

// What a serving process creates its modules from: the server's options
// and the module-specific serve flags.
struct ModuleOptions {
  ServerOptions server;
  FingerprintServiceOptions fingerprint;  // --gallery-dir, --galleries-root, --fp-max-*
};

// A verb of the `tessera` command: takes the arguments after the verb and
// returns the process exit code.
struct Verb {
  const char* name;
  int (*run)(int argc, char** argv);
  const char* summary;
};

struct ModuleEntry {
  const char* name;  // what --services names
  absl::StatusOr<std::unique_ptr<HostedModule>> (*create)(const ModuleOptions& options);
  std::vector<Verb> verbs;  // local verbs of this service (may be empty)
  // Its step of `tessera demo`, driving it over gRPC (nullptr: none).
  absl::Status (*demo_step)(DemoContext& ctx) = nullptr;
};

// The modules of the `tessera` binary, in hosting and demo order
// (cli/modules.cc).
const std::vector<ModuleEntry>& Modules();

}  // namespace tessera::cli

#endif  // TESSERA_CLI_MODULE_H_
