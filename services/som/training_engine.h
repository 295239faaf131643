// The scheduler's SOM training engine (services/jobs/engine.h): kind
// "som.train", spec tessera.v1.CreateAtlasRequest, result
// tessera.v1.AtlasSummary. It runs the same pipeline as `tessera som train`
// and SomAtlasService's CreateAtlas (atlas_training.h) after the same request
// checks (atlas_request.h), and saves the atlas as "<atlas_dir>/<atlas_id>",
// the directory SomAtlasService serves, so Project/GetCell find it afterwards.
//
// Progress: stages "input", "init", "epoch" (one report per epoch: step,
// fraction, metrics epoch, radius, qe, topographic_error, epoch_seconds),
// "save". Cancellation and the deadline (ctx.CheckContinue()) are checked
// before reading, before every epoch and before saving; a stopped job saves
// nothing. An atlas_id left empty becomes "atlas-<job id>" (AtlasIdForJob),
// the same on every attempt of the job. The job's device-memory peak
// (DeviceMemoryTracker) goes to ctx.SetPeakDeviceBytes.
//
// Retries: the saved atlas records its job's id (Atlas::job_id, in the
// manifest). An attempt that finds "<atlas_dir>/<atlas_id>" saved by an
// earlier attempt of the same job (which died after saving, before its
// success was recorded) returns that atlas instead of training again; an
// atlas of any other job or of none is ALREADY_EXISTS as usual.
//
// The corpus must be a server path under the data roots: an upload
// (corpus_id) lives in one server's memory and would not survive a restart,
// so it is refused with INVALID_ARGUMENT — unless the engine is given that
// server's CorpusStore (then the job is only as durable as the upload).
// SomAtlasService writes the uploads its CreateAtlas calls name as files
// (<state dir>/som-uploads), which its TrainingEngineOptions(state_dir) add
// to the data roots.
//
//   som::TrainingEngineOptions options = som_service->TrainingEngineOptions(state_dir);
//   TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const jobs::Engine> engine, som::NewTrainingEngine(options));
//   TESSERA_RETURN_IF_ERROR(engines.Add(engine));
#ifndef TESSERA_SERVICES_SOM_TRAINING_ENGINE_H_
#define TESSERA_SERVICES_SOM_TRAINING_ENGINE_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "services/jobs/engine.h"
#include "services/som/atlas.h"
#include "services/som/atlas_request.h"
#include "services/som/corpus_store.h"

namespace tessera {
namespace som {

inline constexpr char kTrainingEngineKind[] = "som.train";

struct TrainingEngineOptions {
  // Data roots, atlas directory, default device and size limits, as
  // SomAtlasService applies them (SomAtlasServiceImpl::TrainingEngineOptions).
  AtlasRequestLimits limits;
  // Optional: a service's uploads, so jobs may name a corpus_id. Must outlive
  // the engine.
  CorpusStore* uploads = nullptr;
  // Optional: called with every atlas the engine saved (as loaded back), e.g.
  // to have a running SomAtlasService serve it at once
  // (SomAtlasServiceImpl::AdoptAtlas); without it the service finds the atlas
  // on its directory when first asked for it.
  std::function<void(const std::string& atlas_id, Atlas atlas)> on_saved;
};

// The atlas id of a job whose request leaves atlas_id empty: "atlas-<job id>",
// characters outside [A-Za-z0-9._-] as '-', at most 128 characters.
std::string AtlasIdForJob(const std::string& job_id);

// INVALID_ARGUMENT for unusable limits (max_nodes < 1, negative sizes);
// NOT_FOUND / INVALID_ARGUMENT for data roots that are not directories.
absl::StatusOr<std::shared_ptr<const jobs::Engine>> NewTrainingEngine(TrainingEngineOptions options);

}  // namespace som
}  // namespace tessera

#endif  // TESSERA_SERVICES_SOM_TRAINING_ENGINE_H_
