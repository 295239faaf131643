// A fingerprint image in, a minutiae template out: decode (image_decode.h),
// bring to 500 ppi, extract (extractor.h), score the quality
// (image_quality.h) and write the record (ISO 19794-2:2005 or ANSI 378).
// The one path every front end takes for images: the gRPC service (Enroll,
// Search, Verify, Extract), the "fingerprint.search" job engine and the CLI.
#ifndef TESSERA_SERVICES_FINGERPRINT_EXTRACT_IMAGE_TEMPLATE_H_
#define TESSERA_SERVICES_FINGERPRINT_EXTRACT_IMAGE_TEMPLATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "services/fingerprint/extract/extractor.h"
#include "services/fingerprint/extract/image_quality.h"
#include "services/fingerprint/formats/template_io.h"
#include "services/fingerprint/image/image_decode.h"

namespace tessera {
namespace fingerprint {

// What the caller says about one image.
struct ImageInput {
  DecodeOptions decode;  // format (kUnknown: detect), ppi override, raw size, pixel limit
  // 1-100: an image whose quality is below it is refused with
  // FAILED_PRECONDITION naming the quality; 0: no gate.
  int min_quality = 0;
  // Written into the record's finger view (ISO/ANSI codes): 0 unknown, 1-10
  // the fingers, ...; 0 live-scan plain, 1 rolled, 4 latent, ...
  int finger_position = 0;
  int impression_type = 0;
};

struct ImageTemplate {
  std::vector<uint8_t> record;  // the serialized template
  TemplateFormat format = TemplateFormat::kIso19794;
  ImageQuality quality;
  ImageFormat image_format = ImageFormat::kUnknown;  // as decoded
  int width = 0;     // as decoded, before resampling
  int height = 0;
  double ppi = 0;    // the resolution used (the file's or the request's)
  GrayImage image;   // at 500 ppi (what the extraction saw)
  Extraction extraction;
};

// Errors: INVALID_ARGUMENT from the decoders (naming the problem), for an
// unknown output format, and when no minutia is found (no print, or one too
// poor to use: the message gives the quality); FAILED_PRECONDITION for an
// unknown or unusable resolution (say the ppi) and for a quality below
// input.min_quality. The record's finger quality is the image quality.
absl::StatusOr<ImageTemplate> TemplateFromImage(absl::string_view bytes, const ImageInput& input,
                                                TemplateFormat output = TemplateFormat::kIso19794,
                                                const ExtractOptions& extract = {});

// TemplateFromImage in two halves around the extraction, for batched
// extractors (image_extractor.h): decode, resample and check that the image
// can be extracted (all but `extraction`, `quality` and `record` set);
// then, with `extraction` filled, the quality, its gate and the record.
absl::StatusOr<ImageTemplate> DecodeForExtraction(absl::string_view bytes, const ImageInput& input,
                                                  TemplateFormat output);
absl::Status FinishImageTemplate(const ImageInput& input, ImageTemplate& t);

// FAILED_PRECONDITION "image quality Q is below the minimum M" when
// 0 < min_quality and quality < min_quality; INVALID_ARGUMENT for a
// min_quality outside 0-100.
absl::Status CheckImageQuality(int quality, int min_quality);

// True when `bytes` start like an image file the decoders know (PNG, TIFF,
// BMP, JPEG, WSQ): how the CLI and clients tell images from templates.
bool LooksLikeImage(absl::string_view bytes);

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_EXTRACT_IMAGE_TEMPLATE_H_
