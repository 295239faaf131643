// `tessera serve`: hosts all services until SIGTERM/SIGINT, then drains.
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/args.h"
#include "cli/hosted_services.h"
#include "cli/scheduler_host.h"
#include "cli/verbs.h"
#include "common/device.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/status.h"
#include "services/gateway/http_gateway.h"
#include "services/operator/operator_service.h"
#include "services/server/bearer_channel.h"

namespace tessera::cli {
namespace {

std::vector<FlagSpec> ServeFlags() {
  return {
      {"host", "127.0.0.1", "address to bind (0.0.0.0 to serve other machines; prefer TLS then)"},
      {"grpc-port", "50051", "gRPC port; 0 picks a free one"},
      {"metrics-port", "9464", "Prometheus /metrics HTTP port; 0 picks a free one, -1 disables"},
      {"http-port", "-1", "HTTP/JSON gateway port (same --host, TLS, tokens, roles and audit as gRPC; /rpc/..., "
                          "REST routes, /openapi.json, /console/); 0 picks a free one, -1 disables"},
      {"data-root", "", "directory whose files clients may name in requests", false, true},
      {"max-message-mb", "64", "largest single gRPC message, MiB (bigger calls get RESOURCE_EXHAUSTED)"},
      {"max-volume-mb", "4096", "largest array one request may make the server hold, MiB"},
      {"tls-cert", "", "server certificate (PEM); with --tls-key enables TLS"},
      {"tls-key", "", "server private key (PEM)"},
      {"tls-client-ca", "", "CA (PEM) that client certificates must chain to: mutual TLS"},
          {"token-file", "", "principals (lines: TOKEN|cert:CN=NAME|cert:SAN=NAME PRINCIPAL ROLE[,ROLE] "
                         "[expires=RFC3339] [galleries=G[:ROLE],...|*]); every RPC but health/reflection then needs "
                         "'authorization: Bearer TOKEN' (or, with --tls-client-ca, a client certificate a cert: "
                         "line maps) and its method's role, on the gallery it names"},
      {"audit-log", "", "hash-chained audit trail (JSON lines, fsynced before each answer; tessera audit verify)"},
      {"audit-key-file", "", "a secret (>= 32 bytes) that keys the audit chain (HMAC-SHA256): forged logs fail "
                             "tessera audit verify --key-file"},
      {"audit-max-mb", "64", "rotate the audit log into FILE.1, FILE.2, ... beyond this size (MiB)"},
      {"otlp-endpoint", "", "export one span per call (W3C trace ids) as OTLP/JSON to this URL, e.g. "
                            "http://collector:4318/v1/traces (batched in the background; dropped, never waited "
                            "for, when the collector is slow)"},
      {"insecure", "", "allow a non-loopback --host without TLS and --token-file", true},
      {"introspection", "", "with --token-file or TLS: still serve gRPC reflection and channelz (off by default "
                            "there: they describe the server to anyone)", true},
      {"metrics-host", "", "address of /metrics (plain HTTP; default --host, but 127.0.0.1 when a non-loopback "
                           "--host has tokens or TLS)"},
      {"peer-token-file", "", "bearer token this process sends to its --worker and --fp-shard processes (started with "
                             "--token-file)"},
      {"peer-tls-ca", "", "CA (PEM) of the --worker / --fp-shard processes' certificates: TLS to them (they run "
                          "--tls-cert); default plaintext"},
      {"peer-tls-cert", "", "client certificate (PEM) for mutual TLS to the peers"},
      {"peer-tls-key", "", "client key (PEM) for mutual TLS to the peers"},
      {"peer-tls-server-name", "", "check every peer's certificate against this name instead of the dialed host "
                                   "(one certificate for a whole StatefulSet)"},
      {"drain-timeout-s", "30", "on SIGTERM, seconds in-flight calls get before being cancelled"},
      {"device", "auto", "compute backend: auto, cpu or cuda"},
      {"services", "", absl::StrCat("comma-separated services to host (default all: ",
                                    absl::StrJoin(ModuleNames(Modules()), ","), ")")},
      {"gallery-dir", "", "the fingerprint gallery 'default' (durable; default: GALLERIES_ROOT/default, else a "
                          "temporary one, lost at exit)"},
      {"galleries-root", "", "named fingerprint galleries live in ROOT/<name>/ (requests name one in 'gallery'; "
                             "admins CreateGallery; token file lines grant them with galleries=...)"},
      {"atlas-dir", "", "where the som service keeps its atlases (default <first data root>/atlases)"},
      {"role", "all", "all (services + scheduler + in-process worker), scheduler (jobs only, on --worker processes) "
                      "or worker (services + WorkerService for a scheduler)"},
      {"state-dir", "", "job results and the default job database (default <first data root>/state)"},
      {"store", "", "job database: sqlite:PATH (default <state dir>/jobs.db) or postgresql://... for replicas"},
      {"worker", "", "a worker process (tessera serve --role worker) as HOST:PORT or HOST:PORT*SLOTS", false, true},
      {"fp-shard", "", "role scheduler: a fingerprint gallery shard (a FingerprintService, e.g. a worker, with its "
                       "own --gallery-dir) as HOST:PORT; repeat, always in the same order: the scheduler then "
                       "serves FingerprintService over them (ids hashed to shards, searches fanned out and merged)",
       false, true},
      {"local-slots", "1", "jobs the in-process worker runs at once"},
      {"max-queued", "256", "queued jobs (all priorities) beyond which Submit answers RESOURCE_EXHAUSTED"},
      {"max-queued-per-principal", "64", "one principal's queued jobs beyond which its Submit answers RESOURCE_EXHAUSTED"},
      {"results-max-bytes", "0", "finished jobs' result files beyond which Submit answers RESOURCE_EXHAUSTED (after "
                                 "deleting expired ones; 0: no budget, --job-retention alone bounds them)"},
      {"job-retention", "168h", "finished jobs' results (files and stored result) are deleted this long after the job "
                                "ended; the job stays listed as a tombstone (0: keep forever)"},
      {"scheduler-name", "scheduler", "this scheduler's name (its in-process worker is NAME/local)"},
      {"fp-max-batch-size", "64", "fingerprint Search calls run together as one batch, at most (1: no batching)"},
      {"fp-max-queue-delay-ms", "0", "how long the oldest queued Search waits for others to join its batch"},
      {"fp-max-queued-searches", "1024", "queued Search calls beyond which RESOURCE_EXHAUSTED (with a retry hint)"},
      {"fp-min-quality", "0", "fingerprint images of lower quality (0-100) are refused with FAILED_PRECONDITION, "
                              "unless a request sets its own minimum (0: none)"},
  };
}

absl::StatusOr<ServerOptions> OptionsFromArgs(const Args& args) {
  ServerOptions o;
  o.host = args.Get("host");
  TESSERA_ASSIGN_OR_RETURN(o.grpc_port, args.GetInt("grpc-port"));
  TESSERA_ASSIGN_OR_RETURN(o.metrics_port, args.GetInt("metrics-port"));
  TESSERA_ASSIGN_OR_RETURN(int message_mb, args.GetInt("max-message-mb"));
  TESSERA_ASSIGN_OR_RETURN(int volume_mb, args.GetInt("max-volume-mb"));
  TESSERA_ASSIGN_OR_RETURN(int drain_s, args.GetInt("drain-timeout-s"));
  if (message_mb <= 0 || message_mb > 2047) {
    return absl::InvalidArgumentError("--max-message-mb must be between 1 and 2047");
  }
  o.max_receive_message_bytes = o.max_send_message_bytes = message_mb << 20;
  o.max_volume_bytes = int64_t{volume_mb} << 20;
  o.drain_timeout = absl::Seconds(drain_s);
  o.tls_cert = args.Get("tls-cert");
  o.tls_key = args.Get("tls-key");
  o.tls_client_ca = args.Get("tls-client-ca");
  o.token_file = args.Get("token-file");
  o.audit_log = args.Get("audit-log");
  o.audit_key_file = args.Get("audit-key-file");
  if (!o.audit_key_file.empty() && o.audit_log.empty()) {
    return absl::InvalidArgumentError("--audit-key-file keys the --audit-log: give both");
  }
  TESSERA_ASSIGN_OR_RETURN(int audit_mb, args.GetInt("audit-max-mb"));
  if (audit_mb <= 0) return absl::InvalidArgumentError("--audit-max-mb must be positive");
  o.audit_max_bytes = int64_t{audit_mb} << 20;
  o.otlp_endpoint = args.Get("otlp-endpoint");
  o.insecure = args.GetBool("insecure");
  o.introspection_in_secure_mode = args.GetBool("introspection");
  o.metrics_host = args.Get("metrics-host");
  o.device = args.Get("device");
  o.data_roots = args.GetAll("data-root");
  o.atlas_dir = args.Get("atlas-dir");
  if (o.data_roots.empty()) {
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof(cwd)) != nullptr) o.data_roots.push_back(cwd);
  }
  TESSERA_RETURN_IF_ERROR(o.Validate());
  return o;
}

}  // namespace

int RunServe(int argc, char** argv) {
  const std::vector<FlagSpec> specs = ServeFlags();
  auto args = Args::Parse(specs, argc, argv, 1);
  if (!args.ok() || args->help()) {
    if (!args.ok()) std::fprintf(stderr, "tessera serve: %s\n", std::string(args.status().message()).c_str());
    std::fprintf(args.ok() ? stdout : stderr, "usage: tessera serve [flags]\n%s", FlagsHelp(specs).c_str());
    return args.ok() ? 0 : 2;
  }
  auto options = OptionsFromArgs(*args);
  if (!options.ok()) {
    std::fprintf(stderr, "tessera serve: %s\n", std::string(options.status().message()).c_str());
    return 2;
  }
  const std::vector<std::string> names = absl::StrSplit(args->Get("services"), ',', absl::SkipEmpty());
  FingerprintServiceOptions fingerprint_options;
  fingerprint_options.gallery_dir = args->Get("gallery-dir");
  fingerprint_options.galleries_root = args->Get("galleries-root");
  {
    auto batch = args->GetInt("fp-max-batch-size");
    auto delay_ms = args->GetInt("fp-max-queue-delay-ms");
    auto queued = args->GetInt("fp-max-queued-searches");
    auto min_quality = args->GetInt("fp-min-quality");
    if (!batch.ok() || !delay_ms.ok() || !queued.ok() || *delay_ms < 0) {
      std::fprintf(stderr, "tessera serve: --fp-max-batch-size, --fp-max-queue-delay-ms and "
                           "--fp-max-queued-searches take non-negative integers\n");
      return 2;
    }
    if (!min_quality.ok() || *min_quality < 0 || *min_quality > 100) {
      std::fprintf(stderr, "tessera serve: --fp-min-quality takes 0-100\n");
      return 2;
    }
    fingerprint_options.image.min_quality = *min_quality;
    fingerprint_options.max_batch_size = *batch;
    fingerprint_options.max_queue_delay = absl::Milliseconds(*delay_ms);
    fingerprint_options.max_queued_searches = *queued;
  }
  SchedulerHostOptions scheduler_options;
  scheduler_options.role = args->Get("role");
  scheduler_options.state_dir = args->Get("state-dir");
  scheduler_options.store = args->Get("store");
  scheduler_options.workers = args->GetAll("worker");
  scheduler_options.name = args->Get("scheduler-name");
  if (!args->Get("peer-token-file").empty()) {
    auto token = ReadClientTokenFile(args->Get("peer-token-file"));
    if (!token.ok()) {
      std::fprintf(stderr, "tessera serve: %s\n", std::string(token.status().message()).c_str());
      return 2;
    }
    scheduler_options.peer.token = *token;
  }
  {
    auto peer_credentials = ClientCredentials(
        {args->Get("peer-tls-ca"), args->Get("peer-tls-cert"), args->Get("peer-tls-key")});
    if (!peer_credentials.ok()) {
      std::fprintf(stderr, "tessera serve: --peer-tls-*: %s\n", std::string(peer_credentials.status().message()).c_str());
      return 2;
    }
    if (!args->Get("peer-tls-ca").empty()) scheduler_options.peer.credentials = *peer_credentials;
    scheduler_options.peer.server_name = args->Get("peer-tls-server-name");
    if (!scheduler_options.peer.server_name.empty() && args->Get("peer-tls-ca").empty()) {
      std::fprintf(stderr, "tessera serve: --peer-tls-server-name needs --peer-tls-ca\n");
      return 2;
    }
  }
  auto slots = args->GetInt("local-slots");
  auto max_queued = args->GetInt("max-queued");
  auto max_queued_per_principal = args->GetInt("max-queued-per-principal");
  if (!slots.ok() || !max_queued.ok() || *max_queued < 0 || !max_queued_per_principal.ok() ||
      *max_queued_per_principal < 0) {
    std::fprintf(stderr,
                 "tessera serve: --local-slots, --max-queued and --max-queued-per-principal take non-negative "
                 "integers\n");
    return 2;
  }
  scheduler_options.local_slots = *slots;
  scheduler_options.max_queued = *max_queued;
  scheduler_options.max_queued_per_principal = *max_queued_per_principal;
  int64_t results_max_bytes = 0;  // 64-bit: budgets pass 2 GiB
  if (!absl::SimpleAtoi(args->Get("results-max-bytes"), &results_max_bytes) || results_max_bytes < 0) {
    std::fprintf(stderr, "tessera serve: --results-max-bytes takes a non-negative number of bytes\n");
    return 2;
  }
  scheduler_options.results_max_bytes = results_max_bytes;
  if (!absl::ParseDuration(args->Get("job-retention"), &scheduler_options.job_retention) ||
      scheduler_options.job_retention < absl::ZeroDuration()) {
    std::fprintf(stderr, "tessera serve: --job-retention takes a duration such as 168h, 30m or 0 (keep forever)\n");
    return 2;
  }
  const std::vector<std::string> fp_shards = args->GetAll("fp-shard");
  if (!fp_shards.empty() && scheduler_options.role != "scheduler") {
    std::fprintf(stderr, "tessera serve: --fp-shard needs --role scheduler (the other roles host a gallery)\n");
    return 2;
  }
  // The scheduler role hosts no compute services: its workers do (with
  // --fp-shard it fronts their galleries as one FingerprintService).
  auto services = scheduler_options.role == "scheduler"
                      ? absl::StatusOr<HostedServices>(HostedServices())
                      : CreateHostedServices(Modules(), ModuleOptions{*options, fingerprint_options}, names);
  if (!services.ok()) {
    std::fprintf(stderr, "tessera serve: %s\n", std::string(services.status().message()).c_str());
    return services.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  if (!fp_shards.empty()) {
    absl::Status routed =
        AttachFingerprintRouter(*services, *options, fp_shards, scheduler_options.peer, fingerprint_options.image);
    if (!routed.ok()) {
      std::fprintf(stderr, "tessera serve: %s\n", std::string(routed.message()).c_str());
      return 2;
    }
    TESSERA_LOG(INFO) << "FingerprintService over " << fp_shards.size()
                      << " gallery shards: " << absl::StrJoin(fp_shards, ", ");
  }
  auto scheduler = CreateHostedScheduler(scheduler_options, *options, *services);
  if (!scheduler.ok()) {
    std::fprintf(stderr, "tessera serve: %s\n", std::string(scheduler.status().message()).c_str());
    return scheduler.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  auto http_port_flag = args->GetInt("http-port");
  if (!http_port_flag.ok() || *http_port_flag < -1 || *http_port_flag > 65535) {
    std::fprintf(stderr, "tessera serve: --http-port takes 0-65535 (0 picks a free port) or -1 (no gateway)\n");
    return 2;
  }
  ServiceHost::InstallShutdownSignalHandlers();
  // Issue 35: every role has an audit log (when configured) and the metrics
  // registry, so every role hosts OperatorService (not a job module).
  OperatorServiceImpl operator_service(options->audit_log, ProcessRegistry());
  ServiceHost host(*options);
  services->AddTo(host);
  scheduler->AddTo(host);
  host.AddService(&operator_service);
  auto ports = host.Start();
  if (!ports.ok()) {
    std::fprintf(stderr, "tessera serve: %s\n", std::string(ports.status().message()).c_str());
    return 1;
  }
  // The HTTP/JSON gateway calls this process's gRPC server in-process, so it starts after it
  // (the same --host: the gRPC server has already applied the non-loopback rule to it).
  std::unique_ptr<gateway::HttpGateway> http;
  int http_port = -1;
  if (*http_port_flag >= 0) {
    http = std::make_unique<gateway::HttpGateway>(gateway::HttpGatewayOptions::For(*options, *http_port_flag),
                                                  host.InProcessChannel(), host.service_names());
    auto bound = http->Start();
    if (!bound.ok()) {
      std::fprintf(stderr, "tessera serve: --http-port: %s\n", std::string(bound.status().message()).c_str());
      return 1;
    }
    http_port = *bound;
  }
  // Machine-readable first lines: scripts and tests read the chosen ports here.
  std::printf("grpc_port=%d\nmetrics_port=%d\n", ports->grpc_port, ports->metrics_port);
  if (http != nullptr) std::printf("http_port=%d\n", http_port);
  std::fflush(stdout);
  TESSERA_LOG(INFO) << "serving on " << options->host << ":" << ports->grpc_port
                    << (options->tls_cert.empty() ? " (plaintext)" : " (TLS)") << ", metrics on port "
                    << ports->metrics_port << ", backend " << DeviceRegistry::Get().Describe();
  if (http != nullptr) {
    TESSERA_LOG(INFO) << "HTTP/JSON gateway on " << options->host << ":" << http_port
                      << (options->tls_cert.empty() ? " (plaintext)" : " (HTTPS)");
  }
  int signal = host.WaitForShutdownSignal();
  // Drained: the gRPC calls behind the gateway are over; close its listener and connections.
  if (http != nullptr) http->Stop();
  TESSERA_LOG(INFO) << "shutdown " << (signal ? absl::StrCat("on signal ", signal) : std::string("requested"))
                    << "; drained";
  host.Wait();
  return 0;
}

}  // namespace tessera::cli
