// FingerprintService requests turned into searcher input, with the checks
// every front end shares: the gRPC service (fingerprint_service.h) and the
// "fingerprint.search" job engine (search_engine.h) accept and reject the
// same requests with the same statuses.
#ifndef TESSERA_SERVICES_FINGERPRINT_SEARCH_REQUEST_H_
#define TESSERA_SERVICES_FINGERPRINT_SEARCH_REQUEST_H_

#include <cstdint>
#include <string>
#include <vector>

#include <google/protobuf/repeated_field.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/fingerprint/mcc.h"
#include "services/fingerprint/store/gallery_store.h"
#include "services/fingerprint/search/searcher.h"
#include "services/fingerprint/formats/template_io.h"
#include "tessera/v1/fingerprint.pb.h"

namespace tessera {
namespace fingerprint {

struct ParsedTemplate {
  TemplateFormat format = TemplateFormat::kUnknown;
  std::vector<MinutiaPoint> minutiae;
};

// Parses `bytes` as `format` (kUnknown: detect) and takes finger view
// `view`. INVALID_ARGUMENT with the parser's message for a malformed or
// truncated record (DATA_LOSS from the parsers becomes INVALID_ARGUMENT:
// the client sent it), for a missing view, or for a template without
// minutiae or that the matcher cannot take.
absl::StatusOr<ParsedTemplate> ParseProbeOrTemplate(absl::string_view bytes, TemplateFormat format, int view = 0);

// INVALID_ARGUMENT for a value outside the enum.
absl::StatusOr<TemplateFormat> TemplateFormatFromProto(v1::TemplateFormat format);

struct SearchLimits {
  int max_top_k = 1000;
  int max_probes = 1024;                                 // per call
  int64_t max_template_bytes = kMaxGalleryTemplateBytes;  // larger: RESOURCE_EXHAUSTED
};

// A request template: RESOURCE_EXHAUSTED beyond max_template_bytes, else as
// ParseProbeOrTemplate; messages start with `what` ("probe 3").
absl::StatusOr<ParsedTemplate> ParseRequestTemplate(const v1::FingerprintTemplate& t, absl::string_view what,
                                                    int64_t max_template_bytes);

struct ParsedSearch {
  std::vector<std::vector<MinutiaPoint>> probes;
  int top_k = 10;
  std::string matcher;  // "" (the server's default) or a SearcherMatchers() name
};

// top_k 0 means 10; INVALID_ARGUMENT for top_k outside 1..max_top_k, an
// unknown matcher or a bad probe (named by index when there are several);
// RESOURCE_EXHAUSTED for more than max_probes probes.
absl::StatusOr<ParsedSearch> ParseSearch(const google::protobuf::RepeatedPtrField<v1::FingerprintTemplate>& probes,
                                         int top_k, const std::string& matcher, const SearchLimits& limits);
absl::StatusOr<ParsedSearch> ParseSearchRequest(const v1::SearchRequest& request, const SearchLimits& limits);
absl::StatusOr<ParsedSearch> ParseSearchBatchRequest(const v1::SearchBatchRequest& request, const SearchLimits& limits);

// Response pieces.
void SetTiming(const SearchStats& stats, double total_ms, v1::SearchTiming* timing);
void AddCandidates(const std::vector<SearchCandidate>& candidates,
                   google::protobuf::RepeatedPtrField<v1::Candidate>* out);

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_SEARCH_REQUEST_H_
