#include "services/fingerprint/extract/image_template.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace tessera {
namespace fingerprint {

absl::Status CheckImageQuality(int quality, int min_quality) {
  if (min_quality < 0 || min_quality > 100) {
    return absl::InvalidArgumentError(absl::StrCat("min_quality must be 0-100, got ", min_quality));
  }
  if (min_quality > 0 && quality < min_quality) {
    return absl::FailedPreconditionError(
        absl::StrCat("image quality ", quality, " is below the minimum ", min_quality));
  }
  return absl::OkStatus();
}

bool LooksLikeImage(absl::string_view bytes) { return DetectImageFormat(bytes) != ImageFormat::kUnknown; }

absl::StatusOr<ImageTemplate> DecodeForExtraction(absl::string_view bytes, const ImageInput& input,
                                                  TemplateFormat output) {
  if (output != TemplateFormat::kIso19794 && output != TemplateFormat::kAnsi378) {
    return absl::InvalidArgumentError(
        absl::StrCat("templates are written as iso or ansi, not ", TemplateFormatName(output)));
  }
  if (input.min_quality < 0 || input.min_quality > 100) return CheckImageQuality(0, input.min_quality);
  ImageTemplate out;
  out.format = output;
  out.image_format = input.decode.format != ImageFormat::kUnknown ? input.decode.format : DetectImageFormat(bytes);
  TESSERA_ASSIGN_OR_RETURN(GrayImage decoded, DecodeGrayImage(bytes, input.decode));
  out.width = decoded.width;
  out.height = decoded.height;
  out.ppi = decoded.ppi;
  TESSERA_ASSIGN_OR_RETURN(out.image, ResampleTo500Ppi(decoded));
  TESSERA_RETURN_IF_ERROR(CheckExtractable(out.image));
  return out;
}

absl::Status FinishImageTemplate(const ImageInput& input, ImageTemplate& t) {
  t.quality = AssessImageQuality(t.extraction);
  TESSERA_RETURN_IF_ERROR(CheckImageQuality(t.quality.score, input.min_quality));
  if (t.extraction.view.minutiae.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("no minutiae found in the image (quality ", t.quality.score,
                                                   "): not a fingerprint, or one too poor to use"));
  }
  Template view = t.extraction.view;
  view.finger_quality = t.quality.score;
  view.finger_position = input.finger_position;
  view.impression_type = input.impression_type;
  TESSERA_ASSIGN_OR_RETURN(t.record, WriteTemplateRecord(t.format, {view}));
  return absl::OkStatus();
}

absl::StatusOr<ImageTemplate> TemplateFromImage(absl::string_view bytes, const ImageInput& input,
                                                TemplateFormat output, const ExtractOptions& extract) {
  TESSERA_ASSIGN_OR_RETURN(ImageTemplate out, DecodeForExtraction(bytes, input, output));
  TESSERA_ASSIGN_OR_RETURN(out.extraction, ExtractMinutiae(out.image, extract));
  TESSERA_RETURN_IF_ERROR(FinishImageTemplate(input, out));
  return out;
}

}  // namespace fingerprint
}  // namespace tessera
