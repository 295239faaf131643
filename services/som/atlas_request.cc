#include "services/som/atlas_request.h"

#include <sys/stat.h>

#include <filesystem>
#include <system_error>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "services/common/data_roots.h"

namespace tessera {
namespace som {

absl::Status CheckAtlasIdFree(const std::string& atlas_dir, const std::string& atlas_id) {
  const std::filesystem::path directory = std::filesystem::path(atlas_dir) / atlas_id;
  std::error_code ec;
  if (std::filesystem::exists(directory, ec)) {
    return absl::AlreadyExistsError(absl::StrCat("atlas '", atlas_id, "' already exists on the server ('",
                                                 directory.string(),
                                                 "'); pick another atlas_id, or DeleteAtlas it (or have that "
                                                 "directory removed) first"));
  }
  return absl::OkStatus();
}

absl::StatusOr<AtlasJobRequest> PrepareAtlasJob(const v1::CreateAtlasRequest& request,
                                                const AtlasRequestLimits& limits, CorpusStore* uploads) {
  AtlasJobRequest job;
  TESSERA_ASSIGN_OR_RETURN(job.options,
                           ToAtlasJobOptions(request.options(), limits.default_device, limits.max_nodes));
  if (limits.atlas_dir.empty()) {
    return absl::FailedPreconditionError(
        "this server has no atlas directory to save atlases in (start it with --atlas-dir or --data-root)");
  }
  if (!request.atlas_id().empty()) {
    TESSERA_RETURN_IF_ERROR(ValidateAtlasId(request.atlas_id()));
    TESSERA_RETURN_IF_ERROR(CheckAtlasIdFree(limits.atlas_dir, request.atlas_id()));
    job.atlas_id = request.atlas_id();
  }
  const int64_t max_bytes = limits.max_corpus_bytes;
  const v1::CorpusSource& source = request.corpus();
  const TrainOptions& train = job.options.train;
  switch (source.source_case()) {
    case v1::CorpusSource::kCorpusId: {
      if (uploads == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "corpus_id '", source.corpus_id(),
            "' names an upload, which lives in one server's memory and cannot back a durable job; give the "
            "corpus as a server path (corpus.path) under the data roots instead"));
      }
      if (!source.feature_names_path().empty() || !source.document_ids_path().empty()) {
        return absl::InvalidArgumentError(
            "feature_names_path and document_ids_path go with a corpus path; uploads carry their own names and ids");
      }
      TESSERA_ASSIGN_OR_RETURN(job.input.corpus, uploads->Get(source.corpus_id()));
      // Everything is known now: refuse what cannot train at once.
      TESSERA_RETURN_IF_ERROR(CheckHoldout(job.input.corpus->matrix.rows(), job.options.holdout_fraction));
      if (max_bytes > 0) {
        TESSERA_RETURN_IF_ERROR(
            CheckCodebookSize(train.grid, job.input.corpus->matrix.cols(), train.weight_type, max_bytes));
      }
      job.description = absl::StrCat("upload ", source.corpus_id());
      break;
    }
    case v1::CorpusSource::kPath: {
      CorpusFiles& files = job.input.files;
      absl::StatusOr<std::string> path = ResolveUnderRoots(source.path(), limits.data_roots);
      if (!path.ok()) return Annotate(path.status(), "corpus path");
      struct stat st;
      if (max_bytes > 0 && stat(path->c_str(), &st) == 0 && st.st_size > max_bytes) {
        return absl::ResourceExhaustedError(absl::StrCat("corpus file '", *path, "' has ", st.st_size,
                                                         " bytes, more than this server's limit of ", max_bytes));
      }
      files.corpus = *path;
      for (auto [requested, resolved, what] :
           {std::tuple<const std::string*, std::string*, const char*>{&source.feature_names_path(),
                                                                      &files.feature_names, "feature_names_path"},
            {&source.document_ids_path(), &files.document_ids, "document_ids_path"}}) {
        if (requested->empty()) continue;
        absl::StatusOr<std::string> p = ResolveUnderRoots(*requested, limits.data_roots);
        if (!p.ok()) return Annotate(p.status(), what);
        *resolved = *p;
      }
      if (source.has_index_base()) {
        TESSERA_RETURN_IF_ERROR(CheckIndexBase(source.index_base()));
        files.index_base = source.index_base();
      }
      job.description = files.corpus;
      break;
    }
    default:
      return absl::InvalidArgumentError("corpus: give corpus_id (from UploadCorpus) or a server-side path");
  }
  return job;
}

AtlasTrainingOptions TrainingOptionsFor(const AtlasJobRequest& job, const AtlasRequestLimits& limits,
                                        const std::string& atlas_id) {
  AtlasTrainingOptions options;
  options.train = job.options.train;
  options.holdout_fraction = job.options.holdout_fraction;
  options.max_codebook_bytes = limits.max_corpus_bytes;
  options.directory = (std::filesystem::path(limits.atlas_dir) / atlas_id).string();
  options.replace = false;
  return options;
}

}  // namespace som
}  // namespace tessera
