// `tessera demo`: starts every service in this process on loopback, drives
// them through their real gRPC API, prints what happens and writes outputs
// (summary.json, previews, metrics) under ./demo-out/.
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli/args.h"
#include "cli/demo_context.h"
#include "cli/hosted_services.h"
#include "cli/scheduler_host.h"
#include "cli/verbs.h"
#include "common/device.h"
#include "common/grpc_status.h"
#include "common/json.h"
#include "common/status.h"
#include "tessera/v1/scheduler.grpc.pb.h"

namespace tessera::cli {
namespace {

constexpr char kDefaultVolume[] = "/usr/share/mricron/templates/ch2.nii.gz";

std::vector<FlagSpec> DemoFlags() {
  return {
      {"out", "demo-out", "output directory"},
      {"volume", kDefaultVolume, "NIfTI volume the steps use (Colin27 T1 from Debian's mricron-data)"},
      {"device", "auto", "compute backend: auto, cpu or cuda"},
      {"som-corpus", "genes-go",
       "SOM step corpus: genes-go (Entrez genes x GO terms; downloaded from Debian and built on first use, "
       "cached) or synthetic"},
  };
}

std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

// The jobs this run submitted (created since `since_ms`), oldest first, as
// SchedulerService.List shows them to any client: the registration and the
// SOM training ran as scheduler jobs. Printed and added to the summary.
absl::Status SummarizeSchedulerJobs(DemoContext& ctx, int64_t since_ms) {
  auto stub = v1::SchedulerService::NewStub(ctx.channel);
  std::vector<v1::JobInfo> jobs;
  v1::ListJobsRequest request;
  request.set_page_size(100);
  for (bool older = false; !older;) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::ListJobsResponse response;
    TESSERA_RETURN_IF_ERROR(
        Annotate(FromGrpcStatus(stub->List(&context, request, &response)), "SchedulerService.List"));
    for (const v1::JobInfo& job : response.jobs()) {  // newest first
      if (job.created_unix_ms() < since_ms) {
        older = true;  // an earlier demo's, in the same state directory
        break;
      }
      jobs.push_back(job);
    }
    if (response.next_page_token().empty()) break;
    request.set_page_token(response.next_page_token());
  }
  std::reverse(jobs.begin(), jobs.end());
  std::printf("[scheduler] %zu job(s) of this run, listed through SchedulerService:\n", jobs.size());
  std::string json;
  for (const v1::JobInfo& job : jobs) {
    std::string state = v1::JobState_Name(job.state());
    if (state.rfind("JOB_STATE_", 0) == 0) state = state.substr(10);
    std::printf("  %-13s %-9s attempts %d  queued %7.2f s  compute %7.2f s  %s\n", job.kind().c_str(),
                state.c_str(), job.attempts(), job.queue_seconds(), job.compute_seconds(), job.job_id().c_str());
    absl::StrAppend(&json, json.empty() ? "" : ", ", "{\"job_id\": ", JsonQuote(job.job_id()),
                    ", \"kind\": ", JsonQuote(job.kind()), ", \"state\": ", JsonQuote(state),
                    ", \"attempts\": ", job.attempts(), ", \"queue_seconds\": ", job.queue_seconds(),
                    ", \"compute_seconds\": ", job.compute_seconds(), "}");
  }
  ctx.summary.emplace_back("scheduler", absl::StrCat("{\"jobs\": [", json, "]}"));
  return absl::OkStatus();
}

int Fail(const char* what, const absl::Status& status) {
  std::fprintf(stderr, "tessera demo: %s: %s\n", what, status.ToString().c_str());
  return 1;
}

}  // namespace

absl::Status DemoContext::EnsureDir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::PermissionDeniedError(absl::StrCat("cannot create ", dir, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

int RunDemo(int argc, char** argv) {
  const std::vector<FlagSpec> specs = DemoFlags();
  auto args = Args::Parse(specs, argc, argv, 1);
  if (!args.ok() || args->help()) {
    if (!args.ok()) std::fprintf(stderr, "tessera demo: %s\n", std::string(args.status().message()).c_str());
    std::fprintf(args.ok() ? stdout : stderr, "usage: tessera demo [flags]\n%s", FlagsHelp(specs).c_str());
    return args.ok() ? 0 : 2;
  }
  const absl::Time start = absl::Now();
  DemoContext ctx;
  ctx.out_dir = args->Get("out");
  ctx.volume_path = args->Get("volume");
  ctx.device = args->Get("device");
  ctx.som_corpus = args->Get("som-corpus");
  if (ctx.som_corpus != "genes-go" && ctx.som_corpus != "synthetic") {
    std::fprintf(stderr, "tessera demo: --som-corpus must be genes-go or synthetic, got '%s'\n",
                 ctx.som_corpus.c_str());
    return 2;
  }
  if (absl::Status s = DemoContext::EnsureDir(ctx.out_dir); !s.ok()) return Fail("creating the output directory", s);

  ServerOptions options;
  options.host = "127.0.0.1";
  options.grpc_port = 0;
  options.metrics_port = 0;
  options.device = ctx.device;
  options.drain_timeout = absl::Seconds(5);
  options.data_roots = {DirName(ctx.volume_path), ctx.out_dir};
  options.atlas_dir = ctx.OutPath("atlases");  // the SOM step's atlas persists here
  FingerprintServiceOptions fingerprint_options;
  fingerprint_options.gallery_dir = ctx.OutPath("fingerprint-gallery");  // durable; the step re-enrolls with replace
  auto services = CreateHostedServices(Modules(), ModuleOptions{options, fingerprint_options});
  if (!services.ok()) return Fail("creating the services", services.status());
  // As `tessera serve` (role all): the services' jobs run through the
  // scheduler, with its state under the output directory.
  SchedulerHostOptions scheduler_options;
  scheduler_options.state_dir = ctx.OutPath("state");
  auto scheduler = CreateHostedScheduler(scheduler_options, options, *services);
  if (!scheduler.ok()) return Fail("starting the scheduler", scheduler.status());
  ServiceHost host(options);
  services->AddTo(host);
  scheduler->AddTo(host);
  auto ports = host.Start();
  if (!ports.ok()) return Fail("starting the server", ports.status());
  ctx.ports = *ports;
  std::printf("tessera demo: all services on 127.0.0.1:%d (gRPC), metrics on :%d, backend %s\n",
              ports->grpc_port, ports->metrics_port, DeviceRegistry::Get().Describe().c_str());
  ctx.channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", ports->grpc_port), grpc::InsecureChannelCredentials());

  struct Step {
    const char* name;
    absl::Status (*run)(DemoContext&);
  };
  // Health first; each module's step in the module list's order; metrics last
  // so it counts them all.
  std::vector<Step> steps = {{"health", DemoHealthStep}};
  for (const ModuleEntry& module : Modules()) {
    if (module.demo_step != nullptr) steps.push_back({module.name, module.demo_step});
  }
  steps.push_back({"metrics", DemoMetricsStep});
  for (const Step& step : steps) {
    absl::Status status = step.run(ctx);
    if (!status.ok()) {
      host.Drain();
      return Fail(step.name, status);
    }
  }
  if (absl::Status status = SummarizeSchedulerJobs(ctx, absl::ToUnixMillis(start)); !status.ok()) {
    host.Drain();
    return Fail("scheduler", status);
  }

  host.Drain();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  ctx.summary.emplace_back("backend", JsonQuote(DeviceRegistry::Get().Describe()));
  ctx.summary.emplace_back("seconds", absl::StrCat(seconds));
  const std::string summary_path = ctx.OutPath("summary.json");
  {
    std::ofstream out(summary_path);
    out << "{\n";
    for (size_t i = 0; i < ctx.summary.size(); ++i) {
      out << "  " << JsonQuote(ctx.summary[i].first) << ": " << ctx.summary[i].second
          << (i + 1 < ctx.summary.size() ? ",\n" : "\n");
    }
    out << "}\n";
    if (!out) return Fail("writing summary.json", absl::InternalError(summary_path));
  }
  std::printf("tessera demo: done in %.1f s; outputs in %s/ (summary.json, *_preview.png, recon_*.png, metrics.txt, registration/)\n",
              seconds, ctx.out_dir.c_str());
  return 0;
}

}  // namespace tessera::cli
