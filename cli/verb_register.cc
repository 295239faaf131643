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

#include <memory>

#include "absl/strings/str_cat.h"
#include "cli/args.h"
#include "cli/job_specs.h"
#include "cli/verbs.h"
#include "common/device.h"
#include "services/parallel/nccl_rendezvous.h"
#include "services/registration/registration_engine.h"
#include "services/registration/request_run.h"
#include "services/server/bearer_channel.h"

namespace tessera::cli {
namespace {

// The flags of one rank in a group of processes (this verb only: a job sent
// to a server is placed by its scheduler).
std::vector<FlagSpec> ProcessRankFlags() {
  return {
      {"rank", "", "this process's rank in 0..N-1 (with --world-size, --rendezvous, --group; CUDA only)"},
      {"world-size", "", "N processes, one z-slab of the deformable stage each"},
      {"rendezvous", "", "HOST:PORT of a tessera serve (role all or scheduler) where the ranks meet"},
      {"group", "", "the run's group key, the same for every rank (a new one per run)"},
      {"rendezvous-timeout-s", "300", "how long a rank waits for the others to join"},
      {"token-file", "", "bearer token for a rendezvous server started with --token-file"},
      {"tls-ca", "", "CA certificate (PEM) of a TLS rendezvous server"},
  };
}

struct ProcessRank {
  parallel::RendezvousRank who;
  std::string rendezvous;
};

// Null when no process flag is given; INVALID_ARGUMENT naming the bad flag.
absl::StatusOr<std::unique_ptr<ProcessRank>> ParseProcessRank(const Args& args) {
  const bool any = !args.Get("rank").empty() || !args.Get("world-size").empty() || !args.Get("rendezvous").empty() ||
                   !args.Get("group").empty();
  if (!any) return nullptr;
  for (const char* flag : {"rank", "world-size", "rendezvous", "group"}) {
    if (args.Get(flag).empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("register: --", flag, " is missing (--rank, --world-size, --rendezvous, --group go together)"));
    }
  }
  auto out = std::make_unique<ProcessRank>();
  absl::StatusOr<int> rank = args.GetInt("rank"), world = args.GetInt("world-size"),
                      timeout = args.GetInt("rendezvous-timeout-s");
  if (!rank.ok()) return rank.status();
  if (!world.ok()) return world.status();
  if (!timeout.ok()) return timeout.status();
  if (*world < 1) return absl::InvalidArgumentError(absl::StrCat("register: --world-size ", *world, " must be >= 1"));
  if (*rank < 0 || *rank >= *world) {
    return absl::InvalidArgumentError(absl::StrCat("register: --rank ", *rank, " is outside 0..", *world - 1));
  }
  if (*timeout < 1) return absl::InvalidArgumentError("register: --rendezvous-timeout-s must be >= 1");
  out->who = {args.Get("group"), *rank, *world, absl::Seconds(*timeout)};
  out->rendezvous = args.Get("rendezvous");
  return out;
}

// What this process's rank needs of the options: the sharded greedy lean
// stage on the GPU, one shard per process.
absl::Status CheckProcessRankOptions(registration::RegistrationOptions& options) {
  if (options.device == "cpu") {
    return absl::InvalidArgumentError("register: --rank/--world-size run NCCL ranks: --device must be cuda or auto");
  }
  if (!DeviceRegistry::Get().cuda_available()) {
    return absl::FailedPreconditionError(absl::StrCat("register: --rank/--world-size need a GPU: ",
                                                      DeviceRegistry::Get().cuda_unavailable_reason()));
  }
  options.device = "cuda";
  if (options.shards != 1 || !options.gpus.empty()) {
    return absl::InvalidArgumentError("register: --rank/--world-size run one shard per process: drop --shards/--gpus "
                                      "(choose the GPU with CUDA_VISIBLE_DEVICES)");
  }
  if (options.deformable_model != registration::DeformableModel::kGreedy ||
      options.memory_mode != registration::MemoryMode::kLean) {
    return absl::InvalidArgumentError(
        "register: --rank/--world-size shard the greedy lean stage: --deformable-model greedy, --memory-mode lean");
  }
  if (options.device_memory_budget_bytes != 0) {
    return absl::InvalidArgumentError("register: --device-memory-budget (out of core) runs on one process");
  }
  return absl::OkStatus();
}

int Usage(const std::vector<FlagSpec>& specs, FILE* out, int rc) {
  std::fprintf(out, "usage: tessera register --fixed F.nii.gz --moving M.nii.gz --out DIR [flags]\n%s",
               FlagsHelp(specs).c_str());
  return rc;
}

// One rank of a group of processes: the NCCL communicator through the
// rendezvous, then the registration with it (rank 0 writes into out_dir).
int RunProcessRank(const ProcessRank& process, const Args& args, const registration::RegistrationEngine& engine,
                   const v1::RegisterRequest& request, const std::string& out_dir, jobs::EngineContext& context) {
  const auto fail = [&](const absl::Status& status) {
    std::fprintf(stderr, "tessera register (rank %d/%d): %s\n", process.who.rank, process.who.world_size,
                 status.ToString().c_str());
    return status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  };
  absl::StatusOr<registration::RequestSpec> spec = engine.Resolve(request);
  if (!spec.ok()) return fail(spec.status());
  registration::RegistrationOptions options = spec->plan.options;
  if (absl::Status ok = CheckProcessRankOptions(options); !ok.ok()) return fail(ok);
  std::string token;
  if (!args.Get("token-file").empty()) {
    absl::StatusOr<std::string> t = ReadClientTokenFile(args.Get("token-file"));
    if (!t.ok()) return fail(t.status());
    token = *t;
  }
  auto credentials = ClientCredentials({args.Get("tls-ca"), "", ""});
  if (!credentials.ok()) return fail(credentials.status());
  auto channel = CreateBearerChannel(process.rendezvous, *credentials, grpc::ChannelArguments(), token);
  absl::StatusOr<std::unique_ptr<parallel::NcclCommunicator>> comm =
      parallel::CreateNcclCommunicatorByRendezvous(channel, process.who, /*device_ordinal=*/0);
  if (!comm.ok()) return fail(comm.status());
  std::fprintf(stderr, "tessera register: %s, group '%s'\n", (*comm)->Describe().c_str(),
               process.who.group_key.c_str());
  options.process_group = std::shared_ptr<parallel::Communicator>(std::move(*comm));
  absl::StatusOr<registration::RegistrationPlan> plan = registration::PlanRegistration(options);
  if (!plan.ok()) return fail(plan.status());
  spec->plan = *std::move(plan);
  registration::RequestRunContext run;
  run.job_id = "register";
  // Rank 0 writes the outputs; the others compute the same run and write nothing.
  if (process.who.rank == 0) run.work_dir = out_dir;
  run.report = [&context](const jobs::JobProgress& p) { context.Report(p); };
  absl::StatusOr<registration::RequestOutcome> outcome = registration::RunRegistrationRequest(*spec, run);
  if (!outcome.ok()) return fail(outcome.status());
  if (process.who.rank == 0) std::printf("%s\n", outcome->result.summary_json().c_str());
  return 0;
}

}  // namespace

int RunRegister(int argc, char** argv) {
  std::vector<FlagSpec> specs = RegisterFlags();
  for (FlagSpec& f : ProcessRankFlags()) specs.push_back(std::move(f));
  auto args = Args::Parse(specs, argc, argv, 1);
  if (!args.ok()) {
    std::fprintf(stderr, "tessera register: %s\n", std::string(args.status().message()).c_str());
    return Usage(specs, stderr, 2);
  }
  if (args->help()) return Usage(specs, stdout, 0);
  absl::StatusOr<std::unique_ptr<ProcessRank>> process_rank = ParseProcessRank(*args);
  if (!process_rank.ok()) {
    std::fprintf(stderr, "tessera %s\n", std::string(process_rank.status().message()).c_str());
    return Usage(specs, stderr, 2);
  }
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
  if (*process_rank != nullptr) return RunProcessRank(**process_rank, *args, **engine, *request, out_dir, context);
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
