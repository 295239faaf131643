// Fingerprint images from the bytes a client sends: PNG, TIFF (8-bit gray),
// BMP, JPEG, FBI WSQ 3.1 (wsq_decode.h) and raw 8-bit gray of a given size,
// detected by content. Every decoder refuses what it cannot read with
// INVALID_ARGUMENT naming the problem (never a crash), and checks the image
// size the header declares against DecodeOptions::max_pixels BEFORE it
// allocates anything, so a 100000 x 100000 header costs nothing.
//
// Colour images become gray (ITU-R BT.601 luma); 16-bit samples are reduced
// to 8 bits. The resolution comes from the file (PNG pHYs, TIFF
// XResolution/ResolutionUnit, BMP pixels per metre, JPEG JFIF density, WSQ
// NISTCOM PPI) unless DecodeOptions::ppi overrides it; files that say
// nothing usable (e.g. TIFF 1x1 "dpi") give ppi 0.
#ifndef TESSERA_SERVICES_FINGERPRINT_IMAGE_IMAGE_DECODE_H_
#define TESSERA_SERVICES_FINGERPRINT_IMAGE_IMAGE_DECODE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "services/fingerprint/image/gray_image.h"

namespace tessera {
namespace fingerprint {

enum class ImageFormat { kUnknown = 0, kPng, kTiff, kBmp, kJpeg, kWsq, kRaw };
absl::string_view ImageFormatName(ImageFormat format);  // "png", "tiff", ...
// "png", "tiff"/"tif", "bmp", "jpeg"/"jpg", "wsq", "raw" (any case);
// INVALID_ARGUMENT otherwise.
absl::StatusOr<ImageFormat> ParseImageFormat(absl::string_view name);

// The format of `bytes` by its signature; kUnknown when none matches (raw
// has no signature: it is never detected).
ImageFormat DetectImageFormat(absl::string_view bytes);

struct DecodeOptions {
  ImageFormat format = ImageFormat::kUnknown;  // kUnknown: detect by content
  double ppi = 0;                              // > 0: overrides the file's resolution
  int raw_width = 0;                           // kRaw: the size (required)
  int raw_height = 0;
  // The largest image accepted (width * height), checked against the header.
  // 64 Mpixel: a 1000-ppi ten-print card is about 8000 x 8000.
  int64_t max_pixels = int64_t{64} << 20;
};

absl::StatusOr<GrayImage> DecodeGrayImage(absl::string_view bytes, const DecodeOptions& options = {});

// The image at 500 ppi (the resolution the extractor and the matchers are
// tuned for): area-averaged when it is finer (1000 ppi is halved exactly),
// bilinear when coarser. Unchanged within 1 % of 500; FAILED_PRECONDITION
// when `image.ppi` is 0 (unknown: the request must say) or outside 250-2000.
absl::StatusOr<GrayImage> ResampleTo500Ppi(const GrayImage& image);

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_IMAGE_IMAGE_DECODE_H_
