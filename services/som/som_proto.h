// Conversions at the SomAtlasService edge (protos/tessera/v1/som.proto):
// request options -> validated training options, and atlases / quality ->
// their proto summaries. Exposed for tests.
#ifndef TESSERA_SERVICES_SOM_SOM_PROTO_H_
#define TESSERA_SERVICES_SOM_SOM_PROTO_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/som/quality.h"
#include "services/som/atlas.h"
#include "services/som/trainer.h"
#include "tessera/v1/som.pb.h"

namespace tessera {
namespace som {

// What a CreateAtlas request asks for, validated.
struct AtlasJobOptions {
  TrainOptions train;            // no callbacks set
  double holdout_fraction = 0;   // in [0, 1)
  std::string device;            // as requested or the server default ("auto", "cpu", "cuda")
};

// Proto options -> training options (defaults for unset fields).
// INVALID_ARGUMENT naming the field: width/height missing or not positive, a
// map of more than `max_nodes` cells, epochs or radii out of range, unknown
// init/weight type/device, holdout NaN or outside [0, 1);
// FAILED_PRECONDITION for "cuda" without a GPU.
absl::StatusOr<AtlasJobOptions> ToAtlasJobOptions(const v1::AtlasOptions& proto, const std::string& default_device,
                                                  int64_t max_nodes);

// 1-128 characters of [A-Za-z0-9._-], not starting with '.' (it names a
// directory). INVALID_ARGUMENT otherwise.
absl::Status ValidateAtlasId(absl::string_view id);

void ToQualityProto(const QualityMetrics& quality, v1::Quality* out);
QualityMetrics FromQualityProto(const v1::Quality& quality);

// The summary of `atlas` (held-out quality from atlas.held_out_quality);
// history only when `with_history`.
v1::AtlasSummary ToAtlasSummary(const Atlas& atlas, const std::string& id, const std::string& directory,
                                bool with_history);

}  // namespace som
}  // namespace tessera

#endif  // TESSERA_SERVICES_SOM_SOM_PROTO_H_
