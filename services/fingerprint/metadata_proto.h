// tessera.v1.TemplateMetadata and the search filter fields <-> the gallery's
// TemplateMetadata / TemplateFilter (store/template_metadata.h), with the
// checks every front end shares.
#ifndef TESSERA_SERVICES_FINGERPRINT_METADATA_PROTO_H_
#define TESSERA_SERVICES_FINGERPRINT_METADATA_PROTO_H_

#include <google/protobuf/repeated_field.h>

#include "absl/status/statusor.h"
#include "services/fingerprint/search/match_explain.h"
#include "services/fingerprint/store/template_metadata.h"
#include "tessera/v1/fingerprint.pb.h"

namespace tessera {
namespace fingerprint {

// Dates in YYYYMMDD become YYYY-MM-DD, attributes are sorted; then
// ValidateTemplateMetadata. INVALID_ARGUMENT messages start with "metadata: ".
absl::StatusOr<TemplateMetadata> MetadataFromProto(const v1::TemplateMetadata& m);
void MetadataToProto(const TemplateMetadata& m, v1::TemplateMetadata* out);

// A match explanation (charting) as the API returns it.
void ExplanationToProto(const MatchExplanation& e, v1::MatchExplanation* out);

// INVALID_ARGUMENT naming finger_positions / impression_types for a code out of range.
absl::StatusOr<TemplateFilter> FilterFromProto(const google::protobuf::RepeatedField<int32_t>& finger_positions,
                                               const google::protobuf::RepeatedField<int32_t>& impression_types);

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_METADATA_PROTO_H_
