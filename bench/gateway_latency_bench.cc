// The HTTP/JSON gateway's overhead on a fingerprint search: one server (a
// ServiceHost with the FingerprintService and, on the same host, the gateway of
// `tessera serve --http-port`), one synthetic gallery, the same latent probes
// searched over gRPC (a generated stub, its own connection) and over HTTP
// (POST /rpc/tessera.v1.FingerprintService/Search, JSON with the template in
// base64, a keep-alive connection), alternating call by call so drift hits both
// alike. Prints p50 / p99 latency of each and the HTTP - gRPC difference (the
// goal: p50 within 1 ms).
//
//   gateway_latency_bench [--gallery=2000] [--calls=2000] [--device=cpu] [--data=DIR] [--seed=S]
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "bench/bench_util.h"
#include "bench/fingerprint_bases.h"
#include "common/parallel.h"
#include "services/fingerprint/eval/latent_eval.h"
#include "services/fingerprint/eval/synthetic_gallery.h"
#include "services/fingerprint/fingerprint_service.h"
#include "services/fingerprint/service_testing.h"
#include "services/gateway/http_gateway.h"
#include "services/server/service_host.h"
#include "tessera/v1/fingerprint.grpc.pb.h"

ABSL_FLAG(int64_t, gallery, 2000, "synthetic templates in the gallery");
ABSL_FLAG(int, calls, 2000, "Search calls per protocol (after 100 warm-up calls each)");
ABSL_FLAG(std::string, device, "cpu", "search backend: auto, cpu or cuda");
ABSL_FLAG(std::string, data, "", "FVC2002 data directory for the base templates (default: the bench's search path)");
ABSL_FLAG(uint64_t, seed, 7, "gallery and latent seed");

namespace tessera {
namespace fingerprint {
namespace {

using bench::Clock;
using testing::XytRecord;

int Main() {
  const int64_t gallery_size = absl::GetFlag(FLAGS_gallery);
  const int calls = absl::GetFlag(FLAGS_calls);
  ServerOptions server;
  server.grpc_port = 0;
  server.metrics_port = -1;
  server.device = absl::GetFlag(FLAGS_device);
  FingerprintServiceOptions fp;
  fp.device = server.device;
  fp.metrics_registry = std::make_shared<prometheus::Registry>();
  auto service = FingerprintServiceImpl::Create(server, fp);
  if (!service.ok()) {
    std::fprintf(stderr, "service: %s\n", service.status().ToString().c_str());
    return 1;
  }
  // The gallery: synthetic templates from the bench's bases, enrolled in one batch.
  std::vector<BaseTemplate> bases = LoadBenchBases(absl::GetFlag(FLAGS_data), absl::GetFlag(FLAGS_seed));
  SyntheticGalleryOptions so;
  so.seed = absl::GetFlag(FLAGS_seed);
  so.size = gallery_size;
  auto synth = SyntheticGallery::Create(bases, so);
  if (!synth.ok()) {
    std::fprintf(stderr, "gallery: %s\n", synth.status().ToString().c_str());
    return 1;
  }
  std::vector<EnrollItem> items(gallery_size);
  for (int64_t i = 0; i < gallery_size; ++i) {
    items[i] = {absl::StrCat("s", i), XytRecord(synth->Minutiae(i)), TemplateFormat::kXyt, 0};
  }
  auto enrolled = (*service)->gallery().EnrollBatch(items);
  if (!enrolled.ok()) {
    std::fprintf(stderr, "enroll: %s\n", enrolled.status().ToString().c_str());
    return 1;
  }
  for (const absl::Status& s : *enrolled) {
    if (!s.ok()) {
      std::fprintf(stderr, "enroll: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  // Probes: latent crops (12-30 minutiae), the same sequence for both protocols.
  std::vector<std::string> latents;
  SplitMix64 rng(absl::GetFlag(FLAGS_seed) + 1);
  for (int i = 0; i < 64; ++i) {
    const BaseTemplate& b = bases[(static_cast<size_t>(i) * 37 + 3) % bases.size()];
    latents.push_back(XytRecord(CropLatent(b.points, LatentCropParams(), rng)));
  }

  ServiceHost host(server);
  host.AddService(service->get());
  auto ports = host.Start();
  if (!ports.ok()) {
    std::fprintf(stderr, "server: %s\n", ports.status().ToString().c_str());
    return 1;
  }
  gateway::HttpGateway http_gateway(gateway::HttpGatewayOptions::For(server, 0), host.InProcessChannel(),
                                    host.service_names());
  auto http_port = http_gateway.Start();
  if (!http_port.ok()) {
    std::fprintf(stderr, "gateway: %s\n", http_port.status().ToString().c_str());
    return 1;
  }
  auto stub = v1::FingerprintService::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", ports->grpc_port), grpc::InsecureChannelCredentials()));
  httplib::Client client("127.0.0.1", *http_port);
  client.set_keep_alive(true);
  client.set_tcp_nodelay(true);

  std::vector<double> grpc_ms, http_ms;
  int errors = 0;
  for (int i = -100; i < calls; ++i) {
    const std::string& probe = latents[static_cast<size_t>((i + 100) % static_cast<int>(latents.size()))];
    v1::SearchRequest request;
    request.mutable_probe()->set_data(probe);
    request.mutable_probe()->set_format(v1::TEMPLATE_FORMAT_XYT);
    request.set_top_k(10);
    const std::string json = nlohmann::json{{"probe", {{"data", absl::Base64Escape(probe)}, {"format", "TEMPLATE_FORMAT_XYT"}}},
                                            {"topK", 10}}
                                 .dump();
    for (int protocol = 0; protocol < 2; ++protocol) {
      const bool http_first = (i & 1) != 0;  // alternate which goes first
      const bool use_http = (protocol == 0) == http_first;
      const auto t0 = Clock::now();
      bool ok;
      if (use_http) {
        auto r = client.Post("/rpc/tessera.v1.FingerprintService/Search", json, "application/json");
        ok = r && r->status == 200;
      } else {
        grpc::ClientContext context;
        v1::SearchResponse response;
        ok = stub->Search(&context, request, &response).ok();
      }
      const double ms = bench::SecondsSince(t0) * 1e3;
      if (!ok) ++errors;
      if (i >= 0) (use_http ? http_ms : grpc_ms).push_back(ms);
    }
  }
  const double g50 = bench::Median(grpc_ms), g99 = bench::Percentile(grpc_ms, 0.99);
  const double h50 = bench::Median(http_ms), h99 = bench::Percentile(http_ms, 0.99);
  std::printf("gallery %lld templates, %d Search calls per protocol, device %s, %d errors\n",
              static_cast<long long>(gallery_size), calls, server.device.c_str(), errors);
  std::printf("%-6s %9s %9s\n", "", "p50 ms", "p99 ms");
  std::printf("%-6s %9.3f %9.3f\n", "gRPC", g50, g99);
  std::printf("%-6s %9.3f %9.3f\n", "HTTP", h50, h99);
  std::printf("HTTP - gRPC: p50 %+.3f ms, p99 %+.3f ms (goal: p50 within 1 ms: %s)\n", h50 - g50, h99 - g99,
              h50 - g50 <= 1.0 ? "met" : "NOT met");
  http_gateway.Stop();
  host.Drain();
  return errors == 0 ? 0 : 1;
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tessera::fingerprint::Main();
}
