// A tessera.v1.CreateAtlasRequest checked against what a server allows and
// turned into the training pipeline's input (atlas_training.h). The one set
// of request checks, shared by SomAtlasService's CreateAtlas and the
// scheduler's "som.train" engine, so a bad request fails its submit the same
// way on both.
#ifndef TESSERA_SERVICES_SOM_ATLAS_REQUEST_H_
#define TESSERA_SERVICES_SOM_ATLAS_REQUEST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/som/atlas_training.h"
#include "services/som/corpus_store.h"
#include "services/som/som_proto.h"
#include "tessera/v1/som.pb.h"

namespace tessera {
namespace som {

// What a server lets a request ask for.
struct AtlasRequestLimits {
  std::vector<std::string> data_roots;  // canonical (CanonicalDataRoots): corpus files must lie under one
  std::string atlas_dir;                // one sub-directory per atlas; empty: no atlas can be created
  std::string default_device = "auto";  // for requests that name none
  int64_t max_nodes = int64_t{1} << 20;  // largest map (cells)
  int64_t max_corpus_bytes = 0;         // largest corpus file and codebook; 0: no limit
};

struct AtlasJobRequest {
  std::string atlas_id;     // as requested (validated); empty: the caller names the atlas
  AtlasJobOptions options;  // validated training options
  AtlasTrainingInput input; // the upload, or the resolved corpus files
  std::string description;  // "upload corpus-..." or the corpus path, for logs
};

// Checks `request`: options (ToAtlasJobOptions), the atlas id
// (ValidateAtlasId; ALREADY_EXISTS when its directory exists), the corpus:
// an upload from `uploads` (NOT_FOUND when unknown or expired; its holdout
// and codebook size checked at once), or a path and its names/ids files
// resolved under the data roots (NOT_FOUND, PERMISSION_DENIED,
// RESOURCE_EXHAUSTED past max_corpus_bytes), index_base 0 or 1.
// FAILED_PRECONDITION without an atlas directory. `uploads` may be null (a
// durable job cannot name an upload, which lives in one server's memory):
// then a corpus_id is INVALID_ARGUMENT asking for a server path.
absl::StatusOr<AtlasJobRequest> PrepareAtlasJob(const v1::CreateAtlasRequest& request,
                                                const AtlasRequestLimits& limits, CorpusStore* uploads);

// ALREADY_EXISTS when "<atlas_dir>/<atlas_id>" exists.
absl::Status CheckAtlasIdFree(const std::string& atlas_dir, const std::string& atlas_id);

// The pipeline's options for training `job` as `atlas_id` into
// "<atlas_dir>/<atlas_id>" (never replacing an atlas there).
AtlasTrainingOptions TrainingOptionsFor(const AtlasJobRequest& job, const AtlasRequestLimits& limits,
                                        const std::string& atlas_id);

}  // namespace som
}  // namespace tessera

#endif  // TESSERA_SERVICES_SOM_ATLAS_REQUEST_H_
