#include "services/server/service_host.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>
#include <utility>

#include <grpc/grpc.h>
#include <grpcpp/ext/channelz_service_plugin.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/impl/server_builder_plugin.h>
#include <grpcpp/impl/server_initializer.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <google/protobuf/descriptor.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "common/status.h"
#include "services/server/auth_interceptor.h"
#include "services/server/metrics_interceptor.h"
#include "services/server/trace_interceptor.h"

namespace tessera {
namespace {

constexpr char kLiveness[] = "liveness";
constexpr char kReadiness[] = "readiness";

// Self-pipe for SIGTERM/SIGINT: the handler writes the signal number, the
// thread in WaitForShutdownSignal() reads it.
int g_signal_pipe[2] = {-1, -1};

extern "C" void OnShutdownSignal(int signo) {
  const int saved_errno = errno;
  const unsigned char byte = static_cast<unsigned char>(signo);
  ssize_t ignored = write(g_signal_pipe[1], &byte, 1);  // async-signal-safe
  (void)ignored;
  errno = saved_errno;
}

// Lists the methods of `services` (full names) into `known`, from the
// protobuf descriptors linked into the process.
void AddKnownMethods(const std::vector<std::string>& services, KnownMethods* known) {
  const google::protobuf::DescriptorPool* pool = google::protobuf::DescriptorPool::generated_pool();
  for (const std::string& service : services) {
    const google::protobuf::ServiceDescriptor* descriptor = pool->FindServiceByName(service);
    if (descriptor == nullptr) {
      known->any_method_of.insert(service);
      continue;
    }
    for (int i = 0; i < descriptor->method_count(); ++i) {
      known->methods.insert(absl::StrCat("/", service, "/", descriptor->method(i)->name()));
    }
  }
}

// Captures the full names of all services registered on the server, which
// grpc::Service does not expose but the server's initializer does. At
// InitServer (before the server starts) the list has the added services and
// those of the reflection and channelz plugins; the default health service
// is registered when the server starts, so its methods are added by name.
class ServiceListPlugin : public grpc::ServerBuilderPlugin {
 public:
  ServiceListPlugin(std::vector<std::string>* names, KnownMethods* known) : names_(names), known_(known) {}
  std::string name() override { return "tessera_service_list"; }
  void InitServer(grpc::ServerInitializer* si) override {
    const std::vector<std::string>* names = si->GetServiceList();
    if (names != nullptr) AddKnownMethods(*names, known_);
    known_->methods.insert("/grpc.health.v1.Health/Check");
    known_->methods.insert("/grpc.health.v1.Health/Watch");
    known_->configured = true;
  }
  void Finish(grpc::ServerInitializer* si) override {
    const std::vector<std::string>* names = si->GetServiceList();
    if (names != nullptr) *names_ = *names;
  }
  void ChangeArguments(const std::string& /*name*/, void* /*value*/) override {}

 private:
  std::vector<std::string>* names_;
  KnownMethods* known_;
};

class ServiceListOption : public grpc::ServerBuilderOption {
 public:
  ServiceListOption(std::vector<std::string>* names, KnownMethods* known) : names_(names), known_(known) {}
  void UpdateArguments(grpc::ChannelArguments* /*args*/) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->push_back(std::make_unique<ServiceListPlugin>(names_, known_));
  }

 private:
  std::vector<std::string>* names_;
  KnownMethods* known_;
};

void InitServerPluginsOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    grpc::channelz::experimental::InitChannelzService();
  });
}

// gRPC registers reflection and channelz for every server of the process
// (libgrpc++_reflection even does so at load time); this option takes them
// out of one builder's plugins.
class WithoutIntrospectionOption : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments* /*args*/) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->erase(std::remove_if(plugins->begin(), plugins->end(),
                                  [](const std::unique_ptr<grpc::ServerBuilderPlugin>& p) {
                                    const std::string name = p->name();
                                    return name == "proto_server_reflection" || name == "channelz_service";
                                  }),
                   plugins->end());
  }
};

absl::StatusOr<std::string> ReadPemFile(const std::string& path, absl::string_view what, absl::string_view marker) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    const int err = errno;
    const std::string message = absl::StrCat("cannot open ", what, " '", path, "': ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(message);
    if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
    return absl::InvalidArgumentError(message);
  }
  std::string contents;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) contents.append(buf, n);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return absl::InvalidArgumentError(absl::StrCat("cannot read ", what, " '", path, "'"));
  if (!absl::StrContains(contents, marker)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", path, "' is not PEM (no '", marker, "' line)"));
  }
  return contents;
}

std::chrono::system_clock::time_point DeadlineAfter(absl::Duration d) {
  d = std::min(std::max(d, absl::ZeroDuration()), absl::Hours(24 * 365));
  return std::chrono::system_clock::now() + absl::ToChronoMilliseconds(d);
}

}  // namespace

ServiceHost::ServiceHost(ServerOptions options) : options_(std::move(options)) {
  if (pipe2(wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
    TESSERA_LOG(ERROR) << "pipe2 failed: " << std::strerror(errno);
    wake_pipe_[0] = wake_pipe_[1] = -1;
  }
}

ServiceHost::~ServiceHost() {
  std::unique_lock<std::mutex> lock(mu_);
  if (state_ == State::kRunning) {
    state_ = State::kDraining;
    lock.unlock();
    SetServing(false);
    server_->Shutdown(std::chrono::system_clock::now());  // cancels calls in flight
    lock.lock();
    state_ = State::kStopped;
    stopped_cv_.notify_all();
  } else if (state_ == State::kDraining) {
    stopped_cv_.wait(lock, [this] { return state_ == State::kStopped; });
  }
  lock.unlock();
  if (server_ != nullptr) server_->Wait();
  metrics_.reset();
  for (int fd : wake_pipe_) {
    if (fd >= 0) close(fd);
  }
}

void ServiceHost::SetNotServing(const std::string& service, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ != State::kNew) {
    TESSERA_LOG(ERROR) << "ServiceHost::SetNotServing(" << service << ") after Start() is ignored";
    return;
  }
  TESSERA_LOG(ERROR) << service << " is NOT_SERVING in gRPC health: " << why;
  not_serving_.insert(service);
}

void ServiceHost::AddService(grpc::Service* service) {
  if (service == nullptr) {
    TESSERA_LOG(ERROR) << "ServiceHost::AddService(nullptr) is ignored";
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ != State::kNew) {
    TESSERA_LOG(ERROR) << "ServiceHost::AddService after Start() is ignored";
    return;
  }
  services_.push_back(service);
}

absl::StatusOr<BoundPorts> ServiceHost::Start() {
  TESSERA_RETURN_IF_ERROR(options_.Validate());
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ != State::kNew) return absl::FailedPreconditionError("ServiceHost::Start(): already started or drained");

  // Safe defaults: other machines only over TLS and with tokens, unless told otherwise.
  const bool loopback = options_.host == "localhost" || options_.host == "::1" || options_.host == "[::1]" ||
                        absl::StartsWith(options_.host, "127.");
  if (!loopback && (options_.tls_cert.empty() || options_.token_file.empty())) {
    const std::string why = absl::StrCat("refusing to serve on non-loopback host ", options_.host, " without ",
                                         options_.tls_cert.empty() ? "TLS (--tls-cert/--tls-key)" : "",
                                         options_.tls_cert.empty() && options_.token_file.empty() ? " and " : "",
                                         options_.token_file.empty() ? "bearer tokens (--token-file)" : "");
    if (!options_.insecure) {
      TESSERA_LOG(ERROR) << why << "; pass --insecure to serve anyway";
      return absl::FailedPreconditionError(absl::StrCat(why, "; pass --insecure to serve anyway"));
    }
    TESSERA_LOG(WARNING) << "--insecure: not " << why.substr(std::string("refusing to ").size());
  }
  std::shared_ptr<const Authorizer> authorizer;
  if (!options_.token_file.empty()) {
    TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Authorizer> from_file, Authorizer::FromFile(options_.token_file));
    // cert: lines name principals by their client certificate: only sound when the TLS layer
    // requires and verifies one (mutual TLS).
    const bool verifies_client_certificates = !options_.tls_cert.empty() && !options_.tls_client_ca.empty();
    from_file->AcceptClientCertificates(verifies_client_certificates);
    if (!verifies_client_certificates && from_file->certificate_lines() > 0) {
      TESSERA_LOG(WARNING) << "token file " << options_.token_file << " has " << from_file->certificate_lines()
                           << " cert: line(s), ignored: client certificates are verified only with --tls-cert, "
                              "--tls-key and --tls-client-ca";
    }
    authorizer = std::move(from_file);
  }
  if (!options_.audit_log.empty()) {
    std::optional<AuditKey> key;
    if (!options_.audit_key_file.empty()) {
      TESSERA_ASSIGN_OR_RETURN(key, AuditKey::FromFile(options_.audit_key_file));
    }
    TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<AuditLog> audit,
                             AuditLog::Open(options_.audit_log, options_.audit_max_bytes, std::move(key)));
    audit_ = std::move(audit);
  }
  const bool guarded = authorizer != nullptr || audit_ != nullptr;
  if (guarded) {
    for (grpc::Service* service : services_) InstallAuthGate(service);
  }

  std::shared_ptr<grpc::ServerCredentials> credentials;
  std::string security = "plaintext";
  if (!options_.tls_cert.empty()) {
    const bool mutual = !options_.tls_client_ca.empty();
    grpc::SslServerCredentialsOptions ssl(mutual ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                                 : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
    TESSERA_ASSIGN_OR_RETURN(pair.cert_chain,
                             ReadPemFile(options_.tls_cert, "TLS certificate", "-----BEGIN CERTIFICATE-----"));
    TESSERA_ASSIGN_OR_RETURN(pair.private_key, ReadPemFile(options_.tls_key, "TLS private key", "PRIVATE KEY-----"));
    ssl.pem_key_cert_pairs.push_back(std::move(pair));
    if (mutual) {
      TESSERA_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadPemFile(options_.tls_client_ca, "TLS client CA",
                                                               "-----BEGIN CERTIFICATE-----"));
    }
    credentials = grpc::SslServerCredentials(ssl);
    security = mutual ? "mutual TLS" : "TLS";
  } else {
    credentials = grpc::InsecureServerCredentials();
  }

  BoundPorts ports;
  const bool secure = options_.SecureMode();
  const std::string metrics_host = !options_.metrics_host.empty() ? options_.metrics_host
                                   : (secure && !loopback)        ? std::string("127.0.0.1")
                                                                  : options_.host;
  const bool introspection = !secure || options_.introspection_in_secure_mode;
  if (options_.metrics_port >= 0) {
    TESSERA_ASSIGN_OR_RETURN(metrics_, MetricsHttpServer::Start(metrics_host, options_.metrics_port,
                                                                ProcessRegistry(), [] { UpdateGpuMemoryMetrics(); }));
    ports.metrics_port = metrics_->port();
  }

  InitServerPluginsOnce();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  if (!introspection) builder.SetOption(std::make_unique<WithoutIntrospectionOption>());
  const std::string address = JoinHostPort(options_.host, options_.grpc_port);
  int selected_port = 0;
  builder.AddListeningPort(address, credentials, &selected_port);
  // gRPC sets SO_REUSEPORT by default on Linux, so a second server on the same
  // port would start silently and share the traffic; make that an error.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(options_.max_receive_message_bytes);
  builder.SetMaxSendMessageSize(options_.max_send_message_bytes);
  for (grpc::Service* service : services_) builder.RegisterService(service);
  // Filled by the plugin before the server takes calls, read-only afterwards.
  auto known_methods = std::make_shared<KnownMethods>();
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  // First, so that metrics see the status it may change (audit failure -> UNAVAILABLE).
  if (guarded) interceptors.push_back(std::make_unique<AuthAuditInterceptorFactory>(authorizer, audit_));
  interceptors.push_back(std::make_unique<MetricsInterceptorFactory>(ProcessRegistry(), known_methods));
  // Last: gRPC runs receive hooks last-to-first and send hooks first-to-last, so the call's trace
  // is current before the auth interceptor records the caller and until its audit record is written.
  if (!options_.otlp_endpoint.empty()) {
    OtlpExporterOptions otlp;
    otlp.endpoint = options_.otlp_endpoint;
    TESSERA_ASSIGN_OR_RETURN(otlp_, OtlpExporter::Start(std::move(otlp)));
    TESSERA_LOG(INFO) << "exporting one span per call as OTLP/JSON to " << options_.otlp_endpoint;
  }
  interceptors.push_back(std::make_unique<TraceInterceptorFactory>(otlp_ ? otlp_->Sink() : SpanSink()));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  builder.SetOption(std::make_unique<ServiceListOption>(&service_names_, known_methods.get()));

  server_ = builder.BuildAndStart();
  if (server_ == nullptr || selected_port == 0) {
    if (server_ != nullptr) {
      server_->Shutdown(std::chrono::system_clock::now());
      server_->Wait();
      server_.reset();
    }
    metrics_.reset();
    return absl::UnavailableError(absl::StrCat("cannot start the gRPC server on ", address,
                                               " (address in use or not bindable, or a service registered twice; "
                                               "gRPC's log above has details)"));
  }
  ports.grpc_port = selected_port;

  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  if (health == nullptr) {
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
    server_.reset();
    metrics_.reset();
    return absl::InternalError("gRPC default health check service missing");
  }
  health->SetServingStatus(kLiveness, true);
  SetServing(true);
  state_ = State::kRunning;

  TESSERA_LOG(INFO) << "serving gRPC on " << JoinHostPort(options_.host, ports.grpc_port) << " (" << security
                    << (authorizer ? "; bearer tokens required" : "; no authentication")
                    << (audit_ ? absl::StrCat("; audit log ", options_.audit_log) : std::string())
                    << "; " << absl::StrJoin(service_names_, ", ") << ")"
                    << (metrics_ ? absl::StrCat("; metrics at http://", JoinHostPort(metrics_host, ports.metrics_port),
                                                "/metrics")
                                 : std::string("; metrics disabled"));
  return ports;
}

void ServiceHost::SetReady(bool ready) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ != State::kRunning) return;  // draining or stopped stays NOT_SERVING
  server_->GetHealthCheckService()->SetServingStatus(kReadiness, ready);
}

// Every health name but "liveness". service_names_ is fixed once started.
void ServiceHost::SetServing(bool serving) {
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  if (health == nullptr) return;
  for (const std::string& name : service_names_) {
    health->SetServingStatus(name, serving && not_serving_.count(name) == 0);
  }
  health->SetServingStatus("", serving);
  health->SetServingStatus(kReadiness, serving);
}

void ServiceHost::WakeWaiters() {
  if (wake_pipe_[1] < 0) return;
  const char byte = 'd';
  ssize_t ignored = write(wake_pipe_[1], &byte, 1);
  (void)ignored;
}

void ServiceHost::Drain() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    switch (state_) {
      case State::kNew:
        state_ = State::kStopped;  // never started: nothing to drain
        stopped_cv_.notify_all();
        lock.unlock();
        WakeWaiters();
        return;
      case State::kDraining:
        stopped_cv_.wait(lock, [this] { return state_ == State::kStopped; });
        return;
      case State::kStopped:
        return;
      case State::kRunning:
        state_ = State::kDraining;
        break;
    }
  }
  SetServing(false);
  TESSERA_LOG(INFO) << "draining: readiness NOT_SERVING; refusing new calls in "
                    << absl::FormatDuration(options_.drain_grace) << ", calls in flight get "
                    << absl::FormatDuration(options_.drain_timeout);
  if (options_.drain_grace > absl::ZeroDuration()) absl::SleepFor(options_.drain_grace);
  server_->Shutdown(DeadlineAfter(options_.drain_timeout));
  server_->Wait();
  TESSERA_LOG(INFO) << "gRPC server stopped";
  {
    std::lock_guard<std::mutex> lock(mu_);
    state_ = State::kStopped;
  }
  stopped_cv_.notify_all();
  WakeWaiters();
}

void ServiceHost::InstallShutdownSignalHandlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
      TESSERA_LOG(ERROR) << "pipe2 failed: " << std::strerror(errno) << "; signals keep their default action";
      g_signal_pipe[0] = g_signal_pipe[1] = -1;
    }
  });
  if (g_signal_pipe[1] < 0) return;
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = OnShutdownSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

int ServiceHost::WaitForShutdownSignal() {
  InstallShutdownSignalHandlers();
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (state_ == State::kStopped) return 0;
    }
    pollfd fds[2] = {{g_signal_pipe[0], POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    const int n = poll(fds, 2, /*timeout_ms=*/-1);
    if (n < 0) {
      if (errno == EINTR) continue;
      TESSERA_LOG(ERROR) << "poll failed: " << std::strerror(errno);
      return 0;
    }
    if (fds[0].revents & POLLIN) {
      unsigned char signo = 0;
      if (read(g_signal_pipe[0], &signo, 1) == 1) {
        // A second SIGTERM/SIGINT now ends the process without waiting for the drain.
        std::signal(SIGTERM, SIG_DFL);
        std::signal(SIGINT, SIG_DFL);
        TESSERA_LOG(INFO) << "received " << (signo == SIGTERM ? "SIGTERM" : signo == SIGINT ? "SIGINT" : "a signal")
                          << "; draining (a second signal stops at once)";
        Drain();
        return signo;
      }
    }
    // Otherwise the wake pipe: loop to see the stopped state.
  }
}

void ServiceHost::Wait() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (state_ == State::kNew) return;
  }
  if (server_ != nullptr) server_->Wait();
}

std::shared_ptr<grpc::Channel> ServiceHost::InProcessChannel() {
  if (server_ == nullptr) return nullptr;
  return server_->InProcessChannel(grpc::ChannelArguments());
}

std::vector<std::string> ServiceHost::service_names() const {
  std::lock_guard<std::mutex> lock(mu_);
  return service_names_;
}

}  // namespace tessera
