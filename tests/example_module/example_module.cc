#include "tests/example_module/example_module.h"

#include <string>

#include "tests/example_module/example_service.h"
#include "tests/example_module/sum_engine.h"

namespace tessera::example {

absl::StatusOr<std::unique_ptr<HostedModule>> NewExampleModule(const ServerOptions& /*options*/) {
  return MakeServiceModule(std::make_unique<ExampleServiceImpl>(),
                           [](ExampleServiceImpl&, const std::string& /*state_dir*/, jobs::EngineRegistry& engines) {
                             return engines.Add(std::make_shared<SumEngine>());
                           });
}

}  // namespace tessera::example
