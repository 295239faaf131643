// `tessera register`: registers a moving volume to a fixed one on this
// machine, writes the ANTs-style outputs to --out and prints a JSON summary
// on stdout (progress goes to stderr). It runs the same "registration" engine
// as RegistrationService and the scheduler's workers (`tessera job submit
// register ...` sends the same flags to a server).
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/job_specs.h"
#include "cli/verbs.h"
#include "services/registration/registration_engine.h"

namespace tessera::cli {
namespace {

int Usage(const std::vector<FlagSpec>& specs, FILE* out, int rc) {
  std::fprintf(out, "usage: tessera register --fixed F.nii.gz --moving M.nii.gz --out DIR [flags]\n%s",
               FlagsHelp(specs).c_str());
  return rc;
}

}  // namespace

int RunRegister(int argc, char** argv) {
  const std::vector<FlagSpec> specs = RegisterFlags();
  auto args = Args::Parse(specs, argc, argv, 1);
  if (!args.ok()) {
    std::fprintf(stderr, "tessera register: %s\n", std::string(args.status().message()).c_str());
    return Usage(specs, stderr, 2);
  }
  if (args->help()) return Usage(specs, stdout, 0);
  absl::StatusOr<v1::RegisterRequest> request = RegisterRequestFromArgs(*args, /*absolute=*/true);
  if (!request.ok()) {
    std::fprintf(stderr, "tessera %s\n", std::string(request.status().message()).c_str());
    return Usage(specs, stderr, 2);
  }
  // Locally the output directory is the engine's own work directory.
  const std::string out_dir = request->output_dir();
  request->clear_output_dir();
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) {
    std::fprintf(stderr, "tessera register: cannot create --out '%s': %s\n", out_dir.c_str(), ec.message().c_str());
    return 1;
  }
  // Any local file may be named: the filesystem root is the data root.
  auto engine = registration::RegistrationEngine::Create({"/"}, int64_t{1} << 40, "auto");
  if (!engine.ok()) {
    std::fprintf(stderr, "tessera register: %s\n", engine.status().ToString().c_str());
    return 1;
  }
  google::protobuf::Any spec;
  spec.PackFrom(*request);
  if (absl::Status valid = (*engine)->Validate(spec); !valid.ok()) {
    std::fprintf(stderr, "tessera register: %s\n", std::string(valid.message()).c_str());
    return valid.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  const bool quiet = args->GetBool("quiet");
  std::string last_key;
  std::atomic<bool> never{false};
  jobs::EngineContext context("register", out_dir, &never, absl::InfiniteFuture(), [&](const jobs::JobProgress& p) {
    if (quiet) return;
    const std::string key = p.stage + std::to_string(static_cast<int>(p.metrics.count("scale") ? p.metrics.at("scale") : 0));
    if (key != last_key || p.step % 25 == 0) {
      std::fprintf(stderr, "[%3d%%] %s\n", static_cast<int>(p.fraction * 100), p.message.c_str());
      last_key = key;
    }
  });
  absl::StatusOr<jobs::EngineOutput> output = (*engine)->Run(spec, context);
  if (!output.ok()) {
    std::fprintf(stderr, "tessera register: %s\n", output.status().ToString().c_str());
    return 1;
  }
  v1::RegistrationResult result;
  if (!output->result.UnpackTo(&result)) {
    std::fprintf(stderr, "tessera register: the engine returned no RegistrationResult\n");
    return 1;
  }
  std::printf("%s\n", result.summary_json().c_str());
  return 0;
}

}  // namespace tessera::cli
