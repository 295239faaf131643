// Demo steps of the foundation: health, volume summaries (file and stream),
// a preview PNG, and the Prometheus metrics the calls produced.
#include <grpcpp/client_context.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/demo_context.h"
#include "common/grpc_status.h"
#include "common/json.h"
#include "common/http_get.h"
#include "common/image_preview.h"
#include "common/nifti_io.h"
#include "common/png_io.h"
#include "common/status.h"
#include "services/common/chunked_upload.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tessera/v1/volume.grpc.pb.h"

namespace tessera::cli {
namespace {

void SetDeadline(grpc::ClientContext& context) {
  context.set_deadline(DemoContext::RpcDeadline());
}

std::string ToJson(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

void PrintSummary(const char* label, const v1::VolumeSummary& s) {
  std::printf("  %-14s %s %s, spacing %.3gx%.3gx%.3g mm, orientation %s, %s\n", label,
              absl::StrJoin(s.header().dims(), "x").c_str(),
              v1::DType_Name(s.header().dtype()).c_str() + 6,  // drop "DTYPE_"
              s.header().spacing(0), s.header().spacing(1), s.header().spacing(2), s.orientation().c_str(),
              s.format().c_str());
  std::printf("  %-14s min %.4g  max %.4g  mean %.4g  sd %.4g  non-finite %lld  (stats on %s)\n", "", s.min(),
              s.max(), s.mean(), s.stddev(), static_cast<long long>(s.nonfinite_count()), s.backend().c_str());
}

}  // namespace

absl::Status DemoHealthStep(DemoContext& ctx) {
  auto stub = grpc::health::v1::Health::NewStub(ctx.channel);
  std::string line;
  std::string json = "{";
  for (const char* name : {"", "liveness", "readiness", "tessera.v1.VolumeService"}) {
    grpc::ClientContext context;
    SetDeadline(context);
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(name);
    grpc::health::v1::HealthCheckResponse response;
    TESSERA_RETURN_IF_ERROR(Annotate(FromGrpcStatus(stub->Check(&context, request, &response)),
                                     absl::StrCat("health check '", name, "'")));
    const std::string status = grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status());
    if (response.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
      return absl::UnavailableError(absl::StrCat("health '", name, "' is ", status));
    }
    absl::StrAppend(&line, *name ? name : "(server)", "=", status, "  ");
    absl::StrAppend(&json, json.size() > 1 ? "," : "", JsonQuote(*name ? name : "server"), ":",
                    JsonQuote(status));
  }
  std::printf("[health] %s\n", line.c_str());
  ctx.summary.emplace_back("health", json + "}");
  return absl::OkStatus();
}

absl::Status DemoVolumeStep(DemoContext& ctx) {
  auto stub = v1::VolumeService::NewStub(ctx.channel);
  std::printf("[volume] %s\n", ctx.volume_path.c_str());

  // 1. The server reads the file from its data root.
  v1::VolumeSummary from_file;
  {
    grpc::ClientContext context;
    SetDeadline(context);
    v1::DescribeFileRequest request;
    request.set_path(ctx.volume_path);
    TESSERA_RETURN_IF_ERROR(
        Annotate(FromGrpcStatus(stub->DescribeFile(&context, request, &from_file)), "DescribeFile"));
  }
  PrintSummary("DescribeFile", from_file);

  // 2. The client reads it and streams it up in 1 MiB chunks, as a client
  //    without access to the server's disk would.
  TESSERA_ASSIGN_OR_RETURN(Volume volume, ReadNifti(ctx.volume_path));
  v1::VolumeSummary from_stream;
  int chunks = 0;
  {
    grpc::ClientContext context;
    SetDeadline(context);
    auto writer = stub->DescribeStream(&context, &from_stream);
    const auto* bytes = static_cast<const char*>(volume.data.raw_data());
    const int64_t total = static_cast<int64_t>(volume.data.nbytes());
    constexpr int64_t kChunk = 1 << 20;
    for (int64_t offset = 0; offset < total || chunks == 0; offset += kChunk, ++chunks) {
      v1::ArrayChunk chunk;
      if (offset == 0) *chunk.mutable_header() = VolumeHeaderOf(volume.data, &volume.geometry, volume.description);
      chunk.set_offset(offset);
      chunk.set_data(bytes + offset, std::min(kChunk, total - offset));
      if (!writer->Write(chunk)) break;  // the server ended the call; Finish() says why
    }
    writer->WritesDone();
    TESSERA_RETURN_IF_ERROR(Annotate(FromGrpcStatus(writer->Finish()), "DescribeStream"));
  }
  PrintSummary(absl::StrCat("stream x", chunks).c_str(), from_stream);
  if (from_stream.voxel_count() != from_file.voxel_count() ||
      std::abs(from_stream.mean() - from_file.mean()) > 1e-9 * std::max(1.0, std::abs(from_file.mean()))) {
    return absl::InternalError("the streamed volume's summary differs from the file's");
  }

  // 3. A preview people can look at: sagittal | coronal | axial mid-slices.
  std::vector<Image8> views;
  for (int plane : {0, 1, 2}) {
    SliceOptions options;
    options.axis = plane;
    TESSERA_ASSIGN_OR_RETURN(Image8 view, RenderSlice(volume, options));
    views.push_back(std::move(view));
  }
  TESSERA_ASSIGN_OR_RETURN(Image8 tiled, TileHorizontally(views));
  const std::string png = ctx.OutPath("volume_preview.png");
  TESSERA_RETURN_IF_ERROR(WritePng(tiled, png));
  std::printf("  preview        %s (sagittal | coronal | axial, %dx%d)\n", png.c_str(), tiled.width, tiled.height);

  ctx.summary.emplace_back("volume", ToJson(from_file));
  ctx.summary.emplace_back("volume_stream_chunks", std::to_string(chunks));
  ctx.summary.emplace_back("volume_preview_png", JsonQuote(png));
  return absl::OkStatus();
}

absl::Status DemoMetricsStep(DemoContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(HttpResponse response, HttpGet("127.0.0.1", ctx.ports.metrics_port, "/metrics"));
  if (response.status_code != 200) {
    return absl::UnavailableError(absl::StrCat("/metrics answered HTTP ", response.status_code));
  }
  const std::string path = ctx.OutPath("metrics.txt");
  std::ofstream(path) << response.body;
  // Sum the handled-RPC counters to show the calls above were counted.
  double handled = 0;
  int series = 0;
  for (absl::string_view line : absl::StrSplit(response.body, '\n')) {
    if (!absl::StartsWith(line, "tessera_grpc_server_handled_total{")) continue;
    const size_t space = line.rfind(' ');
    double v = 0;
    if (space != absl::string_view::npos && absl::SimpleAtod(line.substr(space + 1), &v)) {
      handled += v;
      ++series;
    }
  }
  std::printf("[metrics] http://127.0.0.1:%d/metrics: %.0f RPCs counted in %d series; saved to %s\n",
              ctx.ports.metrics_port, handled, series, path.c_str());
  if (handled <= 0) return absl::InternalError("no handled RPCs in /metrics");
  ctx.summary.emplace_back("metrics_rpcs_counted", absl::StrCat(handled));
  return absl::OkStatus();
}

}  // namespace tessera::cli
