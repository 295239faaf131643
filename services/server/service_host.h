// Hosts every Tessera gRPC service in one process.
//
// Usage (what `tessera serve` does):
//
//   tessera::ServerOptions options;             // host, ports, TLS, limits, data roots
//   options.grpc_port = 0;                      // 0: pick a free port
//   tessera::ServiceHost::InstallShutdownSignalHandlers();  // early: SIGTERM/SIGINT then wake us
//   absl::StatusOr<std::unique_ptr<tessera::VolumeServiceImpl>> volume =
//       tessera::VolumeServiceImpl::Create(options);
//   if (!volume.ok()) { ...report volume.status()...; return 1; }
//   tessera::ServiceHost host(options);
//   host.AddService(volume->get());             // not owned; must outlive the host
//   absl::StatusOr<tessera::BoundPorts> ports = host.Start();
//   if (!ports.ok()) { ...report ports.status()...; return 1; }
//   std::cout << "gRPC on " << ports->grpc_port << ", metrics on " << ports->metrics_port << "\n";
//   host.WaitForShutdownSignal();               // blocks; on SIGTERM/SIGINT drains
//   host.Wait();
//
// Besides the added services the server has:
//   - gRPC health (grpc.health.v1.Health, gRPC's default implementation, which
//     this turns on process-wide) with the names "" (overall), "liveness",
//     "readiness" and each hosted service's full name (e.g.
//     "tessera.v1.VolumeService"); all SERVING once started. Drain() turns all
//     but "liveness" NOT_SERVING.
//   - server reflection (grpc.reflection.v1alpha) and channelz (grpc.channelz.v1).
//   - Prometheus metrics at http://HOST:METRICS_PORT/metrics: per-method request
//     counts by status code, latency histograms and in-flight gauges
//     (metrics_interceptor.h), and GPU memory gauges refreshed on each scrape.
//   - TLS or mutual TLS when the options name certificate files.
//   - message size limits (a larger message fails its call with
//     RESOURCE_EXHAUSTED); deadlines propagate to handlers, which should check
//     CheckNotCancelled(*context) (call_checks.h) in long loops.
//   - with options.token_file / options.audit_log: bearer-token authentication, role checks
//     and a hash-chained audit trail (auth_interceptor.h); health and reflection stay open.
//   - safe defaults: a non-loopback host needs TLS and a token file unless options.insecure.
//   - an exclusive port: a second server on the same port fails to start
//     (gRPC would otherwise share it through SO_REUSEPORT).
#ifndef TESSERA_SERVICES_SERVER_SERVICE_HOST_H_
#define TESSERA_SERVICES_SERVER_SERVICE_HOST_H_

#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <grpcpp/channel.h>
#include <grpcpp/server.h>

#include "absl/status/statusor.h"
#include "common/metrics.h"
#include "services/server/audit_log.h"
#include "services/server/otlp_exporter.h"
#include "services/server/server_options.h"

namespace tessera {

struct BoundPorts {
  int grpc_port = 0;
  int metrics_port = -1;  // -1 when metrics are disabled
};

class ServiceHost {
 public:
  explicit ServiceHost(ServerOptions options);
  // Stops a running server at once (in-flight calls are cancelled), then the
  // metrics endpoint.
  ~ServiceHost();
  ServiceHost(const ServiceHost&) = delete;
  ServiceHost& operator=(const ServiceHost&) = delete;

  // Registers a service before Start(). Not owned: it must outlive the host.
  void AddService(grpc::Service* service);

  // Reports gRPC service `service` (full name) NOT_SERVING in health from
  // Start() on, logging `why`; the other names (and "readiness") are not
  // affected, so a probe of the process keeps its other services in traffic.
  // Before Start().
  void SetNotServing(const std::string& service, const std::string& why);

  // Binds and starts the gRPC server and the metrics endpoint. Errors:
  // INVALID_ARGUMENT (options, unreadable PEM contents), NOT_FOUND /
  // PERMISSION_DENIED (TLS files), UNAVAILABLE (address in use or not
  // bindable), FAILED_PRECONDITION (started twice).
  absl::StatusOr<BoundPorts> Start();

  // Sets the "readiness" health status (e.g. false while warming up).
  void SetReady(bool ready);

  // Graceful drain: every health name but "liveness" becomes NOT_SERVING;
  // after options.drain_grace new calls are refused, and calls in flight get
  // options.drain_timeout to finish before they are cancelled. Blocks until
  // the server has stopped. Idempotent; safe from any thread.
  void Drain();

  // Makes SIGTERM and SIGINT wake WaitForShutdownSignal(). The handler only
  // writes a byte to a pipe (async-signal-safe); the draining happens on the
  // waiting thread. Call before Start() so no signal is missed. Process-wide.
  static void InstallShutdownSignalHandlers();

  // Blocks until SIGTERM or SIGINT arrives (then restores their default
  // action, so a second signal ends the process at once, and drains) or
  // until the server is drained some other way. Returns the signal number,
  // or 0 when woken by a drain. Installs the handlers if not yet done.
  int WaitForShutdownSignal();

  // Blocks until the server has shut down (after Drain()).
  void Wait();

  // An in-process channel to this server (no network; interceptors still run).
  std::shared_ptr<grpc::Channel> InProcessChannel();

  const ServerOptions& options() const { return options_; }
  // Full names of all services the server hosts (after Start()), including
  // health, reflection and channelz.
  std::vector<std::string> service_names() const;
  // The underlying server; null before Start().
  grpc::Server* server() { return server_.get(); }

 private:
  enum class State { kNew, kRunning, kDraining, kStopped };
  void SetServing(bool serving);
  void WakeWaiters();

  const ServerOptions options_;
  std::vector<grpc::Service*> services_;
  std::vector<std::string> service_names_;
  std::set<std::string> not_serving_;  // SetNotServing's names (fixed once started)
  std::unique_ptr<OtlpExporter> otlp_;  // before server_: outlives the calls that feed it
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsHttpServer> metrics_;
  std::shared_ptr<AuditLog> audit_;
  int wake_pipe_[2] = {-1, -1};

  mutable std::mutex mu_;
  std::condition_variable stopped_cv_;
  State state_ = State::kNew;
};

}  // namespace tessera

#endif  // TESSERA_SERVICES_SERVER_SERVICE_HOST_H_
