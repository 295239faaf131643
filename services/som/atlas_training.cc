#include "services/som/atlas_training.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"

namespace tessera {
namespace som {
namespace {

// Shares of the pipeline's progress: epochs take it to 0.95, saving to 1.
constexpr double kEpochsShare = 0.95;
constexpr double kSaveStart = 0.96;

absl::Status Continue(const AtlasTrainingCallbacks& callbacks) {
  return callbacks.check_continue ? callbacks.check_continue() : absl::OkStatus();
}

void Report(const AtlasTrainingCallbacks& callbacks, AtlasTrainingProgress progress) {
  if (callbacks.progress) callbacks.progress(progress);
}

// The atlas at `directory`, new or (options.replace) replacing one there;
// *created: a new directory was made.
absl::Status Save(const Atlas& atlas, const AtlasTrainingOptions& options, bool* created) {
  std::error_code ec;
  *created = !(options.replace && std::filesystem::exists(options.directory, ec));
  return *created ? SaveNewAtlas(atlas, options.directory) : SaveAtlas(atlas, options.directory);
}

}  // namespace

absl::StatusOr<AtlasTrainingSummary> TrainAndSaveAtlas(const AtlasTrainingInput& input,
                                                       const AtlasTrainingOptions& options,
                                                       const AtlasTrainingCallbacks& callbacks) {
  if (options.directory.empty()) return absl::InvalidArgumentError("TrainAndSaveAtlas: no atlas directory given");
  if (!std::isfinite(options.holdout_fraction) || options.holdout_fraction < 0 || options.holdout_fraction >= 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("holdout fraction ", options.holdout_fraction, " must be in [0, 1)"));
  }
  std::error_code ec;
  if (!options.replace && std::filesystem::exists(options.directory, ec)) {  // refused before the work
    return absl::AlreadyExistsError(absl::StrCat("'", options.directory, "' already exists"));
  }
  TESSERA_RETURN_IF_ERROR(Continue(callbacks));
  AtlasTrainingProgress progress;
  progress.stage = "input";
  progress.message = input.corpus != nullptr ? "using the corpus in memory"
                                             : absl::StrCat("reading the corpus '", input.files.corpus, "'");
  Report(callbacks, progress);
  std::shared_ptr<const StoredCorpus> corpus = input.corpus;
  if (corpus == nullptr) {
    TESSERA_ASSIGN_OR_RETURN(corpus, ReadCorpusFiles(input.files));
  }
  const SparseBinaryMatrix& all = corpus->matrix;
  TrainOptions train_options = options.train;
  TESSERA_RETURN_IF_ERROR(CheckHoldout(all.rows(), options.holdout_fraction));
  if (options.max_codebook_bytes > 0) {
    TESSERA_RETURN_IF_ERROR(
        CheckCodebookSize(train_options.grid, all.cols(), train_options.weight_type, options.max_codebook_bytes));
  }
  TESSERA_RETURN_IF_ERROR(Continue(callbacks));

  // The held-out rows are measured on the trained map, never trained on.
  const RowSplit split =
      options.holdout_fraction > 0 ? SplitRows(all.rows(), options.holdout_fraction, train_options.seed) : RowSplit();
  const bool holdout = !split.held_out.empty();
  const SparseBinaryMatrix train_rows = holdout ? SelectRows(all, split.train) : SparseBinaryMatrix();
  const SparseBinaryMatrix& train = holdout ? train_rows : all;
  progress.stage = "init";
  progress.documents = all.rows();
  progress.features = all.cols();
  progress.nonzeros = all.nnz();
  progress.train_documents = train.rows();
  progress.held_out_documents = static_cast<int64_t>(split.held_out.size());
  progress.max_epochs = train_options.max_epochs;
  progress.message =
      absl::StrCat(InitMethodName(train_options.init), " initialisation of a ", GridToString(train_options.grid),
                   " map on ", train.rows(), " documents (", split.held_out.size(), " held out), ",
                   BackendName(train_options.backend), ", at most ", train_options.max_epochs, " epochs");
  Report(callbacks, progress);

  absl::Status stopped;  // why training was asked to stop
  train_options.should_stop = [&] {
    stopped = Continue(callbacks);
    return !stopped.ok();
  };
  train_options.progress = [&](const EpochReport& r) {
    AtlasTrainingProgress p = progress;
    p.stage = "epoch";
    p.epoch = r;
    p.fraction = kEpochsShare * (r.epoch + 1) / std::max(1, train_options.max_epochs);  // epochs are at most
    p.message = absl::StrFormat("epoch %d/%d: radius %.3g, QE %.6g, TE %.4f, %.3f s", r.epoch + 1,
                                train_options.max_epochs, r.radius, r.qe, r.topographic_error, r.seconds);
    Report(callbacks, p);
  };
  absl::StatusOr<TrainResult> trained = TrainSom(train, train_options);
  if (!trained.ok()) return stopped.ok() ? trained.status() : stopped;
  train_options.progress = nullptr;
  train_options.should_stop = nullptr;
  TESSERA_RETURN_IF_ERROR(Continue(callbacks));

  progress.stage = "save";
  progress.fraction = kSaveStart;
  progress.message = absl::StrCat("assigning documents to cells and saving the atlas in '", options.directory, "'");
  Report(callbacks, progress);
  AtlasTrainingSummary summary;
  summary.train_seconds = trained->total_seconds;
  TESSERA_ASSIGN_OR_RETURN(Projection assigned, ProjectDocuments(trained->model, train, train_options.backend,
                                                                 train_options.gpu_ordinal));
  QualityMetrics held_out;
  if (holdout) {
    TESSERA_ASSIGN_OR_RETURN(Projection p, ProjectDocuments(trained->model, SelectRows(all, split.held_out),
                                                            train_options.backend, train_options.gpu_ordinal));
    held_out = p.quality;
  }
  // "d<row>" numbers rows of the whole corpus, so ids stay stable across splits.
  std::vector<std::string> ids(static_cast<size_t>(train.rows()));
  for (int64_t k = 0; k < train.rows(); ++k) ids[k] = corpus->DocumentId(holdout ? split.train[k] : k);
  TESSERA_ASSIGN_OR_RETURN(Atlas atlas, MakeAtlas(*std::move(trained), std::move(assigned.bmu),
                                                  corpus->feature_names, std::move(ids), train_options));
  atlas.held_out_quality = held_out;
  atlas.job_id = options.job_id;
  TESSERA_RETURN_IF_ERROR(Continue(callbacks));

  bool created = false;
  TESSERA_RETURN_IF_ERROR(Annotate(Save(atlas, options, &created), "saving the atlas"));
  // Serve what a restart would load.
  absl::StatusOr<Atlas> saved = LoadAtlas(options.directory);
  if (!saved.ok()) {
    std::error_code ec;
    if (created) std::filesystem::remove_all(options.directory, ec);
    return Annotate(saved.status(), absl::StrCat("reading back the atlas in '", options.directory, "'"));
  }
  summary.atlas = *std::move(saved);
  summary.directory = options.directory;
  summary.documents = all.rows();
  summary.features = all.cols();
  summary.nonzeros = all.nnz();
  summary.held_out_documents = static_cast<int64_t>(split.held_out.size());
  return summary;
}

absl::Status CheckCodebookSize(const GridShape& grid, int64_t features, WeightType type, int64_t max_bytes) {
  const int64_t nodes = grid.nodes();
  const int64_t per_feature = nodes * WeightBytes(type);
  if (features > 0 && per_feature > 0 && features > max_bytes / per_feature) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a ", grid.width, "x", grid.height, " map over ", features, " features needs a codebook of ",
        static_cast<double>(per_feature) * static_cast<double>(features), " bytes, more than this server's limit of ",
        max_bytes, " (use a smaller map or fewer features)"));
  }
  return absl::OkStatus();
}

absl::Status CheckHoldout(int64_t rows, double fraction) {
  if (rows <= 0) return absl::InvalidArgumentError("the corpus has no documents");
  const int64_t held = static_cast<int64_t>(std::floor(static_cast<double>(rows) * fraction));
  if (rows - held < 1) {
    return absl::InvalidArgumentError(absl::StrCat("holdout_fraction ", fraction, " leaves no training documents of ",
                                                   rows));
  }
  return absl::OkStatus();
}

}  // namespace som
}  // namespace tessera
