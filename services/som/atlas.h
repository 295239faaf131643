// A SOM atlas: a trained map plus what people query it for — which documents
// landed in which cell, the feature names, how it was trained — persisted in
// a directory so it survives restarts and can be shared.
//
// On disk (one directory per atlas; every file written to "<name>.tmp",
// fsync'ed and renamed, the manifest last, so a crash leaves either the old
// atlas or the new one, never a mix):
//   manifest.json     format version (2), grid (width, height, topology),
//                     features, documents, weight type, "codebook_layout" and
//                     "bmu_layout" (the byte layouts below, in words),
//                     training options, epochs, converged, final quality,
//                     held-out quality (documents kept out of training,
//                     measured on the map; 0 documents without a holdout),
//                     per-epoch history, creation time, the training job's id
//                     (optional: "job_id", only when trained by a job), the
//                     size and SHA-256 of every other file, and last
//                     "manifest_crc32", the CRC-32 of the text before it
//   codebook.f32      feature-major weights, little-endian fp32 (fp16 maps are
//                     stored widened): the weight of feature f at node n is
//                     element [f * nodes + n], nodes = width * height, node n
//                     the cell (n % width, n / width); then a 4-byte CRC-32 of
//                     those bytes
//   bmu.i32           the training documents' BMUs (documents int32) + CRC-32
//   features.txt      one feature name per line (absent: "f<index>")
//   documents.txt     one document id per line (absent: "d<index>")
// Version 1 manifests recorded a CRC-32 of each whole file instead of its
// SHA-256; for the two binary files that is the same constant for every file
// (the CRC of data followed by its own CRC), so it vouched for nothing.
// LoadAtlas still reads version 1 (the trailers and text-file CRCs are
// checked; a warning says the content is not vouched for by the manifest).
// LoadAtlas checks the manifest version, every size against the manifest and
// every checksum, and names the file that is wrong. (A crash in the middle of
// replacing an atlas can leave new data files beside the old manifest; the
// checksums then report DATA_LOSS instead of serving a mix.) SaveNewAtlas
// avoids even that for a new atlas: it writes a hidden staging directory
// beside the target and renames it into place, so the atlas appears whole or
// not at all.
#ifndef TESSERA_SERVICES_SOM_ATLAS_H_
#define TESSERA_SERVICES_SOM_ATLAS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "services/som/trainer.h"

namespace tessera {
namespace som {

struct Atlas {
  SomModel model;                           // weights_f32 always filled after LoadAtlas
  std::vector<int32_t> bmu;                 // per training document
  std::vector<std::string> feature_names;   // model.features entries
  std::vector<std::string> document_ids;    // bmu.size() entries
  TrainOptions options;                     // progress callback not persisted
  std::vector<EpochReport> history;
  int epochs = 0;
  bool converged = false;
  QualityMetrics final_quality;
  QualityMetrics held_out_quality;          // docs = 0 without a holdout
  std::string created;                      // RFC 3339 UTC
  // The scheduler job that trained it ("" when none: `tessera som train`), so
  // a retry of that job recognises the atlas an earlier attempt saved.
  std::string job_id;
  // The format version LoadAtlas read (1: no content checksums in the
  // manifest); SaveAtlas always writes the current version.
  int format_version = 0;

  int64_t nodes() const { return static_cast<int64_t>(model.grid.width) * model.grid.height; }
};

// Builds an atlas from a training result (names may be empty: generated).
// INVALID_ARGUMENT when the sizes disagree.
absl::StatusOr<Atlas> MakeAtlas(TrainResult result, std::vector<int32_t> bmu,
                                std::vector<std::string> feature_names, std::vector<std::string> document_ids,
                                const TrainOptions& options);

// Writes `atlas` into `directory` (created if missing; an existing atlas there
// is replaced atomically file by file, manifest last).
absl::Status SaveAtlas(const Atlas& atlas, absl::string_view directory);

// Writes `atlas` as the new directory `directory` (its parent created if
// missing): saved into a hidden sibling ".<name>.partial-XXXXXX", then renamed
// into place without replacing anything. ALREADY_EXISTS when `directory`
// exists (before or by the rename); the staging directory is removed on any
// error.
absl::Status SaveNewAtlas(const Atlas& atlas, absl::string_view directory);

// Reads an atlas written by SaveAtlas. NOT_FOUND when there is no manifest,
// DATA_LOSS when a file is truncated, missing or its checksum fails,
// INVALID_ARGUMENT for an unknown format version. fp16 maps come back with
// both weights_f16 and weights_f32; sq_norms are recomputed.
absl::StatusOr<Atlas> LoadAtlas(absl::string_view directory);

// Queries on a loaded atlas.
// The documents whose BMU is `node` (indices into bmu / document_ids), ascending,
// by a scan of bmu: the reference the service's CellIndex (cell_index.h) is tested against.
std::vector<int64_t> DocumentsInCell(const Atlas& atlas, int64_t node);
// The node's `k` strongest features (largest weight), strongest first.
struct FeatureWeight {
  int32_t feature = 0;
  float weight = 0;
};
std::vector<FeatureWeight> TopFeatures(const Atlas& atlas, int64_t node, int k);
// Documents per node (the hit map).
std::vector<int64_t> HitCounts(const Atlas& atlas);

}  // namespace som
}  // namespace tessera

#endif  // TESSERA_SERVICES_SOM_ATLAS_H_
