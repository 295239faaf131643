#include "services/fingerprint/search_request.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"

namespace tessera {
namespace fingerprint {
namespace {

absl::Span<const uint8_t> AsBytes(absl::string_view s) {
  return absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

}  // namespace

absl::StatusOr<ParsedTemplate> ParseProbeOrTemplate(absl::string_view bytes, TemplateFormat format, int view) {
  ParsedTemplate out;
  out.format = format == TemplateFormat::kUnknown ? SniffTemplateFormat(AsBytes(bytes)) : format;
  if (out.format == TemplateFormat::kUnknown) {
    return absl::InvalidArgumentError(
        bytes.empty() ? "empty template"
                      : "unrecognised template: not an ISO 19794-2 / ANSI 378 record (\"FMR\\0\") or xyt text");
  }
  absl::StatusOr<std::vector<Template>> views = ParseTemplateRecordAs(out.format, AsBytes(bytes));
  if (!views.ok()) {
    // Truncation is DATA_LOSS inside the parsers; at this edge it is the
    // caller's bad input.
    const absl::StatusCode code = views.status().code();
    if (code == absl::StatusCode::kDataLoss || code == absl::StatusCode::kOutOfRange ||
        code == absl::StatusCode::kInvalidArgument) {
      return absl::InvalidArgumentError(views.status().message());
    }
    return views.status();
  }
  if (view < 0 || view >= static_cast<int>(views->size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("finger view ", view, " requested; the record has ", views->size()));
  }
  for (const Minutia& m : (*views)[view].minutiae) {
    out.minutiae.push_back({static_cast<float>(m.x), static_cast<float>(m.y), static_cast<float>(m.angle)});
  }
  if (out.minutiae.empty()) return absl::InvalidArgumentError("template has no minutiae");
  TESSERA_RETURN_IF_ERROR(ValidateMccInput(out.minutiae, MccParams{}));
  return out;
}

absl::StatusOr<TemplateFormat> TemplateFormatFromProto(v1::TemplateFormat f) {
  switch (f) {
    case v1::TEMPLATE_FORMAT_AUTO:
      return TemplateFormat::kUnknown;
    case v1::TEMPLATE_FORMAT_ISO19794:
      return TemplateFormat::kIso19794;
    case v1::TEMPLATE_FORMAT_ANSI378:
      return TemplateFormat::kAnsi378;
    case v1::TEMPLATE_FORMAT_XYT:
      return TemplateFormat::kXyt;
    default:
      return absl::InvalidArgumentError(absl::StrCat("unknown template format ", static_cast<int>(f)));
  }
}

absl::StatusOr<ParsedTemplate> ParseRequestTemplate(const v1::FingerprintTemplate& t, absl::string_view what,
                                                    int64_t max_template_bytes) {
  if (static_cast<int64_t>(t.data().size()) > max_template_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, ": template of ", t.data().size(), " bytes; the limit is ", max_template_bytes));
  }
  TESSERA_ASSIGN_OR_RETURN(TemplateFormat format, TemplateFormatFromProto(t.format()));
  absl::StatusOr<ParsedTemplate> parsed = ParseProbeOrTemplate(t.data(), format, t.view());
  if (!parsed.ok()) return Annotate(parsed.status(), what);
  return parsed;
}

absl::StatusOr<ParsedSearch> ParseSearch(const google::protobuf::RepeatedPtrField<v1::FingerprintTemplate>& probes,
                                         int top_k, const std::string& matcher, const SearchLimits& limits) {
  ParsedSearch out;
  out.top_k = top_k == 0 ? 10 : top_k;
  if (out.top_k < 1 || out.top_k > limits.max_top_k) {
    return absl::InvalidArgumentError(absl::StrCat("top_k must be 1-", limits.max_top_k, ", got ", top_k));
  }
  const std::vector<std::string> known = SearcherMatchers();
  if (!matcher.empty() && std::find(known.begin(), known.end(), matcher) == known.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("matcher: unknown matcher '", matcher, "'; known: ", absl::StrJoin(known, ", ")));
  }
  out.matcher = matcher;
  if (probes.size() > limits.max_probes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(probes.size(), " probes in one call; the limit is ", limits.max_probes));
  }
  out.probes.reserve(probes.size());
  for (int i = 0; i < probes.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(
        ParsedTemplate p,
        ParseRequestTemplate(probes[i], probes.size() == 1 ? "probe" : absl::StrCat("probe ", i),
                             limits.max_template_bytes));
    out.probes.push_back(std::move(p.minutiae));
  }
  return out;
}

absl::StatusOr<ParsedSearch> ParseSearchRequest(const v1::SearchRequest& request, const SearchLimits& limits) {
  google::protobuf::RepeatedPtrField<v1::FingerprintTemplate> probes;
  *probes.Add() = request.probe();
  return ParseSearch(probes, request.top_k(), request.matcher(), limits);
}

absl::StatusOr<ParsedSearch> ParseSearchBatchRequest(const v1::SearchBatchRequest& request,
                                                     const SearchLimits& limits) {
  return ParseSearch(request.probes(), request.top_k(), request.matcher(), limits);
}

void SetTiming(const SearchStats& stats, double total_ms, v1::SearchTiming* timing) {
  timing->set_prepare_ms(stats.prepare_seconds * 1e3);
  timing->set_score_ms(stats.score_seconds * 1e3);
  timing->set_gallery_size(stats.gallery_templates);
  timing->set_backend(stats.backend);
  timing->set_matcher(stats.matcher);
  timing->set_total_ms(total_ms);
}

void AddCandidates(const std::vector<SearchCandidate>& candidates,
                   google::protobuf::RepeatedPtrField<v1::Candidate>* out) {
  for (const SearchCandidate& c : candidates) {
    v1::Candidate* o = out->Add();
    o->set_id(c.id);
    o->set_score(c.score);
  }
}

}  // namespace fingerprint
}  // namespace tessera
