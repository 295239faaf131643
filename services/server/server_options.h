// Options of the Tessera server process (`tessera serve`), shared by the
// ServiceHost and the services it hosts.
#ifndef TESSERA_SERVICES_SERVER_SERVER_OPTIONS_H_
#define TESSERA_SERVICES_SERVER_SERVER_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace tessera {

struct ServerOptions {
  // Address to bind both servers to. Loopback by default; "0.0.0.0" or "::"
  // to serve other machines (then prefer TLS).
  std::string host = "127.0.0.1";
  // 0 picks a free port (ServiceHost::Start reports the one chosen).
  int grpc_port = 50051;
  // Prometheus /metrics over HTTP; 0 picks a free port, -1 disables it.
  int metrics_port = 9464;

  // Largest single gRPC message accepted / sent. A larger incoming message
  // fails its call with RESOURCE_EXHAUSTED. Large volumes go as ArrayChunk streams.
  int max_receive_message_bytes = 64 << 20;
  int max_send_message_bytes = 64 << 20;

  // TLS when cert and key (PEM files) are given; mutual TLS, requiring and
  // verifying a client certificate signed by this CA, when tls_client_ca is too.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;

  // On Drain (SIGTERM): readiness turns NOT_SERVING, then after drain_grace
  // (time for load balancers to notice) new calls are refused and calls in
  // flight get up to drain_timeout to finish before they are cancelled.
  absl::Duration drain_timeout = absl::Seconds(30);
  absl::Duration drain_grace = absl::ZeroDuration();

  // Directories whose files clients may name in requests (e.g.
  // VolumeService.DescribeFile); symlinks are resolved before the check.
  // Empty: no server-side file access.
  std::vector<std::string> data_roots;
  // Largest array a request may make the server hold (decoded bytes).
  int64_t max_volume_bytes = int64_t{4} << 30;
  // Compute backend for the services: "auto", "cpu" or "cuda".
  std::string device = "auto";
  // Where SomAtlasService keeps its atlases (`tessera serve --atlas-dir`).
  // Empty: "<first data root>/atlases".
  std::string atlas_dir;

  // Bearer tokens (auth.h): when set, every RPC but health/reflection needs
  // "authorization: Bearer TOKEN" and the method's role.
  std::string token_file;
  // Hash-chained audit trail (audit_log.h); rotated into FILE.1, FILE.2, ... at audit_max_bytes.
  std::string audit_log;
  // A secret (>= 32 bytes) the audit chain's links are keyed with (HMAC-SHA256; audit_log.h).
  std::string audit_key_file;
  int64_t audit_max_bytes = int64_t{64} << 20;
  // Where each call's span goes as OTLP/JSON (otlp_exporter.h), e.g.
  // http://collector:4318/v1/traces; "" exports nothing (traceparent still flows).
  std::string otlp_endpoint;
  // Allow a non-loopback host without TLS and a token file (refused otherwise).
  bool insecure = false;

  // Server reflection and channelz describe the server to anyone who asks
  // (reflection is also exempt from tokens, for tools): in secure mode
  // (SecureMode()) they are served only with this set.
  bool introspection_in_secure_mode = false;
  // Where /metrics listens (plain HTTP, no authentication); empty: `host`,
  // except in secure mode on a non-loopback host, where it is 127.0.0.1.
  std::string metrics_host;

  // Tokens or TLS configured: a deployment that guards its data.
  bool SecureMode() const { return !token_file.empty() || !tls_cert.empty(); }

  // INVALID_ARGUMENT naming the first bad field (ports out of range, key
  // without cert, client CA without cert, non-positive limits, ...).
  absl::Status Validate() const;
};

}  // namespace tessera

#endif  // TESSERA_SERVICES_SERVER_SERVER_OPTIONS_H_
