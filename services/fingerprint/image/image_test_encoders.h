// Encoders for the image decoder tests: PNG (libpng), TIFF (libtiff), JPEG
// (libjpeg) and BMP (written here), from explicit specs, so the tests make
// every variant they decode. Test-only.
#ifndef TESSERA_SERVICES_FINGERPRINT_IMAGE_IMAGE_TEST_ENCODERS_H_
#define TESSERA_SERVICES_FINGERPRINT_IMAGE_IMAGE_TEST_ENCODERS_H_

#include <png.h>
#include <tiffio.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "services/fingerprint/image/gray_image.h"

namespace tessera {
namespace fingerprint {

// The whole content of `path` ("" when it cannot be read).
std::string ReadFile(const std::string& path);

// Appends `v` little-endian (BMP and hand-made headers).
void Put16(std::string* s, uint32_t v);
void Put32(std::string* s, uint32_t v);

// PNG: rows of already packed samples (16-bit big-endian, as PNG stores them).
struct PngSpec {
  int width = 0, height = 0;
  int color_type = PNG_COLOR_TYPE_GRAY;
  int bit_depth = 8;
  std::vector<uint8_t> data;
  std::vector<png_color> palette;
  uint32_t x_ppm = 0;  // pHYs in pixels per metre when > 0
  int phys_unit = PNG_RESOLUTION_METER;
  int interlace = PNG_INTERLACE_NONE;
};

std::string EncodePng(const PngSpec& spec);
// 8-bit gray, no pHYs.
PngSpec GrayPng(const GrayImage& image);

// TIFF: rows of packed samples (16-bit in native order, as libtiff takes
// them), written to a temporary file by libtiff.
struct TiffSpec {
  int width = 0, height = 0;
  uint16_t bits = 8, samples = 1, photometric = PHOTOMETRIC_MINISBLACK;
  uint16_t compression = COMPRESSION_NONE;
  std::vector<uint8_t> data;
  std::vector<uint16_t> colormap;  // 3 << bits entries: R..., G..., B...
  bool tiled = false;
  float x_resolution = 0;  // written when > 0
  uint16_t resolution_unit = RESUNIT_INCH;
  bool big_endian = false;
  int rows_per_strip = 0;  // 0: libtiff's default
  int pages = 1;           // extra pages are inverted copies
};

std::string EncodeTiff(const TiffSpec& spec);
// 8-bit gray, MinIsBlack, uncompressed strips.
TiffSpec GrayTiff(const GrayImage& image);

// JPEG: 1 (gray) or 3 (RGB) interleaved components; density_unit 0 writes a
// 1:1 aspect (no resolution), 1 dots per inch, 2 per centimetre.
std::string EncodeJpeg(int width, int height, int components, const std::vector<uint8_t>& samples, int quality,
                       int density_unit = 0, int density = 1, bool progressive = false);

// BMP: `pixel(x, y)` is a palette index (bits <= 8) or 0xRRGGBB; the
// palette is 0xRRGGBB entries. Rows bottom-up unless top_down.
struct BmpSpec {
  int width = 0, height = 0;
  int bits = 8;
  bool top_down = false;
  std::vector<uint32_t> palette;
  std::function<uint32_t(int, int)> pixel;
  int32_t x_ppm = 0;
  uint32_t header_size = 40;
  uint32_t compression = 0;
};

std::string EncodeBmp(const BmpSpec& spec);
// 256 gray entries (0xRRGGBB).
std::vector<uint32_t> GrayPalette();

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_IMAGE_IMAGE_TEST_ENCODERS_H_
