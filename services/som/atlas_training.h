// The one SOM training pipeline, shared by `tessera som train`,
// SomAtlasService's CreateAtlas jobs and the scheduler's "som.train" engine:
//
//   read the corpus (unless given in memory) -> split off the held-out rows
//   (seeded) -> TrainSom on the rest -> project the training rows (their
//   cells) and the held-out rows (their quality: QE, TE, dead units) ->
//   save the atlas, held-out quality included, atomically -> load it back.
//
// Plain C++: the caller turns its request into AtlasTrainingInput/Options,
// receives progress through a callback and is asked before every epoch (and
// between the stages) whether to go on.
//
//   AtlasTrainingOptions options;
//   options.train.grid = {32, 32, Topology::kPlanar};
//   options.holdout_fraction = 0.1;
//   options.directory = "/data/atlases/genes";
//   AtlasTrainingCallbacks callbacks;
//   callbacks.progress = [](const AtlasTrainingProgress& p) { ... };
//   callbacks.check_continue = [&] { return job.CheckContinue(); };
//   TESSERA_ASSIGN_OR_RETURN(AtlasTrainingSummary s, TrainAndSaveAtlas(input, options, callbacks));
#ifndef TESSERA_SERVICES_SOM_ATLAS_TRAINING_H_
#define TESSERA_SERVICES_SOM_ATLAS_TRAINING_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/som/atlas.h"
#include "services/som/corpus_files.h"
#include "services/som/trainer.h"

namespace tessera {
namespace som {

// The documents: a corpus in memory (an upload), or else files read when the
// training starts.
struct AtlasTrainingInput {
  std::shared_ptr<const StoredCorpus> corpus;
  CorpusFiles files;
};

struct AtlasTrainingOptions {
  // Map and training. Its progress and should_stop are the pipeline's own
  // (AtlasTrainingCallbacks); any set here are ignored.
  TrainOptions train;
  // floor(rows * fraction) rows, drawn with train.seed, are kept out of
  // training and measured on the trained map. In [0, 1).
  double holdout_fraction = 0;
  // The largest codebook (bytes at the map's weight type); 0: no limit.
  int64_t max_codebook_bytes = 0;
  // Where the atlas goes. New directories appear whole (SaveNewAtlas).
  std::string directory;
  // An existing `directory`: false, ALREADY_EXISTS; true, the atlas there is
  // replaced file by file, manifest last (SaveAtlas).
  bool replace = false;
  // Recorded in the atlas (Atlas::job_id): the scheduler job training it.
  std::string job_id;
};

struct AtlasTrainingProgress {
  std::string stage;    // "input", "init", "epoch", "save"
  std::string message;  // one line for people
  double fraction = 0;  // of the whole pipeline, 0..1
  // From "init" on: the corpus and its split.
  int64_t documents = 0;
  int64_t features = 0;
  int64_t nonzeros = 0;
  int64_t train_documents = 0;
  int64_t held_out_documents = 0;
  // "epoch": the epoch just trained (epoch.epoch is 0-based) of at most max_epochs.
  EpochReport epoch;
  int max_epochs = 0;
};

struct AtlasTrainingCallbacks {
  std::function<void(const AtlasTrainingProgress&)> progress;
  // Asked before reading, before every epoch and before saving; a non-OK
  // status (CANCELLED, DEADLINE_EXCEEDED, ...) stops the pipeline, which
  // returns it and saves nothing.
  std::function<absl::Status()> check_continue;
};

struct AtlasTrainingSummary {
  Atlas atlas;              // as saved, loaded back (what a restart serves)
  std::string directory;
  int64_t documents = 0;    // in the corpus
  int64_t features = 0;
  int64_t nonzeros = 0;
  int64_t held_out_documents = 0;
  double train_seconds = 0; // TrainSom: initialisation, epochs, final pass
};

// Runs the pipeline. Besides the callbacks' own statuses: INVALID_ARGUMENT for
// a corpus that does not fit the options (CheckHoldout, CheckCodebookSize),
// the corpus readers' and TrainSom's errors, ALREADY_EXISTS as above.
absl::StatusOr<AtlasTrainingSummary> TrainAndSaveAtlas(const AtlasTrainingInput& input,
                                                       const AtlasTrainingOptions& options,
                                                       const AtlasTrainingCallbacks& callbacks = {});

// The codebook of `grid` over `features` fits `max_bytes` (INVALID_ARGUMENT
// naming both sizes otherwise).
absl::Status CheckCodebookSize(const GridShape& grid, int64_t features, WeightType type, int64_t max_bytes);

// Held-out rows floor(rows * fraction) leave at least one training row.
absl::Status CheckHoldout(int64_t rows, double fraction);

}  // namespace som
}  // namespace tessera

#endif  // TESSERA_SERVICES_SOM_ATLAS_TRAINING_H_
