// Tests of DecodeGrayImage and ResampleTo500Ppi: every FVC2002 TIFF and the
// NIST 1000-ppi BMP decode; images encoded here with libpng, libtiff,
// libjpeg and a small BMP writer decode back to the same pixels (JPEG within
// a tolerance), colour becomes BT.601 luma, file resolutions become ppi and
// DecodeOptions::ppi overrides them; raw input, format detection, size
// limits and the resampler's sizes and values.
#include <png.h>
#include <tiffio.h>

#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "services/fingerprint/formats/fvc_data.h"
#include "services/fingerprint/image/image_decode.h"
#include "services/fingerprint/image/image_test_encoders.h"

namespace tessera {
namespace fingerprint {
namespace {

using ::testing::HasSubstr;

// round(0.299 R + 0.587 G + 0.114 B), halves up, as the decoders compute it.
uint8_t ExpectedLuma(int r, int g, int b) { return static_cast<uint8_t>((299 * r + 587 * g + 114 * b + 500) / 1000); }

std::string DataDir() {
  absl::StatusOr<std::string> dir = FindFingerprintDataDir();
  EXPECT_TRUE(dir.ok()) << dir.status();
  return dir.ok() ? *dir : "";
}

// A seeded random gray image with some structure (so it is not constant and
// JPEG has both edges and smooth parts).
GrayImage RandomGray(int width, int height, uint32_t seed) {
  std::mt19937 rng(seed);
  GrayImage image;
  image.width = width;
  image.height = height;
  image.pixels.resize(static_cast<size_t>(width) * height);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) image.at(x, y) = static_cast<uint8_t>(rng() % 256);
  }
  return image;
}

struct Rgb {
  std::vector<uint8_t> samples;  // R, G, B per pixel, row-major
  GrayImage luma;                // what the decoders should return
};

Rgb RandomRgb(int width, int height, uint32_t seed) {
  std::mt19937 rng(seed);
  Rgb rgb;
  rgb.luma.width = width;
  rgb.luma.height = height;
  for (int i = 0; i < width * height; ++i) {
    const int r = rng() % 256, g = rng() % 256, b = rng() % 256;
    rgb.samples.insert(rgb.samples.end(), {static_cast<uint8_t>(r), static_cast<uint8_t>(g), static_cast<uint8_t>(b)});
    rgb.luma.pixels.push_back(ExpectedLuma(r, g, b));
  }
  return rgb;
}

void ExpectSamePixels(const GrayImage& expected, const GrayImage& actual) {
  ASSERT_EQ(actual.width, expected.width);
  ASSERT_EQ(actual.height, expected.height);
  ASSERT_EQ(actual.pixels.size(), expected.pixels.size());
  for (size_t i = 0; i < expected.pixels.size(); ++i) {
    ASSERT_EQ(actual.pixels[i], expected.pixels[i]) << "pixel " << i % expected.width << "," << i / expected.width;
  }
}

bool IsConstant(const GrayImage& image) {
  for (uint8_t p : image.pixels) {
    if (p != image.pixels[0]) return false;
  }
  return true;
}

// ---------------------------------------------------------------- real data

// FVC2002 set B: 8-bit gray, little-endian, 1x1 "dpi" (so ppi 0). Sizes as
// decoded, width x height: DB1 388x374, DB2 296x560, DB3 300x300, DB4
// 288x384 (DB2 is the tall one: 296 wide, 560 high).
TEST(ImageDecodeTest, AllFvc2002TiffsDecode) {
  const std::string dir = DataDir();
  ASSERT_FALSE(dir.empty());
  const int kWidth[] = {388, 296, 300, 288};
  const int kHeight[] = {374, 560, 300, 384};
  int decoded = 0;
  for (int db = 1; db <= 4; ++db) {
    for (int finger = 101; finger <= 110; ++finger) {
      for (int impression = 1; impression <= 8; ++impression) {
        const std::string path = absl::StrCat(dir, "/fvc2002/DB", db, "_B/", finger, "_", impression, ".tif");
        const std::string bytes = ReadFile(path);
        ASSERT_FALSE(bytes.empty()) << path;
        EXPECT_EQ(DetectImageFormat(bytes), ImageFormat::kTiff) << path;
        absl::StatusOr<GrayImage> image = DecodeGrayImage(bytes);
        ASSERT_TRUE(image.ok()) << path << ": " << image.status();
        EXPECT_EQ(image->width, kWidth[db - 1]) << path;
        EXPECT_EQ(image->height, kHeight[db - 1]) << path;
        EXPECT_EQ(image->ppi, 0) << path;
        EXPECT_EQ(image->pixels.size(), static_cast<size_t>(image->width) * image->height) << path;
        EXPECT_FALSE(IsConstant(*image)) << path;
        ++decoded;
      }
    }
  }
  EXPECT_EQ(decoded, 320);
}

TEST(ImageDecodeTest, FvcTiffWithRequestPpiResamples) {
  // DB2 (FX2000, 569 ppi): 296x560 -> round(296*500/569) x round(560*500/569).
  const std::string bytes = ReadFile(DataDir() + "/fvc2002/DB2_B/101_1.tif");
  DecodeOptions options;
  options.ppi = 569;
  absl::StatusOr<GrayImage> image = DecodeGrayImage(bytes, options);
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->ppi, 569);
  absl::StatusOr<GrayImage> at500 = ResampleTo500Ppi(*image);
  ASSERT_TRUE(at500.ok()) << at500.status();
  EXPECT_EQ(at500->width, 260);
  EXPECT_EQ(at500->height, 492);
  EXPECT_EQ(at500->ppi, 500);
  // No ppi at all: the resampler refuses.
  absl::StatusOr<GrayImage> plain = DecodeGrayImage(bytes);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(ResampleTo500Ppi(*plain).status().code(), absl::StatusCode::kFailedPrecondition);
}

// NIST NBIS SIVV card0003_05.bmp: 743x775, 8-bit gray palette, bottom-up,
// 39370 pixels per metre = 999.998 ppi.
TEST(ImageDecodeTest, NistBmpDecodesAndHalves) {
  const std::string bytes = ReadFile(DataDir() + "/nist/nbis-sivv-1000ppi/card0003_05.bmp");
  ASSERT_FALSE(bytes.empty());
  EXPECT_EQ(DetectImageFormat(bytes), ImageFormat::kBmp);
  absl::StatusOr<GrayImage> image = DecodeGrayImage(bytes);
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->width, 743);
  EXPECT_EQ(image->height, 775);
  EXPECT_NEAR(image->ppi, 1000, 0.01);
  EXPECT_FALSE(IsConstant(*image));
  // The file's last row (bottom-up) is the image's first.
  const uint32_t offset = static_cast<uint8_t>(bytes[10]) | static_cast<uint8_t>(bytes[11]) << 8;
  const size_t stride = (743 + 3) / 4 * 4;
  EXPECT_EQ(image->at(5, 0), static_cast<uint8_t>(bytes[offset + 774 * stride + 5]));  // gray palette: index = value
  EXPECT_EQ(image->at(5, 774), static_cast<uint8_t>(bytes[offset + 5]));

  absl::StatusOr<GrayImage> half = ResampleTo500Ppi(*image);
  ASSERT_TRUE(half.ok()) << half.status();
  EXPECT_EQ(half->width, 372);   // round(371.5)
  EXPECT_EQ(half->height, 388);  // round(387.5)
  EXPECT_EQ(half->ppi, 500);
  for (int y = 0; y < half->height; ++y) {
    for (int x = 0; x < half->width; ++x) {
      int sum = 0, count = 0;
      for (int dy = 0; dy < 2; ++dy) {
        for (int dx = 0; dx < 2; ++dx) {
          if (2 * x + dx < image->width && 2 * y + dy < image->height) {
            sum += image->at(2 * x + dx, 2 * y + dy);
            ++count;
          }
        }
      }
      ASSERT_EQ(half->at(x, y), (sum + count / 2) / count) << x << "," << y;
    }
  }
}

// ---------------------------------------------------------------- PNG

TEST(PngDecodeTest, GrayRoundTripAndPhys) {
  const GrayImage gray = RandomGray(67, 41, 1);
  PngSpec spec = GrayPng(gray);
  spec.x_ppm = 19685;  // 500 ppi
  const std::string png = EncodePng(spec);
  EXPECT_EQ(DetectImageFormat(png), ImageFormat::kPng);
  absl::StatusOr<GrayImage> image = DecodeGrayImage(png);
  ASSERT_TRUE(image.ok()) << image.status();
  ExpectSamePixels(gray, *image);
  EXPECT_NEAR(image->ppi, 19685 * 0.0254, 1e-9);  // 499.999

  DecodeOptions options;
  options.ppi = 1000;
  image = DecodeGrayImage(png, options);
  ASSERT_TRUE(image.ok());
  EXPECT_EQ(image->ppi, 1000);
}

TEST(PngDecodeTest, NoPhysOrUnknownUnitIsPpi0) {
  const GrayImage gray = RandomGray(10, 10, 2);
  PngSpec spec = GrayPng(gray);
  EXPECT_EQ(DecodeGrayImage(EncodePng(spec))->ppi, 0);
  spec.x_ppm = 19685;
  spec.phys_unit = PNG_RESOLUTION_UNKNOWN;  // an aspect ratio only
  EXPECT_EQ(DecodeGrayImage(EncodePng(spec))->ppi, 0);
}

TEST(PngDecodeTest, RgbBecomesLuma) {
  const Rgb rgb = RandomRgb(33, 17, 3);
  PngSpec spec;
  spec.width = 33;
  spec.height = 17;
  spec.color_type = PNG_COLOR_TYPE_RGB;
  spec.data = rgb.samples;
  absl::StatusOr<GrayImage> image = DecodeGrayImage(EncodePng(spec));
  ASSERT_TRUE(image.ok()) << image.status();
  ExpectSamePixels(rgb.luma, *image);
}

TEST(PngDecodeTest, RgbaDropsAlpha) {
  const Rgb rgb = RandomRgb(20, 9, 4);
  PngSpec spec;
  spec.width = 20;
  spec.height = 9;
  spec.color_type = PNG_COLOR_TYPE_RGB_ALPHA;
  for (size_t i = 0; i < rgb.samples.size(); i += 3) {
    spec.data.insert(spec.data.end(),
                     {rgb.samples[i], rgb.samples[i + 1], rgb.samples[i + 2], static_cast<uint8_t>(i)});
  }
  absl::StatusOr<GrayImage> image = DecodeGrayImage(EncodePng(spec));
  ASSERT_TRUE(image.ok()) << image.status();
  ExpectSamePixels(rgb.luma, *image);
}

TEST(PngDecodeTest, GrayAlphaAnd16BitAndInterlaced) {
  const GrayImage gray = RandomGray(31, 29, 5);
  PngSpec spec = GrayPng(gray);
  spec.color_type = PNG_COLOR_TYPE_GRAY_ALPHA;
  spec.data.clear();
  for (uint8_t v : gray.pixels) spec.data.insert(spec.data.end(), {v, 200});
  absl::StatusOr<GrayImage> image = DecodeGrayImage(EncodePng(spec));
  ASSERT_TRUE(image.ok()) << image.status();
  ExpectSamePixels(gray, *image);

  // 16-bit: v * 257 scales back to v exactly; v * 257 + 100 rounds to v too.
  spec = GrayPng(gray);
  spec.bit_depth = 16;
  spec.data.clear();
  for (uint8_t v : gray.pixels) {
    const int wide = v * 257 + (v < 255 ? 100 : 0);
    spec.data.insert(spec.data.end(), {static_cast<uint8_t>(wide >> 8), static_cast<uint8_t>(wide & 0xff)});
  }
  image = DecodeGrayImage(EncodePng(spec));
  ASSERT_TRUE(image.ok()) << image.status();
  ExpectSamePixels(gray, *image);

  spec = GrayPng(gray);
  spec.interlace = PNG_INTERLACE_ADAM7;
  image = DecodeGrayImage(EncodePng(spec));
  ASSERT_TRUE(image.ok()) << image.status();
  ExpectSamePixels(gray, *image);
}

TEST(PngDecodeTest, PaletteAndOneBit) {
  std::vector<png_color> palette;
  std::vector<uint8_t> palette_luma;
  std::mt19937 rng(6);
  for (int i = 0; i < 256; ++i) {
    png_color c{static_cast<png_byte>(rng() % 256), static_cast<png_byte>(rng() % 256),
                static_cast<png_byte>(rng() % 256)};
    palette.push_back(c);
    palette_luma.push_back(ExpectedLuma(c.red, c.green, c.blue));
  }
  const GrayImage indices = RandomGray(25, 19, 7);
  PngSpec spec = GrayPng(indices);
  spec.color_type = PNG_COLOR_TYPE_PALETTE;
  spec.palette = palette;
  GrayImage expected = indices;
  for (uint8_t& p : expected.pixels) p = palette_luma[p];
  absl::StatusOr<GrayImage> image = DecodeGrayImage(EncodePng(spec));
  ASSERT_TRUE(image.ok()) << image.status();
  ExpectSamePixels(expected, *image);

  // 1-bit gray: 0 -> 0, 1 -> 255. 10 pixels a row: 2 bytes.
  spec = PngSpec();
  spec.width = 10;
  spec.height = 2;
  spec.bit_depth = 1;
  spec.data = {0xA5, 0x40, 0x00, 0xC0};
  image = DecodeGrayImage(EncodePng(spec));
  ASSERT_TRUE(image.ok()) << image.status();
  const std::vector<uint8_t> want = {255, 0, 255, 0, 0, 255, 0, 255, 0, 255, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255};
  EXPECT_EQ(image->pixels, want);
}

TEST(PngDecodeTest, OneByOneBlackAndWhite) {
  GrayImage one;
  one.width = one.height = 1;
  one.pixels = {0};
  absl::StatusOr<GrayImage> image = DecodeGrayImage(EncodePng(GrayPng(one)));
  ASSERT_TRUE(image.ok()) << image.status();
  ExpectSamePixels(one, *image);
  one.pixels = {255};
  image = DecodeGrayImage(EncodePng(GrayPng(one)));
  ASSERT_TRUE(image.ok()) << image.status();
  ExpectSamePixels(one, *image);
}

// PNG's CRC-32 (ISO 3309), bitwise.
uint32_t Crc32(const char* data, size_t n) {
  uint32_t crc = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) {
    crc ^= static_cast<uint8_t>(data[i]);
    for (int k = 0; k < 8; ++k) crc = crc & 1 ? (crc >> 1) ^ 0xedb88320u : crc >> 1;
  }
  return ~crc;
}

// Overwrites IHDR's width and height and fixes its CRC.
std::string PngWithSize(std::string png, uint32_t width, uint32_t height) {
  for (int i = 0; i < 4; ++i) {
    png[16 + i] = static_cast<char>(width >> (24 - 8 * i));
    png[20 + i] = static_cast<char>(height >> (24 - 8 * i));
  }
  const uint32_t crc = Crc32(png.data() + 12, 17);  // "IHDR" and its 13 bytes
  for (int i = 0; i < 4; ++i) png[29 + i] = static_cast<char>(crc >> (24 - 8 * i));
  return png;
}

TEST(PngDecodeTest, HugeHeaderIsRefusedBeforeDecoding) {
  const std::string png = EncodePng(GrayPng(RandomGray(8, 8, 8)));
  absl::StatusOr<GrayImage> image = DecodeGrayImage(PngWithSize(png, 100000, 100000));
  EXPECT_EQ(image.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(image.status().message()), HasSubstr("PNG image of 100000x100000 is larger than the limit"));
  // A small limit applies to small images too.
  DecodeOptions options;
  options.max_pixels = 63;
  image = DecodeGrayImage(png, options);
  EXPECT_EQ(image.status().code(), absl::StatusCode::kInvalidArgument) << image.status();
  options.max_pixels = 64;
  EXPECT_TRUE(DecodeGrayImage(png, options).ok());
}

TEST(PngDecodeTest, BrokenFilesAreInvalidArgument) {
  const std::string png = EncodePng(GrayPng(RandomGray(16, 16, 9)));
  absl::StatusOr<GrayImage> image = DecodeGrayImage(png.substr(0, png.size() / 2));
  EXPECT_EQ(image.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(image.status().message()), HasSubstr("PNG: "));
  image = DecodeGrayImage(PngWithSize(png, 0, 16));
  EXPECT_EQ(image.status().code(), absl::StatusCode::kInvalidArgument);
  std::string bad_crc = png;
  bad_crc[20] ^= 1;  // IHDR height, CRC unchanged
  EXPECT_EQ(DecodeGrayImage(bad_crc).status().code(), absl::StatusCode::kInvalidArgument);
  DecodeOptions as_png;
  as_png.format = ImageFormat::kPng;
  image = DecodeGrayImage("definitely not a png", as_png);
  EXPECT_EQ(image.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(image.status().message()), HasSubstr("PNG"));
}

// ---------------------------------------------------------------- TIFF

TEST(TiffDecodeTest, GrayRoundTripsInEveryLayout) {
  const GrayImage gray = RandomGray(45, 37, 10);
  struct Case {
    const char* name;
    std::function<void(TiffSpec*)> change;
  };
  const Case cases[] = {
      {"plain", [](TiffSpec*) {}},
      {"big-endian", [](TiffSpec* s) { s->big_endian = true; }},
      {"one row per strip", [](TiffSpec* s) { s->rows_per_strip = 1; }},
      {"LZW", [](TiffSpec* s) { s->compression = COMPRESSION_LZW; }},
      {"deflate", [](TiffSpec* s) { s->compression = COMPRESSION_ADOBE_DEFLATE; }},
      {"PackBits", [](TiffSpec* s) { s->compression = COMPRESSION_PACKBITS; }},
      {"tiled (RGBA fallback)", [](TiffSpec* s) { s->tiled = true; }},
      {"two pages (first read)", [](TiffSpec* s) { s->pages = 2; }},
  };
  for (const Case& c : cases) {
    TiffSpec spec = GrayTiff(gray);
    c.change(&spec);
    const std::string tiff = EncodeTiff(spec);
    ASSERT_FALSE(tiff.empty()) << c.name;
    EXPECT_EQ(DetectImageFormat(tiff), ImageFormat::kTiff) << c.name;
    absl::StatusOr<GrayImage> image = DecodeGrayImage(tiff);
    ASSERT_TRUE(image.ok()) << c.name << ": " << image.status();
    SCOPED_TRACE(c.name);
    ExpectSamePixels(gray, *image);
    EXPECT_EQ(image->ppi, 0);
  }
}

TEST(TiffDecodeTest, MinIsWhiteInverts) {
  const GrayImage gray = RandomGray(21, 13, 11);
  TiffSpec spec = GrayTiff(gray);
  spec.photometric = PHOTOMETRIC_MINISWHITE;
  GrayImage expected = gray;
  for (uint8_t& p : expected.pixels) p = static_cast<uint8_t>(255 - p);
  absl::StatusOr<GrayImage> image = DecodeGrayImage(EncodeTiff(spec));
  ASSERT_TRUE(image.ok()) << image.status();
  ExpectSamePixels(expected, *image);
}

TEST(TiffDecodeTest, SixteenBitGray) {
  const GrayImage gray = RandomGray(19, 23, 12);
  TiffSpec spec = GrayTiff(gray);
  spec.bits = 16;
  spec.data.clear();
  for (uint8_t v : gray.pixels) {
    const uint16_t wide = static_cast<uint16_t>(v * 257);
    uint8_t b[2];
    std::memcpy(b, &wide, 2);
    spec.data.insert(spec.data.end(), {b[0], b[1]});
  }
  for (bool big_endian : {false, true}) {
    spec.big_endian = big_endian;
    absl::StatusOr<GrayImage> image = DecodeGrayImage(EncodeTiff(spec));
    ASSERT_TRUE(image.ok()) << image.status();
    ExpectSamePixels(gray, *image);
  }
}

TEST(TiffDecodeTest, RgbAndPaletteBecomeLuma) {
  const Rgb rgb = RandomRgb(26, 14, 13);
  TiffSpec spec;
  spec.width = 26;
  spec.height = 14;
  spec.samples = 3;
  spec.photometric = PHOTOMETRIC_RGB;
  spec.data = rgb.samples;
  absl::StatusOr<GrayImage> image = DecodeGrayImage(EncodeTiff(spec));
  ASSERT_TRUE(image.ok()) << image.status();
  ExpectSamePixels(rgb.luma, *image);
  spec.tiled = true;  // through TIFFReadRGBAImageOriented
  image = DecodeGrayImage(EncodeTiff(spec));
  ASSERT_TRUE(image.ok()) << image.status();
  ExpectSamePixels(rgb.luma, *image);

  const GrayImage indices = RandomGray(17, 11, 14);
  TiffSpec palette_spec = GrayTiff(indices);
  palette_spec.photometric = PHOTOMETRIC_PALETTE;
  std::mt19937 rng(15);
  std::vector<uint8_t> r(256), g(256), b(256);
  for (int i = 0; i < 256; ++i) r[i] = rng() % 256, g[i] = rng() % 256, b[i] = rng() % 256;
  for (const auto* channel : {&r, &g, &b}) {
    for (uint8_t v : *channel) palette_spec.colormap.push_back(static_cast<uint16_t>(v * 257));
  }
  GrayImage expected = indices;
  for (uint8_t& p : expected.pixels) p = ExpectedLuma(r[p], g[p], b[p]);
  image = DecodeGrayImage(EncodeTiff(palette_spec));
  ASSERT_TRUE(image.ok()) << image.status();
  ExpectSamePixels(expected, *image);
}

TEST(TiffDecodeTest, ResolutionBecomesPpi) {
  const GrayImage gray = RandomGray(8, 8, 16);
  TiffSpec spec = GrayTiff(gray);
  spec.x_resolution = 500;
  EXPECT_EQ(DecodeGrayImage(EncodeTiff(spec))->ppi, 500);
  spec.x_resolution = 200;
  spec.resolution_unit = RESUNIT_CENTIMETER;
  EXPECT_NEAR(DecodeGrayImage(EncodeTiff(spec))->ppi, 508, 1e-3);
  spec.x_resolution = 500;
  spec.resolution_unit = RESUNIT_NONE;
  EXPECT_EQ(DecodeGrayImage(EncodeTiff(spec))->ppi, 0);
  spec.x_resolution = 1;  // FVC2002's placeholder
  spec.resolution_unit = RESUNIT_INCH;
  EXPECT_EQ(DecodeGrayImage(EncodeTiff(spec))->ppi, 0);
  DecodeOptions options;
  options.ppi = 569;
  EXPECT_EQ(DecodeGrayImage(EncodeTiff(spec), options)->ppi, 569);
}

// A little-endian TIFF with one IFD saying width x height, 8-bit gray, one
// strip of 1 byte: the directory is all there is to it.
std::string TiffHeaderOnly(uint32_t width, uint32_t height) {
  std::string s("II*\0", 4);
  Put32(&s, 8);
  const uint16_t entries = 6;
  Put16(&s, entries);
  auto entry = [&s](uint16_t tag, uint16_t type, uint32_t count, uint32_t value) {
    Put16(&s, tag);
    Put16(&s, type);
    Put32(&s, count);
    Put32(&s, value);
  };
  const uint32_t data_offset = 8 + 2 + entries * 12 + 4;
  entry(TIFFTAG_IMAGEWIDTH, 4, 1, width);
  entry(TIFFTAG_IMAGELENGTH, 4, 1, height);
  entry(TIFFTAG_BITSPERSAMPLE, 3, 1, 8);
  entry(TIFFTAG_PHOTOMETRIC, 3, 1, PHOTOMETRIC_MINISBLACK);
  entry(TIFFTAG_STRIPOFFSETS, 4, 1, data_offset);
  entry(TIFFTAG_STRIPBYTECOUNTS, 4, 1, 1);
  Put32(&s, 0);
  s.push_back('\x80');
  return s;
}

TEST(TiffDecodeTest, HugeHeaderIsRefusedAndSmallOneReads) {
  absl::StatusOr<GrayImage> image = DecodeGrayImage(TiffHeaderOnly(100000, 100000));
  EXPECT_EQ(image.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(image.status().message()), HasSubstr("TIFF image of 100000x100000 is larger than the limit"));
  image = DecodeGrayImage(TiffHeaderOnly(1, 1));
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->width, 1);
  EXPECT_EQ(image->pixels, std::vector<uint8_t>{0x80});
  image = DecodeGrayImage(TiffHeaderOnly(0, 5));
  EXPECT_EQ(image.status().code(), absl::StatusCode::kInvalidArgument);
  // Claims 4x4 but the strip holds 1 byte.
  image = DecodeGrayImage(TiffHeaderOnly(4, 4));
  EXPECT_EQ(image.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(image.status().message()), HasSubstr("TIFF"));
}

TEST(TiffDecodeTest, TruncatedIsInvalidArgument) {
  const std::string tiff = EncodeTiff(GrayTiff(RandomGray(40, 40, 17)));
  // libtiff writes the pixels first and the directory last: cut into the
  // header, the pixels' references and the directory's entries.
  for (size_t size : {size_t{0}, size_t{4}, size_t{7}, size_t{20}, tiff.size() / 2, tiff.size() - 20}) {
    DecodeOptions options;
    options.format = ImageFormat::kTiff;
    absl::StatusOr<GrayImage> image = DecodeGrayImage(tiff.substr(0, size), options);
    EXPECT_EQ(image.status().code(), absl::StatusCode::kInvalidArgument) << size << ": " << image.status();
    EXPECT_THAT(std::string(image.status().message()), HasSubstr("TIFF")) << size;
  }
}

// ---------------------------------------------------------------- JPEG

// Quality 100 is not lossless: the DCT's rounding moves pixels. Tolerance:
// at most 2 levels per pixel and 0.25 on average (measured with
// libjpeg-turbo 2.1.5 on these images: max 1, mean 0.09, gray and RGB).
constexpr int kJpegMaxError = 2;
constexpr double kJpegMeanError = 0.25;

void ExpectJpegClose(const GrayImage& expected, const GrayImage& actual) {
  ASSERT_EQ(actual.width, expected.width);
  ASSERT_EQ(actual.height, expected.height);
  ASSERT_EQ(actual.pixels.size(), expected.pixels.size());
  int worst = 0;
  double total = 0;
  for (size_t i = 0; i < expected.pixels.size(); ++i) {
    const int d = std::abs(actual.pixels[i] - expected.pixels[i]);
    worst = std::max(worst, d);
    total += d;
  }
  EXPECT_LE(worst, kJpegMaxError);
  EXPECT_LE(total / expected.pixels.size(), kJpegMeanError);
}

TEST(JpegDecodeTest, GrayRoundTripWithinTolerance) {
  const GrayImage gray = RandomGray(50, 35, 18);
  const std::string jpeg = EncodeJpeg(50, 35, 1, gray.pixels, 100, /*density_unit=*/1, 500);
  EXPECT_EQ(DetectImageFormat(jpeg), ImageFormat::kJpeg);
  absl::StatusOr<GrayImage> image = DecodeGrayImage(jpeg);
  ASSERT_TRUE(image.ok()) << image.status();
  ExpectJpegClose(gray, *image);
  EXPECT_EQ(image->ppi, 500);
}

TEST(JpegDecodeTest, RgbBecomesLumaWithinTolerance) {
  const Rgb rgb = RandomRgb(40, 24, 19);
  absl::StatusOr<GrayImage> image = DecodeGrayImage(EncodeJpeg(40, 24, 3, rgb.samples, 100));
  ASSERT_TRUE(image.ok()) << image.status();
  ExpectJpegClose(rgb.luma, *image);
  EXPECT_EQ(image->ppi, 0);  // JFIF 1:1 aspect ratio only
}

TEST(JpegDecodeTest, DensityBecomesPpi) {
  const GrayImage gray = RandomGray(16, 16, 20);
  EXPECT_NEAR(DecodeGrayImage(EncodeJpeg(16, 16, 1, gray.pixels, 90, 2, 197))->ppi, 500.38, 1e-6);  // dots/cm
  EXPECT_EQ(DecodeGrayImage(EncodeJpeg(16, 16, 1, gray.pixels, 90, 1, 1000))->ppi, 1000);
  EXPECT_EQ(DecodeGrayImage(EncodeJpeg(16, 16, 1, gray.pixels, 90, 1, 1))->ppi, 0);  // 1 dpi: a placeholder
  DecodeOptions options;
  options.ppi = 700;
  EXPECT_EQ(DecodeGrayImage(EncodeJpeg(16, 16, 1, gray.pixels, 90, 1, 1000), options)->ppi, 700);
}

TEST(JpegDecodeTest, HugeHeaderTruncatedAndGarbageAreInvalidArgument) {
  const GrayImage gray = RandomGray(16, 16, 21);
  std::string jpeg = EncodeJpeg(16, 16, 1, gray.pixels, 90);
  // SOF0 (FFC0): length(2) precision(1) height(2) width(2).
  const size_t sof = jpeg.find("\xff\xc0");
  ASSERT_NE(sof, std::string::npos);
  std::string huge = jpeg;
  // 20000 x 20000 (JPEG sizes are 16-bit; libjpeg-turbo itself stops at 65500).
  huge[sof + 5] = huge[sof + 7] = '\x4e';
  huge[sof + 6] = huge[sof + 8] = '\x20';
  absl::StatusOr<GrayImage> image = DecodeGrayImage(huge);
  EXPECT_EQ(image.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(image.status().message()), HasSubstr("JPEG image of 20000x20000 is larger than the limit"));
  huge[sof + 5] = huge[sof + 6] = huge[sof + 7] = huge[sof + 8] = '\xff';  // 65535 x 65535: libjpeg refuses
  EXPECT_EQ(DecodeGrayImage(huge).status().code(), absl::StatusCode::kInvalidArgument);

  image = DecodeGrayImage(jpeg.substr(0, jpeg.size() * 2 / 3));
  EXPECT_EQ(image.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(image.status().message()), HasSubstr("JPEG: "));
  image = DecodeGrayImage(std::string("\xff\xd8\xff\xe0 and then nothing useful"));
  EXPECT_EQ(image.status().code(), absl::StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------- BMP

TEST(BmpDecodeTest, EightBitGrayPaletteBottomUp) {
  const GrayImage gray = RandomGray(37, 23, 22);  // 37: rows padded by 3 bytes
  BmpSpec spec;
  spec.width = 37;
  spec.height = 23;
  spec.palette = GrayPalette();
  spec.pixel = [&gray](int x, int y) { return gray.at(x, y); };
  spec.x_ppm = 19685;
  const std::string bmp = EncodeBmp(spec);
  EXPECT_EQ(DetectImageFormat(bmp), ImageFormat::kBmp);
  absl::StatusOr<GrayImage> image = DecodeGrayImage(bmp);
  ASSERT_TRUE(image.ok()) << image.status();
  ExpectSamePixels(gray, *image);
  EXPECT_NEAR(image->ppi, 500, 0.01);
  DecodeOptions options;
  options.ppi = 333;
  EXPECT_EQ(DecodeGrayImage(bmp, options)->ppi, 333);
}

TEST(BmpDecodeTest, ColourPaletteBecomesLuma) {
  const GrayImage indices = RandomGray(30, 10, 23);
  std::mt19937 rng(24);
  BmpSpec spec;
  spec.width = 30;
  spec.height = 10;
  for (int i = 0; i < 256; ++i) spec.palette.push_back(rng() & 0xffffff);
  spec.pixel = [&indices](int x, int y) { return indices.at(x, y); };
  GrayImage expected = indices;
  for (uint8_t& p : expected.pixels) {
    const uint32_t c = spec.palette[p];
    p = ExpectedLuma(c >> 16 & 0xff, c >> 8 & 0xff, c & 0xff);
  }
  absl::StatusOr<GrayImage> image = DecodeGrayImage(EncodeBmp(spec));
  ASSERT_TRUE(image.ok()) << image.status();
  ExpectSamePixels(expected, *image);
  EXPECT_EQ(image->ppi, 0);
}

TEST(BmpDecodeTest, TwentyFourAndThirtyTwoBitTopDownAndV5) {
  const Rgb rgb = RandomRgb(29, 15, 25);
  BmpSpec spec;
  spec.width = 29;
  spec.height = 15;
  spec.bits = 24;
  spec.top_down = true;
  spec.pixel = [&rgb](int x, int y) {
    const uint8_t* p = &rgb.samples[(y * 29 + x) * 3];
    return static_cast<uint32_t>(p[0]) << 16 | p[1] << 8 | p[2];
  };
  absl::StatusOr<GrayImage> image = DecodeGrayImage(EncodeBmp(spec));
  ASSERT_TRUE(image.ok()) << image.status();
  ExpectSamePixels(rgb.luma, *image);

  spec.top_down = false;
  spec.bits = 32;
  image = DecodeGrayImage(EncodeBmp(spec));
  ASSERT_TRUE(image.ok()) << image.status();
  ExpectSamePixels(rgb.luma, *image);

  spec.header_size = 124;  // BITMAPV5HEADER with plain 8-bit masks
  spec.compression = 3;
  image = DecodeGrayImage(EncodeBmp(spec));
  ASSERT_TRUE(image.ok()) << image.status();
  ExpectSamePixels(rgb.luma, *image);
  spec.header_size = 40;  // BITMAPINFOHEADER followed by the masks
  image = DecodeGrayImage(EncodeBmp(spec));
  ASSERT_TRUE(image.ok()) << image.status();
  ExpectSamePixels(rgb.luma, *image);
}

TEST(BmpDecodeTest, OneBit) {
  BmpSpec spec;
  spec.width = 13;  // 2 bytes of bits, padded to 4
  spec.height = 3;
  spec.bits = 1;
  spec.palette = {0x000000, 0xffffff};
  spec.pixel = [](int x, int y) { return static_cast<uint32_t>((x + y) % 3 == 0); };
  absl::StatusOr<GrayImage> image = DecodeGrayImage(EncodeBmp(spec));
  ASSERT_TRUE(image.ok()) << image.status();
  for (int y = 0; y < 3; ++y) {
    for (int x = 0; x < 13; ++x) EXPECT_EQ(image->at(x, y), (x + y) % 3 == 0 ? 255 : 0) << x << "," << y;
  }
}

TEST(BmpDecodeTest, RefusesCompressionBadSizesAndShortData) {
  BmpSpec spec;
  spec.width = 8;
  spec.height = 8;
  spec.palette = GrayPalette();
  spec.pixel = [](int x, int y) { return static_cast<uint32_t>(x * y); };
  spec.compression = 1;  // BI_RLE8
  absl::StatusOr<GrayImage> image = DecodeGrayImage(EncodeBmp(spec));
  EXPECT_EQ(image.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(image.status().message()), HasSubstr("BMP compression 1 is not supported"));
  spec.compression = 0;
  const std::string good = EncodeBmp(spec);
  ASSERT_TRUE(DecodeGrayImage(good).ok());

  std::string huge = good;
  for (int i = 18; i < 26; ++i) huge[i] = 0;
  huge[18] = static_cast<char>(100000 & 0xff), huge[19] = static_cast<char>(100000 >> 8 & 0xff), huge[20] = 1;
  huge[22] = huge[18], huge[23] = huge[19], huge[24] = huge[20];
  image = DecodeGrayImage(huge);
  EXPECT_EQ(image.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(image.status().message()), HasSubstr("BMP image of 100000x100000 is larger than the limit"));

  std::string zero = good;
  for (int i = 18; i < 22; ++i) zero[i] = 0;
  EXPECT_EQ(DecodeGrayImage(zero).status().code(), absl::StatusCode::kInvalidArgument);

  image = DecodeGrayImage(good.substr(0, good.size() - 9));  // the last row is short
  EXPECT_EQ(image.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(image.status().message()), HasSubstr("past the end"));

  std::string far_offset = good;
  far_offset[13] = '\x7f';  // pixel data offset beyond the file
  EXPECT_EQ(DecodeGrayImage(far_offset).status().code(), absl::StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------- raw, detection

TEST(RawDecodeTest, SizeMustMatch) {
  const GrayImage gray = RandomGray(12, 7, 26);
  const std::string bytes(gray.pixels.begin(), gray.pixels.end());
  DecodeOptions options;
  options.format = ImageFormat::kRaw;
  options.raw_width = 12;
  options.raw_height = 7;
  options.ppi = 500;
  absl::StatusOr<GrayImage> image = DecodeGrayImage(bytes, options);
  ASSERT_TRUE(image.ok()) << image.status();
  ExpectSamePixels(gray, *image);
  EXPECT_EQ(image->ppi, 500);

  options.raw_height = 8;
  image = DecodeGrayImage(bytes, options);
  EXPECT_EQ(image.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(image.status().message()), HasSubstr("needs 96 bytes, got 84"));
  EXPECT_EQ(DecodeGrayImage(bytes + "x", options).status().code(), absl::StatusCode::kInvalidArgument);
  options.raw_height = 0;
  image = DecodeGrayImage(bytes, options);
  EXPECT_EQ(image.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(image.status().message()), HasSubstr("raw_width and raw_height"));
  options.raw_width = 0;
  options.raw_height = 7;
  EXPECT_EQ(DecodeGrayImage(bytes, options).status().code(), absl::StatusCode::kInvalidArgument);
  // Raw is never detected.
  EXPECT_EQ(DecodeGrayImage(bytes).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DetectTest, Signatures) {
  EXPECT_EQ(DetectImageFormat(std::string("\x89PNG\r\n\x1a\n....", 12)), ImageFormat::kPng);
  EXPECT_EQ(DetectImageFormat(std::string("II*\0rest", 8)), ImageFormat::kTiff);
  EXPECT_EQ(DetectImageFormat(std::string("MM\0*rest", 8)), ImageFormat::kTiff);
  EXPECT_EQ(DetectImageFormat("BM6\x04"), ImageFormat::kBmp);
  EXPECT_EQ(DetectImageFormat("\xff\xd8\xff\xe0"), ImageFormat::kJpeg);
  for (const char* wsq :
       {"\xff\xa0\xff\xa8", "\xff\xa0\xff\xa4", "\xff\xa0\xff\xa5", "\xff\xa0\xff\xa6", "\xff\xa0\xff\xa2"}) {
    EXPECT_EQ(DetectImageFormat(wsq), ImageFormat::kWsq) << absl::CHexEscape(wsq);
  }
  EXPECT_EQ(DetectImageFormat("\xff\xa0\xff\xa1"), ImageFormat::kUnknown);  // SOI then EOI
  EXPECT_EQ(DetectImageFormat("\xff\xa0"), ImageFormat::kUnknown);
  EXPECT_EQ(DetectImageFormat("just some text"), ImageFormat::kUnknown);
  EXPECT_EQ(DetectImageFormat(""), ImageFormat::kUnknown);
  EXPECT_EQ(DetectImageFormat("\x89PN"), ImageFormat::kUnknown);
  EXPECT_EQ(DetectImageFormat("II*"), ImageFormat::kUnknown);
}

TEST(DetectTest, UnknownFormatNamesTheFirstBytes) {
  absl::StatusOr<GrayImage> image = DecodeGrayImage(std::string("GIF89a\x01\x00\x02\x00", 10));
  EXPECT_EQ(image.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(image.status().message(), "not a PNG, TIFF, BMP, JPEG or WSQ image (first bytes \"GIF89a\\x01\\x00\")");
  image = DecodeGrayImage("");
  EXPECT_EQ(image.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(image.status().message()), HasSubstr("not a PNG, TIFF, BMP, JPEG or WSQ image"));
}

TEST(DetectTest, NamesParseAndPrint) {
  EXPECT_EQ(*ParseImageFormat("PNG"), ImageFormat::kPng);
  EXPECT_EQ(*ParseImageFormat("tif"), ImageFormat::kTiff);
  EXPECT_EQ(*ParseImageFormat("Tiff"), ImageFormat::kTiff);
  EXPECT_EQ(*ParseImageFormat("bmp"), ImageFormat::kBmp);
  EXPECT_EQ(*ParseImageFormat("JPG"), ImageFormat::kJpeg);
  EXPECT_EQ(*ParseImageFormat("jpeg"), ImageFormat::kJpeg);
  EXPECT_EQ(*ParseImageFormat("wsq"), ImageFormat::kWsq);
  EXPECT_EQ(*ParseImageFormat("raw"), ImageFormat::kRaw);
  EXPECT_EQ(ParseImageFormat("gif").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseImageFormat("").status().code(), absl::StatusCode::kInvalidArgument);
  for (ImageFormat f : {ImageFormat::kPng, ImageFormat::kTiff, ImageFormat::kBmp, ImageFormat::kJpeg, ImageFormat::kWsq,
                        ImageFormat::kRaw}) {
    EXPECT_EQ(*ParseImageFormat(ImageFormatName(f)), f);
  }
}

TEST(DecodeOptionsTest, BadOptionsAreInvalidArgument) {
  const std::string png = EncodePng(GrayPng(RandomGray(4, 4, 27)));
  DecodeOptions options;
  options.ppi = -1;
  EXPECT_EQ(DecodeGrayImage(png, options).status().code(), absl::StatusCode::kInvalidArgument);
  options.ppi = 0;
  options.max_pixels = 0;
  EXPECT_EQ(DecodeGrayImage(png, options).status().code(), absl::StatusCode::kInvalidArgument);
  // A forced format wins over the signature.
  options = DecodeOptions();
  options.format = ImageFormat::kBmp;
  EXPECT_EQ(DecodeGrayImage(png, options).status().code(), absl::StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------- resampling

TEST(ResampleTest, UnchangedWithinOnePercent) {
  GrayImage image = RandomGray(30, 20, 28);
  for (double ppi : {495.0, 500.0, 505.0}) {
    image.ppi = ppi;
    absl::StatusOr<GrayImage> out = ResampleTo500Ppi(image);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->pixels, image.pixels);
    EXPECT_EQ(out->ppi, 500);
  }
}

TEST(ResampleTest, RefusesUnknownAndOutOfRangePpi) {
  GrayImage image = RandomGray(10, 10, 29);
  for (double ppi : {0.0, 249.0, 2001.0, 72.0}) {
    image.ppi = ppi;
    EXPECT_EQ(ResampleTo500Ppi(image).status().code(), absl::StatusCode::kFailedPrecondition) << ppi;
  }
  image.ppi = 500;
  image.pixels.pop_back();
  EXPECT_EQ(ResampleTo500Ppi(image).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ResampleTest, SizesAndValues) {
  struct Case {
    int width, height;
    double ppi;
    int out_width, out_height;
  };
  // round(w * 500 / ppi): finer (area), whole factors (blocks), coarser (bilinear).
  for (const Case& c : std::vector<Case>{{296, 560, 569, 260, 492},
                                         {100, 80, 1000, 50, 40},
                                         {101, 81, 1000, 51, 41},
                                         {90, 60, 1500, 30, 20},
                                         {100, 80, 2000, 25, 20},
                                         {100, 80, 400, 125, 100},
                                         {64, 48, 250, 128, 96},
                                         {333, 77, 750, 222, 51}}) {
    GrayImage flat;
    flat.width = c.width;
    flat.height = c.height;
    flat.ppi = c.ppi;
    flat.pixels.assign(static_cast<size_t>(c.width) * c.height, 137);
    absl::StatusOr<GrayImage> out = ResampleTo500Ppi(flat);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->width, c.out_width) << c.ppi;
    EXPECT_EQ(out->height, c.out_height) << c.ppi;
    EXPECT_EQ(out->ppi, 500);
    ASSERT_EQ(out->pixels.size(), static_cast<size_t>(out->width) * out->height);
    for (uint8_t p : out->pixels) ASSERT_EQ(p, 137) << "a flat image stays flat at " << c.ppi;  // weights sum to 1
  }
}

TEST(ResampleTest, GradientsArePreserved) {
  // A horizontal ramp v = x at 750 ppi: output x covers source [1.5x, 1.5x + 1.5),
  // pixels weighted 1, 0.5 (x even: mean 1.5x + 1/3) or 0.5, 1 (x odd: 1.5x + 1/6).
  GrayImage ramp;
  ramp.width = 150;
  ramp.height = 6;
  ramp.ppi = 750;
  for (int y = 0; y < 6; ++y) {
    for (int x = 0; x < 150; ++x) ramp.pixels.push_back(static_cast<uint8_t>(x));
  }
  absl::StatusOr<GrayImage> out = ResampleTo500Ppi(ramp);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->width, 100);
  for (int x = 0; x < 100; ++x) EXPECT_NEAR(out->at(x, 2), 1.5 * x + (x % 2 == 0 ? 1.0 / 3 : 1.0 / 6), 0.5) << x;

  // Coarser: 250 ppi doubles; bilinear between pixel centres.
  ramp.ppi = 250;
  out = ResampleTo500Ppi(ramp);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->width, 300);
  for (int x = 1; x < 299; ++x) EXPECT_NEAR(out->at(x, 3), (x + 0.5) / 2 - 0.5, 0.51) << x;
  EXPECT_EQ(out->at(0, 0), 0);
  EXPECT_EQ(out->at(299, 0), 149);
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
