// PNG files for previews and tests: 8-bit gray and RGB, and 16-bit gray.
//
// Pixels are row-major with the top row first and channels interleaved, as
// in the PNG file. Errors name the path: NOT_FOUND for a missing file,
// INVALID_ARGUMENT for a file that is not a PNG or an image whose buffer does
// not match its size, DATA_LOSS for a damaged PNG, and the errno's code when
// a file cannot be created.
#ifndef TESSERA_COMMON_PNG_IO_H_
#define TESSERA_COMMON_PNG_IO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tessera {

// An 8-bit image: 1 channel (gray) or 3 (RGB).
struct Image8 {
  int width = 0;
  int height = 0;
  int channels = 1;
  std::vector<uint8_t> pixels;  // width * height * channels

  // A width x height image with every sample set to `fill`.
  static Image8 Make(int width, int height, int channels, uint8_t fill = 0);
  uint8_t& at(int x, int y, int c = 0) { return pixels[(static_cast<size_t>(y) * width + x) * channels + c]; }
  uint8_t at(int x, int y, int c = 0) const {
    return pixels[(static_cast<size_t>(y) * width + x) * channels + c];
  }
};

// A 16-bit gray image.
struct Image16 {
  int width = 0;
  int height = 0;
  std::vector<uint16_t> pixels;  // width * height
};

// Writes an 8-bit gray or RGB PNG (the samples are stored unchanged).
absl::Status WritePng(const Image8& image, const std::string& path);
// The bytes of an 8-bit gray or RGB PNG file (for answers sent over the wire).
absl::StatusOr<std::string> EncodePngBytes(const Image8& image);
// Writes a 16-bit gray PNG (the samples are stored unchanged).
absl::Status WritePng16(const Image16& image, const std::string& path);

// Reads any PNG as 8-bit: gray files (of any depth) stay gray, color and
// palette files become RGB; alpha is composited over black; 16-bit samples
// are reduced to 8 bits.
absl::StatusOr<Image8> ReadPng(const std::string& path);
// Reads a gray PNG with 16-bit samples unchanged (8-bit gray is widened by
// v * 257); color files are INVALID_ARGUMENT.
absl::StatusOr<Image16> ReadPng16(const std::string& path);

}  // namespace tessera

#endif  // TESSERA_COMMON_PNG_IO_H_
