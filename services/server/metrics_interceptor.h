// A gRPC server interceptor that records, per method, into Prometheus:
//   tessera_grpc_server_handled_total{grpc_service, grpc_method, grpc_code}
//   tessera_grpc_server_handling_seconds{grpc_service, grpc_method}  (histogram)
//   tessera_grpc_server_in_flight{grpc_service, grpc_method}         (gauge)
// Calls to methods the server does not implement are labelled "unknown" (see
// KnownMethods). The code is the status the handler returned (CANCELLED when the call ended
// without one). Latency runs from when the call is matched to a handler to
// when its status is sent.
#ifndef TESSERA_SERVICES_SERVER_METRICS_INTERCEPTOR_H_
#define TESSERA_SERVICES_SERVER_METRICS_INTERCEPTOR_H_

#include <memory>
#include <set>
#include <string>

#include <grpcpp/support/server_interceptor.h>
#include <prometheus/registry.h>

#include "common/metrics.h"

namespace tessera {

// The methods a server implements, so that calls to made-up method names
// (answered UNIMPLEMENTED by gRPC) are counted under grpc_service="unknown",
// grpc_method="unknown" instead of creating new metric series without bound.
// Filled before the server starts taking calls; read-only afterwards.
struct KnownMethods {
  bool configured = false;              // false: label every method by name
  std::set<std::string> methods;        // "/package.Service/Method"
  std::set<std::string> any_method_of;  // services whose methods are not listed
  bool Contains(const std::string& full_method) const;
};

class MetricsInterceptorFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit MetricsInterceptorFactory(std::shared_ptr<prometheus::Registry> registry = ProcessRegistry(),
                                     std::shared_ptr<const KnownMethods> known = nullptr);

  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override;

  struct Families {
    prometheus::Family<prometheus::Counter>* handled;
    prometheus::Family<prometheus::Histogram>* seconds;
    prometheus::Family<prometheus::Gauge>* in_flight;
  };

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<const KnownMethods> known_;
  Families families_;
};

}  // namespace tessera

#endif  // TESSERA_SERVICES_SERVER_METRICS_INTERCEPTOR_H_
