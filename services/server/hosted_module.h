// What one service brings to a serving process: its gRPC services, the
// engines of its job kinds, and the hook that points its job RPCs at the
// process's scheduler. `tessera serve`, `tessera demo` and tests host a list
// of modules (cli/modules.cc), so a new service is one line there; see
// docs/ADDING_A_SERVICE.md.
//
//   absl::StatusOr<std::unique_ptr<HostedModule>> NewVolumeModule(const ServerOptions& options) {
//     TESSERA_ASSIGN_OR_RETURN(auto service, VolumeServiceImpl::Create(options));
//     return MakeServiceModule(std::move(service));
//   }
#ifndef TESSERA_SERVICES_SERVER_HOSTED_MODULE_H_
#define TESSERA_SERVICES_SERVER_HOSTED_MODULE_H_

#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <grpcpp/impl/service_type.h>

#include "absl/status/status.h"
#include "services/jobs/engine.h"

namespace tessera {

namespace scheduler {
class Scheduler;
}  // namespace scheduler

// A gRPC service (its full name) that cannot serve, and why: the host reports
// it NOT_SERVING in gRPC health while the process's other services serve.
struct NotServing {
  std::string service;
  std::string why;
};

class HostedModule {
 public:
  virtual ~HostedModule() = default;

  // The gRPC services to register with the host (before it starts); owned
  // by the module.
  virtual std::vector<grpc::Service*> GrpcServices() = 0;

  // Adds the engines of the module's job kinds: this process's workers run
  // them, and the scheduler checks submitted specs with them. `state_dir`:
  // where the process keeps job state (the module's upload folders).
  virtual absl::Status AddEngines(const std::string& /*state_dir*/, jobs::EngineRegistry& /*engines*/) {
    return absl::OkStatus();
  }

  // Points the module's job RPCs at the process's scheduler (roles that run
  // one); without this call they answer FAILED_PRECONDITION. Once.
  virtual absl::Status AttachScheduler(scheduler::Scheduler& /*scheduler*/, const std::string& /*state_dir*/) {
    return absl::OkStatus();
  }

  // Services of the module that cannot serve (decided when the module was
  // created, e.g. a damaged default fingerprint gallery).
  virtual std::vector<NotServing> NotServingServices() const { return {}; }
};

// The usual module: one gRPC service object. `add_engines` (may be empty:
// a service without jobs) adds its engines; AttachScheduler is forwarded to
// ServiceT::AttachScheduler(scheduler::Scheduler*, const std::string&) when
// the service has job RPCs.
template <typename ServiceT>
class ServiceModule final : public HostedModule {
 public:
  using AddEnginesFn = std::function<absl::Status(ServiceT&, const std::string& state_dir, jobs::EngineRegistry&)>;

  explicit ServiceModule(std::unique_ptr<ServiceT> service, AddEnginesFn add_engines = {})
      : service_(std::move(service)), add_engines_(std::move(add_engines)) {}

  std::vector<grpc::Service*> GrpcServices() override { return {service_.get()}; }

  absl::Status AddEngines(const std::string& state_dir, jobs::EngineRegistry& engines) override {
    return add_engines_ ? add_engines_(*service_, state_dir, engines) : absl::OkStatus();
  }

  absl::Status AttachScheduler(scheduler::Scheduler& scheduler, const std::string& state_dir) override {
    if constexpr (HasAttachScheduler<ServiceT>::value) {
      return service_->AttachScheduler(&scheduler, state_dir);
    } else {
      return absl::OkStatus();
    }
  }

  std::vector<NotServing> NotServingServices() const override {
    if constexpr (HasNotServing<ServiceT>::value) {
      return service_->NotServingServices();
    } else {
      return {};
    }
  }

 private:
  template <typename T, typename = void>
  struct HasAttachScheduler : std::false_type {};
  template <typename T>
  struct HasAttachScheduler<T, std::void_t<decltype(std::declval<T&>().AttachScheduler(
                                   std::declval<scheduler::Scheduler*>(), std::declval<const std::string&>()))>>
      : std::true_type {};
  template <typename T, typename = void>
  struct HasNotServing : std::false_type {};
  template <typename T>
  struct HasNotServing<T, std::void_t<decltype(std::declval<const T&>().NotServingServices())>> : std::true_type {};

  std::unique_ptr<ServiceT> service_;
  AddEnginesFn add_engines_;
};

template <typename ServiceT>
std::unique_ptr<HostedModule> MakeServiceModule(std::unique_ptr<ServiceT> service,
                                                typename ServiceModule<ServiceT>::AddEnginesFn add_engines = {}) {
  return std::make_unique<ServiceModule<ServiceT>>(std::move(service), std::move(add_engines));
}

}  // namespace tessera

#endif  // TESSERA_SERVICES_SERVER_HOSTED_MODULE_H_
