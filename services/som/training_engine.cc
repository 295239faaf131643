#include "services/som/training_engine.h"

#include <filesystem>
#include <optional>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/status.h"
#include "services/common/data_roots.h"
#include "services/jobs/typed_engine.h"
#include "services/som/atlas_job_progress.h"
#include "services/som/atlas_training.h"
#include "services/som/som_proto.h"
#include "tessera/v1/som.pb.h"

namespace tessera {
namespace som {
std::string AtlasIdForJob(const std::string& job_id) {
  std::string id = absl::StrCat("atlas-", job_id);
  for (char& c : id) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '-';
  }
  if (id.size() > 128) id.resize(128);
  return id;
}

namespace {

// A job's request between its check at submit and its run. Preparing it
// reads the server's files (the corpus, an upload), which may change in
// between, so PrepareAtlasJob runs where it is used, not in the plan.
struct TrainingPlan {
  v1::CreateAtlasRequest request;
};

class TrainingEngine final : public jobs::TypedEngine<v1::CreateAtlasRequest, TrainingPlan> {
 public:
  explicit TrainingEngine(TrainingEngineOptions options) : options_(std::move(options)) {}

  std::string kind() const override { return kTrainingEngineKind; }

 protected:
  absl::StatusOr<TrainingPlan> MakePlan(const v1::CreateAtlasRequest& request) const override {
    return TrainingPlan{request};
  }

  absl::Status CheckPlan(const TrainingPlan& plan) const override {
    return PrepareAtlasJob(plan.request, options_.limits, options_.uploads).status();
  }

  jobs::ResourceNeeds NeedsOf(const TrainingPlan& plan) const override {
    jobs::ResourceNeeds needs;
    const std::string& device =
        plan.request.options().device().empty() ? options_.limits.default_device : plan.request.options().device();
    needs.needs_gpu = device == "cuda" || device == "gpu";
    return needs;
  }

  absl::StatusOr<jobs::EngineOutput> RunPlan(const TrainingPlan& plan, jobs::EngineContext& ctx) const override {
    const v1::CreateAtlasRequest& request = plan.request;
    std::optional<jobs::EngineOutput> adopted = SavedByAnEarlierAttempt(request, ctx);
    if (adopted.has_value()) return *std::move(adopted);
    TESSERA_ASSIGN_OR_RETURN(AtlasJobRequest job, PrepareAtlasJob(request, options_.limits, options_.uploads));
    const std::string atlas_id = job.atlas_id.empty() ? AtlasIdForJob(ctx.job_id()) : job.atlas_id;
    TESSERA_RETURN_IF_ERROR(ValidateAtlasId(atlas_id));
    TESSERA_RETURN_IF_ERROR(CheckAtlasIdFree(options_.limits.atlas_dir, atlas_id));
    AtlasTrainingCallbacks callbacks;
    callbacks.progress = [&ctx](const AtlasTrainingProgress& p) { ctx.Report(ToJobProgress(p)); };
    callbacks.check_continue = [&ctx] { return ctx.CheckContinue(); };
    // The job's own device memory, whatever else runs in this process.
    auto memory = std::make_shared<DeviceMemoryTracker>();
    absl::StatusOr<AtlasTrainingSummary> trained;
    {
      ScopedDeviceMemoryCharge charge(memory);
      AtlasTrainingOptions training = TrainingOptionsFor(job, options_.limits, atlas_id);
      training.job_id = ctx.job_id();  // in the manifest: a retry of this job adopts what it saved
      trained = TrainAndSaveAtlas(job.input, training, callbacks);
    }
    ctx.SetPeakDeviceBytes(static_cast<int64_t>(memory->peak_bytes()));
    TESSERA_ASSIGN_OR_RETURN(AtlasTrainingSummary saved, std::move(trained));
    jobs::EngineOutput out;
    out.result.PackFrom(ToAtlasSummary(saved.atlas, atlas_id, saved.directory, /*with_history=*/true));
    if (options_.on_saved) options_.on_saved(atlas_id, std::move(saved.atlas));
    return out;
  }

 private:
  // An attempt that saved its atlas and then died (its process killed before
  // the success was recorded) leaves "<atlas_dir>/<atlas_id>" with this job's
  // id in the manifest: the retry takes that atlas as its result instead of
  // failing ALREADY_EXISTS on its own atlas. nullopt otherwise (no atlas
  // there, one of another job or of none: the usual checks then apply).
  std::optional<jobs::EngineOutput> SavedByAnEarlierAttempt(const v1::CreateAtlasRequest& request,
                                                           jobs::EngineContext& ctx) const {
    if (ctx.job_id().empty() || options_.limits.atlas_dir.empty()) return std::nullopt;
    const std::string atlas_id = request.atlas_id().empty() ? AtlasIdForJob(ctx.job_id()) : request.atlas_id();
    if (!ValidateAtlasId(atlas_id).ok()) return std::nullopt;
    const std::string directory = (std::filesystem::path(options_.limits.atlas_dir) / atlas_id).string();
    std::error_code ec;
    if (!std::filesystem::exists(std::filesystem::path(directory) / "manifest.json", ec)) return std::nullopt;
    absl::StatusOr<Atlas> atlas = LoadAtlas(directory);
    if (!atlas.ok() || atlas->job_id != ctx.job_id()) return std::nullopt;
    AtlasTrainingProgress progress;
    progress.stage = "save";
    progress.message = absl::StrCat("atlas '", atlas_id, "' was saved by an earlier attempt of this job");
    progress.fraction = 1;
    ctx.Report(ToJobProgress(progress));
    jobs::EngineOutput out;
    out.result.PackFrom(ToAtlasSummary(*atlas, atlas_id, directory, /*with_history=*/true));
    if (options_.on_saved) options_.on_saved(atlas_id, *std::move(atlas));
    return out;
  }

  const TrainingEngineOptions options_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<const jobs::Engine>> NewTrainingEngine(TrainingEngineOptions options) {
  AtlasRequestLimits& limits = options.limits;
  if (limits.max_nodes < 1) return absl::InvalidArgumentError("som.train engine: max_nodes must be positive");
  if (limits.max_corpus_bytes < 0) {
    return absl::InvalidArgumentError("som.train engine: max_corpus_bytes must not be negative");
  }
  TESSERA_ASSIGN_OR_RETURN(limits.data_roots, CanonicalDataRoots(limits.data_roots));
  return std::shared_ptr<const jobs::Engine>(std::make_shared<TrainingEngine>(std::move(options)));
}

}  // namespace som
}  // namespace tessera
