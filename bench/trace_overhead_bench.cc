// What W3C trace context costs (issue 35): parsing/formatting a traceparent, and the latency
// of one small unary call over loopback without interceptors, with the trace interceptors
// (server and client), and with the OTLP exporter feeding a local collector.
//   bazel run -c opt //bench:trace_overhead_bench -- [--calls=20000]
#include <httplib.h>

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "bench/bench_util.h"
#include "common/trace_context.h"
#include "services/server/bearer_channel.h"
#include "services/server/otlp_exporter.h"
#include "services/server/trace_interceptor.h"
#include "tessera/v1/scheduler.grpc.pb.h"

namespace tessera {
namespace {

class GetService : public v1::SchedulerService::Service {
 public:
  grpc::Status Get(grpc::ServerContext*, const v1::JobRef* request, v1::JobInfo* response) override {
    response->set_job_id(request->job_id());
    response->set_trace_id(CurrentTraceId());
    return grpc::Status::OK;
  }
};

double MedianCallMicros(bool traced, SpanSink sink, int calls) {
  GetService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  if (traced) {
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
    interceptors.push_back(std::make_unique<TraceInterceptorFactory>(std::move(sink)));
    builder.experimental().SetInterceptorCreators(std::move(interceptors));
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  const std::string target = absl::StrCat("127.0.0.1:", port);
  auto channel = traced ? CreateBearerChannel(target, grpc::InsecureChannelCredentials(), grpc::ChannelArguments(), "")
                        : grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  auto stub = v1::SchedulerService::NewStub(channel);
  v1::JobRef request;
  request.set_job_id("job-1");
  std::vector<double> reps;
  for (int rep = 0; rep < 5; ++rep) {
    const auto start = bench::Clock::now();
    for (int i = 0; i < calls; ++i) {
      grpc::ClientContext context;
      v1::JobInfo response;
      if (!stub->Get(&context, request, &response).ok()) std::abort();
    }
    reps.push_back(bench::MsSince(start) * 1000.0 / calls);
  }
  server->Shutdown();
  return bench::Median(reps);
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  using namespace tessera;
  int calls = 20000;
  for (int i = 1; i < argc; ++i) {
    if (const char* v = bench::FlagValue(argv[i], "--calls")) calls = std::atoi(v);
  }
  {
    const std::string header = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const int n = 1000000;
    size_t sink = 0;
    const auto start = bench::Clock::now();
    for (int i = 0; i < n; ++i) sink += FormatTraceparent(ChildSpan(*ParseTraceparent(header))).size();
    std::printf("parse + new span + format: %.1f ns each (%zu)\n", bench::MsSince(start) * 1e6 / n, sink);
  }
  std::printf("unary call, loopback, median of 5 x %d calls:\n", calls);
  std::printf("  no interceptors:            %.1f us\n", MedianCallMicros(false, nullptr, calls));
  std::printf("  traceparent in and out:     %.1f us\n", MedianCallMicros(true, nullptr, calls));
  std::printf("  + a span sink that discards: %.1f us\n", MedianCallMicros(true, [](ServerSpan) {}, calls));
  httplib::Server collector;
  std::atomic<int64_t> bodies{0};
  collector.Post("/v1/traces", [&](const httplib::Request&, httplib::Response&) { ++bodies; });
  const int collector_port = collector.bind_to_any_port("127.0.0.1");
  std::thread collector_thread([&] { collector.listen_after_bind(); });
  double with_otlp = 0;
  {
    OtlpExporterOptions options;
    options.endpoint = absl::StrCat("http://127.0.0.1:", collector_port, "/v1/traces");
    auto exporter = OtlpExporter::Start(options);
    if (!exporter.ok()) return 1;
    with_otlp = MedianCallMicros(true, (*exporter)->Sink(), calls);
    exporter->reset();
  }
  std::printf("  + OTLP export (local):      %.1f us (%lld POSTs)\n", with_otlp, static_cast<long long>(bodies.load()));
  collector.stop();
  collector_thread.join();
  return 0;
}
