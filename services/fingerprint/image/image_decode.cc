// DecodeGrayImage: picks the format (the request's, or by signature), checks
// the options, hands the bytes to the per-format decoder (format_decoders.h,
// wsq_decode.h) and applies the request's resolution. Raw gray is decoded
// here: it is just width * height bytes.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "services/fingerprint/image/format_decoders.h"
#include "services/fingerprint/image/image_decode.h"
#include "services/fingerprint/image/wsq_decode.h"

namespace tessera {
namespace fingerprint {
namespace image_internal {

absl::Status CheckImageSize(absl::string_view format, int64_t width, int64_t height, int64_t max_pixels) {
  if (width <= 0 || height <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(format, " image of ", width, "x", height, " has no pixels (width and height must be positive)"));
  }
  constexpr int64_t kMaxSide = std::numeric_limits<int>::max();
  if (width > kMaxSide || height > kMaxSide || width * height > max_pixels) {
    return absl::InvalidArgumentError(
        absl::StrCat(format, " image of ", width, "x", height, " is larger than the limit of ", max_pixels, " pixels"));
  }
  return absl::OkStatus();
}

double SaneResolution(double ppi) {
  if (!std::isfinite(ppi) || ppi < 50 || ppi > 100000) return 0;
  return ppi;
}

}  // namespace image_internal

namespace {

bool StartsWith(absl::string_view bytes, const char* prefix, size_t n) {
  return bytes.size() >= n && std::memcmp(bytes.data(), prefix, n) == 0;
}

absl::StatusOr<GrayImage> DecodeRaw(absl::string_view bytes, const DecodeOptions& options) {
  if (options.raw_width <= 0 || options.raw_height <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("raw gray images need raw_width and raw_height (got ",
                                                   options.raw_width, "x", options.raw_height, ")"));
  }
  absl::Status size_ok =
      image_internal::CheckImageSize("raw", options.raw_width, options.raw_height, options.max_pixels);
  if (!size_ok.ok()) return size_ok;
  const uint64_t expected = static_cast<uint64_t>(options.raw_width) * static_cast<uint64_t>(options.raw_height);
  if (bytes.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat("raw gray image of ", options.raw_width, "x", options.raw_height,
                                                   " needs ", expected, " bytes, got ", bytes.size()));
  }
  GrayImage image;
  image.width = options.raw_width;
  image.height = options.raw_height;
  image.pixels.assign(bytes.begin(), bytes.end());
  return image;
}

absl::Status UnknownFormat(absl::string_view bytes) {
  if (bytes.empty()) return absl::InvalidArgumentError("not a PNG, TIFF, BMP, JPEG or WSQ image (no bytes)");
  return absl::InvalidArgumentError(absl::StrCat("not a PNG, TIFF, BMP, JPEG or WSQ image (first bytes \"",
                                                 absl::CHexEscape(bytes.substr(0, 8)), "\")"));
}

}  // namespace

absl::string_view ImageFormatName(ImageFormat format) {
  switch (format) {
    case ImageFormat::kPng:
      return "png";
    case ImageFormat::kTiff:
      return "tiff";
    case ImageFormat::kBmp:
      return "bmp";
    case ImageFormat::kJpeg:
      return "jpeg";
    case ImageFormat::kWsq:
      return "wsq";
    case ImageFormat::kRaw:
      return "raw";
    case ImageFormat::kUnknown:
      break;
  }
  return "unknown";
}

absl::StatusOr<ImageFormat> ParseImageFormat(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower == "png") return ImageFormat::kPng;
  if (lower == "tiff" || lower == "tif") return ImageFormat::kTiff;
  if (lower == "bmp") return ImageFormat::kBmp;
  if (lower == "jpeg" || lower == "jpg") return ImageFormat::kJpeg;
  if (lower == "wsq") return ImageFormat::kWsq;
  if (lower == "raw") return ImageFormat::kRaw;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown image format \"", absl::CHexEscape(name), "\" (png, tiff, bmp, jpeg, wsq or raw)"));
}

ImageFormat DetectImageFormat(absl::string_view bytes) {
  if (StartsWith(bytes, "\x89PNG\r\n\x1a\n", 8)) return ImageFormat::kPng;
  // Classic TIFF (42) and BigTIFF (43), little- and big-endian.
  if (StartsWith(bytes, "II*\0", 4) || StartsWith(bytes, "MM\0*", 4) || StartsWith(bytes, "II+\0", 4) ||
      StartsWith(bytes, "MM\0+", 4)) {
    return ImageFormat::kTiff;
  }
  if (StartsWith(bytes, "BM", 2)) return ImageFormat::kBmp;
  if (StartsWith(bytes, "\xff\xd8\xff", 3)) return ImageFormat::kJpeg;
  // WSQ: SOI (FFA0) and then a table, comment or frame marker: SOF A2,
  // DTT A4, DQT A5, DHT A6, DRT A7, COM A8.
  if (StartsWith(bytes, "\xff\xa0\xff", 3) && bytes.size() >= 4) {
    const uint8_t marker = static_cast<uint8_t>(bytes[3]);
    if (marker == 0xa2 || (marker >= 0xa4 && marker <= 0xa8)) return ImageFormat::kWsq;
  }
  return ImageFormat::kUnknown;
}

absl::StatusOr<GrayImage> DecodeGrayImage(absl::string_view bytes, const DecodeOptions& options) {
  if (!std::isfinite(options.ppi) || options.ppi < 0) {
    return absl::InvalidArgumentError(absl::StrCat("ppi must be 0 (from the file) or positive, not ", options.ppi));
  }
  if (options.max_pixels <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("max_pixels must be positive, not ", options.max_pixels));
  }
  const ImageFormat format = options.format != ImageFormat::kUnknown ? options.format : DetectImageFormat(bytes);
  absl::StatusOr<GrayImage> image;
  switch (format) {
    case ImageFormat::kPng:
      image = image_internal::DecodePng(bytes, options.max_pixels);
      break;
    case ImageFormat::kTiff:
      image = image_internal::DecodeTiff(bytes, options.max_pixels);
      break;
    case ImageFormat::kBmp:
      image = image_internal::DecodeBmp(bytes, options.max_pixels);
      break;
    case ImageFormat::kJpeg:
      image = image_internal::DecodeJpeg(bytes, options.max_pixels);
      break;
    case ImageFormat::kWsq:
      image = DecodeWsq(bytes, options.max_pixels);
      break;
    case ImageFormat::kRaw:
      image = DecodeRaw(bytes, options);
      break;
    case ImageFormat::kUnknown:
      return UnknownFormat(bytes);
    default:
      return absl::InvalidArgumentError(absl::StrCat("no image format has the value ", static_cast<int>(format)));
  }
  if (image.ok() && options.ppi > 0) image->ppi = options.ppi;
  return image;
}

}  // namespace fingerprint
}  // namespace tessera
