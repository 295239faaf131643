// Internal to //services/fingerprint/image:image_decode: the per-format
// decoders DecodeGrayImage (image_decode.cc) dispatches to, and the few
// helpers they share (size limit, luma, resolution sanity). Each decoder
// returns INVALID_ARGUMENT whose message starts with the format's name, and
// checks the declared size with CheckImageSize before it allocates pixels.
#ifndef TESSERA_SERVICES_FINGERPRINT_IMAGE_FORMAT_DECODERS_H_
#define TESSERA_SERVICES_FINGERPRINT_IMAGE_FORMAT_DECODERS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "services/fingerprint/image/gray_image.h"

namespace tessera {
namespace fingerprint {
namespace image_internal {

// The resolution each decoder leaves in GrayImage::ppi is the file's; 0 when
// the file says nothing usable. DecodeGrayImage applies DecodeOptions::ppi.
absl::StatusOr<GrayImage> DecodePng(absl::string_view bytes, int64_t max_pixels);
absl::StatusOr<GrayImage> DecodeTiff(absl::string_view bytes, int64_t max_pixels);
absl::StatusOr<GrayImage> DecodeJpeg(absl::string_view bytes, int64_t max_pixels);
absl::StatusOr<GrayImage> DecodeBmp(absl::string_view bytes, int64_t max_pixels);

// INVALID_ARGUMENT "<format> image of WxH ..." when either side is not
// positive, does not fit an int, or width * height exceeds max_pixels.
absl::Status CheckImageSize(absl::string_view format, int64_t width, int64_t height, int64_t max_pixels);

// ITU-R BT.601 luma of 8-bit R, G, B: round(0.299 R + 0.587 G + 0.114 B).
// The weights sum to 1000, so gray (v, v, v) stays v.
inline uint8_t Luma(uint32_t r, uint32_t g, uint32_t b) {
  return static_cast<uint8_t>((299 * r + 587 * g + 114 * b + 500) / 1000);
}

// A 16-bit sample as 8 bits, rounded: round(v * 255 / 65535).
inline uint8_t Scale16To8(uint32_t v) { return static_cast<uint8_t>((v * 255 + 32767) / 65535); }

// A resolution from a file, or 0 (unknown) when it is not finite or outside
// 50-100000 ppi: placeholders such as TIFF "1x1 dpi" mean nothing.
double SaneResolution(double ppi);

// Pixels per metre (PNG pHYs, BMP) as pixels per inch.
inline double PpmToPpi(double ppm) { return ppm * 0.0254; }

}  // namespace image_internal
}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_IMAGE_FORMAT_DECODERS_H_
