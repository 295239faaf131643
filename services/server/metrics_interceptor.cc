#include "services/server/metrics_interceptor.h"

#include <atomic>
#include <chrono>
#include <string>
#include <utility>

#include "absl/status/status.h"

namespace tessera {
namespace {

using grpc::experimental::InterceptionHookPoints;

class MetricsInterceptor : public grpc::experimental::Interceptor {
 public:
  MetricsInterceptor(std::shared_ptr<prometheus::Registry> registry,
                     const MetricsInterceptorFactory::Families& families, const KnownMethods* known,
                     const char* method)
      : registry_(std::move(registry)), families_(families), start_(std::chrono::steady_clock::now()) {
    // "/package.Service/Method"
    const std::string full = method != nullptr ? method : "";
    const size_t slash = full.rfind('/');
    if (known != nullptr && known->configured && !known->Contains(full)) {
      service_ = method_ = "unknown";
    } else if (full.size() > 1 && full[0] == '/' && slash != std::string::npos && slash > 0) {
      service_ = full.substr(1, slash - 1);
      method_ = full.substr(slash + 1);
    } else {
      service_ = "unknown";
      method_ = full.empty() ? "unknown" : full;
    }
    in_flight_ = &GetGauge(*families_.in_flight, {{"grpc_service", service_}, {"grpc_method", method_}});
    in_flight_->Increment();
  }

  ~MetricsInterceptor() override {
    Record(grpc::StatusCode::CANCELLED);  // no-op when the status was sent
    in_flight_->Decrement();
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      Record(methods->GetSendStatus().error_code());
    }
    methods->Proceed();
  }

 private:
  void Record(grpc::StatusCode code) {
    if (recorded_.exchange(true)) return;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const std::string code_name = absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
    GetCounter(*families_.handled,
               {{"grpc_service", service_}, {"grpc_method", method_}, {"grpc_code", code_name}})
        .Increment();
    GetHistogram(*families_.seconds, {{"grpc_service", service_}, {"grpc_method", method_}},
                 LatencyBucketsSeconds())
        .Observe(seconds);
  }

  const std::shared_ptr<prometheus::Registry> registry_;  // keeps the families alive
  const MetricsInterceptorFactory::Families families_;
  const std::chrono::steady_clock::time_point start_;
  std::string service_;
  std::string method_;
  prometheus::Gauge* in_flight_ = nullptr;
  std::atomic<bool> recorded_{false};
};

}  // namespace

bool KnownMethods::Contains(const std::string& full_method) const {
  if (methods.count(full_method) > 0) return true;
  const size_t slash = full_method.rfind('/');
  if (full_method.size() < 2 || full_method[0] != '/' || slash == std::string::npos || slash == 0) return false;
  return any_method_of.count(full_method.substr(1, slash - 1)) > 0;
}

MetricsInterceptorFactory::MetricsInterceptorFactory(std::shared_ptr<prometheus::Registry> registry,
                                                     std::shared_ptr<const KnownMethods> known)
    : registry_(std::move(registry)), known_(std::move(known)) {
  families_.handled = &CounterFamily(*registry_, "tessera_grpc_server_handled_total",
                                     "RPCs completed by the server, by method and status code.");
  families_.seconds = &HistogramFamily(*registry_, "tessera_grpc_server_handling_seconds",
                                       "Time from a call's start to its status being sent, in seconds.");
  families_.in_flight =
      &GaugeFamily(*registry_, "tessera_grpc_server_in_flight", "RPCs currently being handled, by method.");
}

grpc::experimental::Interceptor* MetricsInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  return new MetricsInterceptor(registry_, families_, known_.get(), info->method());
}

}  // namespace tessera
