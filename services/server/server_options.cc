#include "services/server/server_options.h"

#include "absl/strings/str_cat.h"

namespace tessera {

absl::Status ServerOptions::Validate() const {
  if (host.empty()) return absl::InvalidArgumentError("host is empty (use 127.0.0.1, 0.0.0.0 or ::)");
  if (grpc_port < 0 || grpc_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("grpc port ", grpc_port, " out of range 0..65535"));
  }
  if (metrics_port < -1 || metrics_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics port ", metrics_port, " out of range 0..65535 (-1 disables metrics)"));
  }
  if (metrics_port > 0 && metrics_port == grpc_port) {
    return absl::InvalidArgumentError(absl::StrCat("grpc and metrics ports are both ", grpc_port));
  }
  if (max_receive_message_bytes <= 0 || max_send_message_bytes <= 0) {
    return absl::InvalidArgumentError("max message sizes must be positive");
  }
  if (tls_cert.empty() != tls_key.empty()) {
    return absl::InvalidArgumentError("TLS needs both a certificate and a private key (tls_cert and tls_key)");
  }
  if (!tls_client_ca.empty() && tls_cert.empty()) {
    return absl::InvalidArgumentError("tls_client_ca (mutual TLS) needs tls_cert and tls_key too");
  }
  if (drain_timeout < absl::ZeroDuration() || drain_grace < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("drain durations must not be negative");
  }
  for (const std::string& root : data_roots) {
    if (root.empty()) return absl::InvalidArgumentError("empty data root");
  }
  if (max_volume_bytes <= 0) return absl::InvalidArgumentError("max_volume_bytes must be positive");
  if (device != "auto" && device != "cpu" && device != "cuda" && device != "gpu") {
    return absl::InvalidArgumentError(absl::StrCat("unknown device '", device, "': expected auto, cpu or cuda"));
  }
  if (audit_max_bytes <= 0) return absl::InvalidArgumentError("audit_max_bytes must be positive");
  return absl::OkStatus();
}

}  // namespace tessera
