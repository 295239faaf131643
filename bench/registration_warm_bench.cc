// A registration job run several times in one process: the first run pays
// what a cold `tessera register` pays (CUDA context, module loading), the
// later ones are what a running registration service pays per job (its
// context and kernels stay warm between jobs). Same engine and request as the
// CLI and the service (services/registration/registration_engine.h), so the
// timing lines it prints are those a job's log carries (issue 37 item 6).
//
//   registration_warm_bench --fixed=F --moving=M [--fixed-labels=FL --moving-labels=ML]
//       [--metric=mi] [--device=cuda] [--reps=4] --out=DIR
//
// Per run: the engine's wall time, Register's own seconds (the summary's
// "seconds"), Dice after, and the run's "timing" log lines.
#include <cstdio>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_util.h"
#include "tessera/v1/registration.pb.h"
#include "services/jobs/engine.h"
#include "services/registration/registration_engine.h"

namespace {

// The value of the first "--name=value" argument, else `fallback`.
const char* Flag(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i < argc; ++i) {
    if (const char* v = tessera::bench::FlagValue(argv[i], name)) return v;
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tessera;
  const std::string fixed = Flag(argc, argv, "--fixed", ""), moving = Flag(argc, argv, "--moving", "");
  const std::string out = Flag(argc, argv, "--out", "");
  const int reps = std::atoi(Flag(argc, argv, "--reps", "4"));
  if (fixed.empty() || moving.empty() || out.empty() || reps < 1) {
    std::fprintf(stderr, "usage: registration_warm_bench --fixed=F --moving=M [--fixed-labels=FL --moving-labels=ML] "
                         "[--metric=mi] [--device=cuda] [--reps=4] --out=DIR\n");
    return 2;
  }
  v1::RegisterRequest request;
  request.mutable_fixed()->set_path(std::filesystem::absolute(fixed).string());
  request.mutable_moving()->set_path(std::filesystem::absolute(moving).string());
  for (const auto& [flag, field] : {std::pair{"--fixed-labels", request.mutable_fixed_labels()},
                                    std::pair{"--moving-labels", request.mutable_moving_labels()}}) {
    const std::string path = Flag(argc, argv, flag, "");
    if (!path.empty()) field->set_path(std::filesystem::absolute(path).string());
  }
  request.mutable_options()->set_metric(Flag(argc, argv, "--metric", "mi"));
  request.mutable_options()->set_device(Flag(argc, argv, "--device", "cuda"));
  auto engine = registration::RegistrationEngine::Create({"/"}, int64_t{1} << 40, "auto");
  if (!engine.ok()) {
    std::fprintf(stderr, "%s\n", engine.status().ToString().c_str());
    return 1;
  }
  google::protobuf::Any spec;
  spec.PackFrom(request);
  std::atomic<bool> never{false};
  for (int rep = 0; rep < reps; ++rep) {
    const std::string dir = out + "/run" + std::to_string(rep);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    jobs::EngineContext context("warm" + std::to_string(rep), dir, &never, absl::InfiniteFuture(),
                                [](const jobs::JobProgress&) {});
    const absl::Time t0 = absl::Now();
    absl::StatusOr<jobs::EngineOutput> output = (*engine)->Run(spec, context);
    const double wall = absl::ToDoubleSeconds(absl::Now() - t0);
    v1::RegistrationResult result;
    if (!output.ok() || !output->result.UnpackTo(&result)) {
      std::fprintf(stderr, "run %d: %s\n", rep, output.ok() ? "no RegistrationResult" : output.status().ToString().c_str());
      return 1;
    }
    const nlohmann::json summary = nlohmann::json::parse(result.summary_json());
    std::printf("run %d (%s): job %.3f s, Register %.3f s, dice %.6f\n", rep, rep == 0 ? "cold" : "warm", wall,
                summary.value("seconds", 0.0), summary["dice_after"].is_number() ? summary["dice_after"].get<double>() : -1.0);
    for (const auto& line : summary["log"]) {
      const std::string s = line.get<std::string>();
      if (s.find("timing") != std::string::npos) std::printf("    %s\n", s.c_str());
    }
    std::fflush(stdout);
  }
  return 0;
}
