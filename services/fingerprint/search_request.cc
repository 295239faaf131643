#include "services/fingerprint/search_request.h"

#include "services/fingerprint/metadata_proto.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/parallel.h"
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

namespace {

absl::StatusOr<ParsedTemplate> ParsedFromImage(const ImageTemplate& extracted) {
  const std::string record(extracted.record.begin(), extracted.record.end());
  TESSERA_ASSIGN_OR_RETURN(ParsedTemplate parsed, ParseProbeOrTemplate(record, extracted.format));
  parsed.quality = extracted.quality.score;
  parsed.extracted_record = record;
  return parsed;
}

}  // namespace

absl::StatusOr<ParsedTemplate> ParseImageTemplate(absl::string_view image, const ImageInput& input) {
  TESSERA_ASSIGN_OR_RETURN(ImageTemplate extracted, TemplateFromImage(image, input));
  return ParsedFromImage(extracted);
}

std::vector<absl::StatusOr<ParsedTemplate>> ParseImageTemplates(const std::vector<absl::string_view>& images,
                                                                const std::vector<ImageInput>& inputs,
                                                                const ImageExtractor* extractor) {
  std::vector<absl::StatusOr<ParsedTemplate>> out(images.size(), absl::UnknownError("not extracted"));
  if (extractor == nullptr) {
    ParallelForDynamic(static_cast<int64_t>(images.size()), 1, [&](int64_t begin, int64_t end, int) {
      for (int64_t i = begin; i < end; ++i) out[i] = ParseImageTemplate(images[i], inputs[i]);
    });
    return out;
  }
  std::vector<absl::StatusOr<ImageTemplate>> extracted = extractor->ExtractAll(images, inputs);
  for (size_t i = 0; i < images.size(); ++i) {
    out[i] = extracted[i].ok() ? ParsedFromImage(*extracted[i]) : absl::StatusOr<ParsedTemplate>(extracted[i].status());
  }
  return out;
}

absl::StatusOr<ImageInput> ImageInputFromProto(const v1::FingerprintImage& image, absl::string_view what,
                                               const ImageLimits& limits) {
  if (static_cast<int64_t>(image.data().size()) > limits.max_image_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(what, ": image of ", image.data().size(),
                                                     " bytes; the limit is ", limits.max_image_bytes));
  }
  ImageInput input;
  switch (image.format()) {
    case v1::IMAGE_FORMAT_AUTO: input.decode.format = ImageFormat::kUnknown; break;
    case v1::IMAGE_FORMAT_PNG: input.decode.format = ImageFormat::kPng; break;
    case v1::IMAGE_FORMAT_TIFF: input.decode.format = ImageFormat::kTiff; break;
    case v1::IMAGE_FORMAT_BMP: input.decode.format = ImageFormat::kBmp; break;
    case v1::IMAGE_FORMAT_JPEG: input.decode.format = ImageFormat::kJpeg; break;
    case v1::IMAGE_FORMAT_WSQ: input.decode.format = ImageFormat::kWsq; break;
    case v1::IMAGE_FORMAT_RAW: input.decode.format = ImageFormat::kRaw; break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(what, ": unknown image format ", static_cast<int>(image.format())));
  }
  if (!(image.ppi() >= 0) || image.ppi() > 1e5) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ppi must be 0 (the file's) or positive, got ", image.ppi()));
  }
  if (image.width() < 0 || image.height() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": negative raw image size"));
  }
  if (input.decode.format != ImageFormat::kRaw && (image.width() != 0 || image.height() != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": width and height are for raw images only"));
  }
  if (image.min_quality() < 0 || image.min_quality() > 100) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": min_quality must be 0-100, got ", image.min_quality()));
  }
  input.decode.ppi = image.ppi();
  input.decode.raw_width = image.width();
  input.decode.raw_height = image.height();
  input.decode.max_pixels = limits.max_pixels;
  input.min_quality = image.min_quality() > 0 ? image.min_quality() : limits.min_quality;
  return input;
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
                                                    const SearchLimits& limits) {
  if (t.has_image()) {
    if (!t.data().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": give a template's data or an image, not both"));
    }
    TESSERA_ASSIGN_OR_RETURN(ImageInput input, ImageInputFromProto(t.image(), what, limits.image));
    absl::StatusOr<ParsedTemplate> parsed = ParseImageTemplate(t.image().data(), input);
    if (!parsed.ok()) return Annotate(parsed.status(), what);
    return parsed;
  }
  if (static_cast<int64_t>(t.data().size()) > limits.max_template_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, ": template of ", t.data().size(), " bytes; the limit is ", limits.max_template_bytes));
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
  // Templates one by one; the images together (the extractor's GPU or all
  // cores); then the first error in order.
  const auto what = [&](int i) { return probes.size() == 1 ? std::string("probe") : absl::StrCat("probe ", i); };
  std::vector<absl::StatusOr<ParsedTemplate>> parsed(probes.size(), absl::UnknownError("not parsed"));
  std::vector<int> image_at;
  std::vector<absl::string_view> images;
  std::vector<ImageInput> inputs;
  for (int i = 0; i < probes.size(); ++i) {
    const v1::FingerprintTemplate& t = probes[i];
    if (!t.has_image() || !t.data().empty()) {
      parsed[i] = ParseRequestTemplate(t, what(i), limits);  // a template, or both (refused there)
      continue;
    }
    absl::StatusOr<ImageInput> input = ImageInputFromProto(t.image(), what(i), limits.image);
    if (!input.ok()) {
      parsed[i] = input.status();
      continue;
    }
    image_at.push_back(i);
    images.push_back(t.image().data());
    inputs.push_back(*input);
  }
  std::vector<absl::StatusOr<ParsedTemplate>> extracted = ParseImageTemplates(images, inputs, limits.extractor);
  for (size_t j = 0; j < image_at.size(); ++j) {
    parsed[image_at[j]] = extracted[j].ok() ? std::move(extracted[j])
                                            : absl::StatusOr<ParsedTemplate>(
                                                  Annotate(extracted[j].status(), what(image_at[j])));
  }
  out.probes.reserve(probes.size());
  for (absl::StatusOr<ParsedTemplate>& p : parsed) {
    if (!p.ok()) return p.status();
    out.probes.push_back(std::move(p->minutiae));
  }
  return out;
}

absl::StatusOr<ParsedSearch> ParseSearchRequest(const v1::SearchRequest& request, const SearchLimits& limits) {
  TESSERA_ASSIGN_OR_RETURN(TemplateFilter filter,
                           FilterFromProto(request.finger_positions(), request.impression_types()));
  google::protobuf::RepeatedPtrField<v1::FingerprintTemplate> probes;
  *probes.Add() = request.probe();
  TESSERA_ASSIGN_OR_RETURN(ParsedSearch out, ParseSearch(probes, request.top_k(), request.matcher(), limits));
  out.filter = std::move(filter);
  return out;
}

absl::StatusOr<ParsedSearch> ParseSearchBatchRequest(const v1::SearchBatchRequest& request,
                                                     const SearchLimits& limits) {
  TESSERA_ASSIGN_OR_RETURN(TemplateFilter filter,
                           FilterFromProto(request.finger_positions(), request.impression_types()));
  TESSERA_ASSIGN_OR_RETURN(ParsedSearch out, ParseSearch(request.probes(), request.top_k(), request.matcher(), limits));
  out.filter = std::move(filter);
  return out;
}

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
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
    if (c.metadata != nullptr) MetadataToProto(*c.metadata, o->mutable_metadata());
  }
}

}  // namespace fingerprint
}  // namespace tessera
