// `tessera demo`: starts every service in this process on loopback, drives
// them through their real gRPC API, prints what happens and writes outputs
// (summary.json, previews, metrics) under ./demo-out/.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli/args.h"
#include "cli/demo_context.h"
#include "cli/hosted_services.h"
#include "cli/scheduler_host.h"
#include "cli/verbs.h"
#include "common/device.h"
#include "common/json.h"

namespace tessera::cli {
namespace {

constexpr char kDefaultVolume[] = "/usr/share/mricron/templates/ch2.nii.gz";

std::vector<FlagSpec> DemoFlags() {
  return {
      {"out", "demo-out", "output directory"},
      {"volume", kDefaultVolume, "NIfTI volume the steps use (Colin27 T1 from Debian's mricron-data)"},
      {"device", "auto", "compute backend: auto, cpu or cuda"},
  };
}

std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
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
  auto services = CreateHostedServices(options, {}, fingerprint_options);
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
  // Later services append their steps here; metrics last so it counts them all.
  const Step steps[] = {
      {"health", DemoHealthStep},
      {"volume", DemoVolumeStep},
      {"registration", DemoRegistrationStep},
      {"som", DemoSomStep},
      {"fingerprint", DemoFingerprintStep},
      {"metrics", DemoMetricsStep},
  };
  for (const Step& step : steps) {
    absl::Status status = step.run(ctx);
    if (!status.ok()) {
      host.Drain();
      return Fail(step.name, status);
    }
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
  std::printf("tessera demo: done in %.1f s; outputs in %s/ (summary.json, *_preview.png, metrics.txt, registration/)\n",
              seconds, ctx.out_dir.c_str());
  return 0;
}

}  // namespace tessera::cli
