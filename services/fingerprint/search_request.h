// FingerprintService requests turned into searcher input, with the checks
// every front end shares: the gRPC service (fingerprint_service.h) and the
// "fingerprint.search" job engine (search_engine.h) accept and reject the
// same requests with the same statuses.
#ifndef TESSERA_SERVICES_FINGERPRINT_SEARCH_REQUEST_H_
#define TESSERA_SERVICES_FINGERPRINT_SEARCH_REQUEST_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <google/protobuf/repeated_field.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/fingerprint/mcc.h"
#include "services/fingerprint/extract/image_extractor.h"
#include "services/fingerprint/extract/image_template.h"
#include "services/fingerprint/store/gallery_store.h"
#include "services/fingerprint/search/searcher.h"
#include "services/fingerprint/formats/template_io.h"
#include "tessera/v1/fingerprint.pb.h"

namespace tessera {
namespace fingerprint {

struct ParsedTemplate {
  TemplateFormat format = TemplateFormat::kUnknown;
  std::vector<MinutiaPoint> minutiae;
  // Extracted from an image: the image's quality (0-100) and the record made
  // from it (what a gallery stores); -1 and empty for a template.
  int quality = -1;
  std::string extracted_record;
};

// Parses `bytes` as `format` (kUnknown: detect) and takes finger view
// `view`. INVALID_ARGUMENT with the parser's message for a malformed or
// truncated record (DATA_LOSS from the parsers becomes INVALID_ARGUMENT:
// the client sent it), for a missing view, or for a template without
// minutiae or that the matcher cannot take.
absl::StatusOr<ParsedTemplate> ParseProbeOrTemplate(absl::string_view bytes, TemplateFormat format, int view = 0);

// The template of an image (image_template.h), parsed as a request template
// is: one path for probes and enrolled images.
absl::StatusOr<ParsedTemplate> ParseImageTemplate(absl::string_view image, const ImageInput& input);
// Many images at once: extracted by `extractor` (its GPU, if it has one) or,
// when null, on all cores; one result per image, in order.
std::vector<absl::StatusOr<ParsedTemplate>> ParseImageTemplates(const std::vector<absl::string_view>& images,
                                                                const std::vector<ImageInput>& inputs,
                                                                const ImageExtractor* extractor);

// INVALID_ARGUMENT for a value outside the enum.
absl::StatusOr<TemplateFormat> TemplateFormatFromProto(v1::TemplateFormat format);

// What the server takes in images.
struct ImageLimits {
  int64_t max_image_bytes = int64_t{32} << 20;  // larger: RESOURCE_EXHAUSTED
  int64_t max_pixels = int64_t{64} << 20;       // declared by the header; larger: INVALID_ARGUMENT
  int min_quality = 0;                          // the default gate (requests may set their own)
};

// A request's image as extractor input: RESOURCE_EXHAUSTED beyond the
// limits, INVALID_ARGUMENT for a field out of range (named); messages start
// with `what`.
absl::StatusOr<ImageInput> ImageInputFromProto(const v1::FingerprintImage& image, absl::string_view what,
                                               const ImageLimits& limits);

struct SearchLimits {
  int max_top_k = 1000;
  int max_probes = 1024;                                 // per call
  int64_t max_template_bytes = kMaxGalleryTemplateBytes;  // larger: RESOURCE_EXHAUSTED
  ImageLimits image;
  // Extracts the image probes of a call together (on its GPU, if any); null:
  // on all cores. Not owned.
  const ImageExtractor* extractor = nullptr;
};

// A request template or image (the template extracted from it):
// RESOURCE_EXHAUSTED beyond the limits, INVALID_ARGUMENT when both or
// neither of data and image are set, else as ParseProbeOrTemplate and
// ParseImageTemplate; messages start with `what` ("probe 3").
absl::StatusOr<ParsedTemplate> ParseRequestTemplate(const v1::FingerprintTemplate& t, absl::string_view what,
                                                    const SearchLimits& limits);

struct ParsedSearch {
  std::vector<std::vector<MinutiaPoint>> probes;
  int top_k = 10;
  std::string matcher;  // "" (the server's default) or a SearcherMatchers() name
  TemplateFilter filter;  // finger positions / impression types (empty: all)
};

// top_k 0 means 10; INVALID_ARGUMENT for top_k outside 1..max_top_k, an
// unknown matcher or a bad probe (named by index when there are several);
// RESOURCE_EXHAUSTED for more than max_probes probes. Probes are parsed (and
// images extracted) on all cores; the first bad one in order is reported.
absl::StatusOr<ParsedSearch> ParseSearch(const google::protobuf::RepeatedPtrField<v1::FingerprintTemplate>& probes,
                                         int top_k, const std::string& matcher, const SearchLimits& limits);
absl::StatusOr<ParsedSearch> ParseSearchRequest(const v1::SearchRequest& request, const SearchLimits& limits);
absl::StatusOr<ParsedSearch> ParseSearchBatchRequest(const v1::SearchBatchRequest& request, const SearchLimits& limits);

// Response pieces. Candidates carry their metadata when they have any.
// MsSince: milliseconds since `start` (a call's total_ms).
double MsSince(std::chrono::steady_clock::time_point start);
void SetTiming(const SearchStats& stats, double total_ms, v1::SearchTiming* timing);
void AddCandidates(const std::vector<SearchCandidate>& candidates,
                   google::protobuf::RepeatedPtrField<v1::Candidate>* out);

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_SEARCH_REQUEST_H_
