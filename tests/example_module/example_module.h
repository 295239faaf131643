// The example module: ExampleService and its "example.sum" engine, as a
// serving process hosts them (services/server/hosted_module.h). A real
// service's module is this file in its own folder, plus one line in
// cli/modules.cc.
#ifndef TESSERA_TESTS_EXAMPLE_MODULE_EXAMPLE_MODULE_H_
#define TESSERA_TESTS_EXAMPLE_MODULE_EXAMPLE_MODULE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "services/server/hosted_module.h"
#include "services/server/server_options.h"

namespace tessera::example {

absl::StatusOr<std::unique_ptr<HostedModule>> NewExampleModule(const ServerOptions& options);

}  // namespace tessera::example

#endif  // TESSERA_TESTS_EXAMPLE_MODULE_EXAMPLE_MODULE_H_
