// Deterministic fuzzing of DecodeGrayImage (fixed seeds, a few seconds):
// small valid PNG, TIFF, JPEG and BMP images made here with libpng, libtiff,
// libjpeg and a BMP writer, and a real FVC2002 TIFF, are decoded at every
// truncation (every length near the headers, then in steps) and after
// thousands of random byte, bit, run, insert and delete mutations (PNG's
// chunk CRCs are also recomputed for half of them, so damage reaches past
// the checksums). Also: headers claiming 100000 x 100000 pixels, 1x1,
// all-black and blank images, random bytes with and without a signature,
// and empty input. Every result must be OK with a sane image or a clean
// INVALID_ARGUMENT, never a crash or a hang; the slowest decode is checked.
// For out-of-bounds reads run it under ASan: the repository defines no
// --config=asan, so use --copt=-fsanitize=address --linkopt=-fsanitize=address.
#include <png.h>
#include <tiffio.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "services/fingerprint/formats/fvc_data.h"
#include "services/fingerprint/image/image_decode.h"
#include "services/fingerprint/image/image_test_encoders.h"

namespace tessera {
namespace fingerprint {
namespace {

// A decode slower than this is taken for a hang (the slowest real one here,
// the FVC TIFF, takes about a millisecond).
constexpr double kMaxDecodeSeconds = 5;

// Pixel (x, y) of a test image: 0 black, 1 blank (255), else a seeded pattern.
using PixelFn = std::function<uint8_t(int x, int y, int channel)>;

PixelFn Pattern(uint32_t seed) {
  return [seed](int x, int y, int c) {
    return static_cast<uint8_t>((x * 7 + y * 13 + c * 50 + (x * y) % 11 + seed * 31) & 0xff);
  };
}
PixelFn Constant(uint8_t v) {
  return [v](int, int, int) { return v; };
}

// The seed images, made with the shared test encoders (image_test_encoders.h)
// from a PixelFn.

// channels 1 (gray) or 3 (RGB); bit_depth 8 or 16 (the low byte of a
// 16-bit sample is the high byte ^ 0x5a); pHYs 500 ppi.
std::string MakePng(int w, int h, int channels, int bit_depth, bool interlaced, const PixelFn& pixel) {
  PngSpec spec;
  spec.width = w;
  spec.height = h;
  spec.color_type = channels == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB;
  spec.bit_depth = bit_depth;
  spec.interlace = interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE;
  spec.x_ppm = 19685;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < channels; ++c) {
        const uint8_t v = pixel(x, y, c);
        spec.data.push_back(v);
        if (bit_depth == 16) spec.data.push_back(static_cast<uint8_t>(v ^ 0x5a));
      }
    }
  }
  return EncodePng(spec);
}

// 8-bit, 500 ppi; strips of 4 rows, or 16 x 16 tiles.
std::string MakeTiff(int w, int h, int channels, uint16_t compression, bool tiled, const PixelFn& pixel) {
  TiffSpec spec;
  spec.width = w;
  spec.height = h;
  spec.samples = static_cast<uint16_t>(channels);
  spec.photometric = channels == 1 ? PHOTOMETRIC_MINISBLACK : PHOTOMETRIC_RGB;
  spec.compression = compression;
  spec.tiled = tiled;
  spec.x_resolution = 500;
  spec.rows_per_strip = 4;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < channels; ++c) spec.data.push_back(pixel(x, y, c));
    }
  }
  return EncodeTiff(spec);
}

// Quality 90, 500 dpi.
std::string MakeJpeg(int w, int h, int channels, bool progressive, const PixelFn& pixel) {
  std::vector<uint8_t> samples;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < channels; ++c) samples.push_back(pixel(x, y, c));
    }
  }
  return EncodeJpeg(w, h, channels, samples, 90, 1, 500, progressive);
}

// bits 8 (gray palette, bottom-up) or 24 (top-down); 1000 ppi.
std::string MakeBmp(int w, int h, int bits, const PixelFn& pixel) {
  BmpSpec spec;
  spec.width = w;
  spec.height = h;
  spec.bits = bits;
  spec.top_down = bits != 8;
  if (bits == 8) spec.palette = GrayPalette();
  spec.pixel = [&pixel, bits](int x, int y) -> uint32_t {
    if (bits == 8) return pixel(x, y, 0);
    return static_cast<uint32_t>(pixel(x, y, 0)) << 16 | static_cast<uint32_t>(pixel(x, y, 1)) << 8 | pixel(x, y, 2);
  };
  spec.x_ppm = 39370;
  return EncodeBmp(spec);
}

uint32_t Crc32(const char* data, size_t n) {
  uint32_t crc = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) {
    crc ^= static_cast<uint8_t>(data[i]);
    for (int k = 0; k < 8; ++k) crc = crc & 1 ? (crc >> 1) ^ 0xedb88320u : crc >> 1;
  }
  return ~crc;
}

// Recomputes the CRC of every whole chunk, so a mutation inside a chunk is
// seen by the decoder rather than by the checksum.
void FixPngCrcs(std::string* png) {
  size_t pos = 8;
  while (pos + 12 <= png->size()) {
    const uint32_t length =
        static_cast<uint32_t>(static_cast<uint8_t>((*png)[pos]) << 24 | static_cast<uint8_t>((*png)[pos + 1]) << 16 |
                              static_cast<uint8_t>((*png)[pos + 2]) << 8 | static_cast<uint8_t>((*png)[pos + 3]));
    if (length > png->size() - pos - 12) return;
    const uint32_t crc = Crc32(png->data() + pos + 4, length + 4);
    for (int i = 0; i < 4; ++i) (*png)[pos + 8 + length + i] = static_cast<char>(crc >> (24 - 8 * i));
    pos += 12 + length;
  }
}

// Why `result` for `bytes` is not acceptable, or "" when it is.
std::string Problem(absl::string_view bytes, const absl::StatusOr<GrayImage>& result, int64_t max_pixels) {
  if (!result.ok()) {
    if (result.status().message().empty()) return "error without a message";
    // WSQ is another decoder's (possibly still a placeholder): any error.
    if (DetectImageFormat(bytes) == ImageFormat::kWsq) return "";
    if (result.status().code() != absl::StatusCode::kInvalidArgument) {
      return absl::StrCat("not INVALID_ARGUMENT: ", result.status().ToString());
    }
    return "";
  }
  const GrayImage& g = *result;
  if (g.width <= 0 || g.height <= 0) return absl::StrCat("empty image ", g.width, "x", g.height);
  if (static_cast<int64_t>(g.width) * g.height > max_pixels) return "image over max_pixels";
  if (g.pixels.size() != static_cast<size_t>(g.width) * g.height) {
    return absl::StrCat(g.width, "x", g.height, " image with ", g.pixels.size(), " pixels");
  }
  if (!std::isfinite(g.ppi) || g.ppi < 0) return absl::StrCat("ppi ", g.ppi);
  return "";
}

// Decodes `bytes`, checks the result and how long it took.
class Checker {
 public:
  // False (and a test failure naming `what`) on an unacceptable result.
  bool Check(const std::string& bytes, const std::string& what, const DecodeOptions& options = {}) {
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<GrayImage> result = DecodeGrayImage(bytes, options);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++decodes_;
    if (result.ok()) ++ok_;
    if (seconds > slowest_) {
      slowest_ = seconds;
      slowest_what_ = what;
    }
    const std::string problem = Problem(bytes, result, options.max_pixels);
    EXPECT_EQ(problem, "") << what;
    return problem.empty();
  }
  void ExpectNoHang() const {
    EXPECT_LT(slowest_, kMaxDecodeSeconds) << "slowest: " << slowest_what_;
    std::printf("%d decodes, %d OK, slowest %.4f s (%s)\n", decodes_, ok_, slowest_, slowest_what_.c_str());
  }

 private:
  int decodes_ = 0, ok_ = 0;
  double slowest_ = 0;
  std::string slowest_what_;
};

struct Seed {
  std::string name;
  std::string bytes;
  ImageFormat format;
};

std::vector<Seed> Seeds() {
  std::vector<Seed> seeds = {
      {"PNG gray 8-bit 40x30", MakePng(40, 30, 1, 8, false, Pattern(1)), ImageFormat::kPng},
      {"PNG RGB 16-bit interlaced 23x17", MakePng(23, 17, 3, 16, true, Pattern(2)), ImageFormat::kPng},
      {"TIFF gray 40x30", MakeTiff(40, 30, 1, COMPRESSION_NONE, false, Pattern(3)), ImageFormat::kTiff},
      {"TIFF gray LZW 40x30", MakeTiff(40, 30, 1, COMPRESSION_LZW, false, Pattern(4)), ImageFormat::kTiff},
      {"TIFF RGB tiled 32x32", MakeTiff(32, 32, 3, COMPRESSION_NONE, true, Pattern(5)), ImageFormat::kTiff},
      {"JPEG gray 40x30", MakeJpeg(40, 30, 1, false, Pattern(6)), ImageFormat::kJpeg},
      {"JPEG RGB progressive 33x21", MakeJpeg(33, 21, 3, true, Pattern(7)), ImageFormat::kJpeg},
      {"BMP 8-bit 37x23", MakeBmp(37, 23, 8, Pattern(8)), ImageFormat::kBmp},
      {"BMP 24-bit top-down 21x13", MakeBmp(21, 13, 24, Pattern(9)), ImageFormat::kBmp},
  };
  absl::StatusOr<std::string> dir = FindFingerprintDataDir();
  EXPECT_TRUE(dir.ok()) << dir.status();
  if (dir.ok()) {
    seeds.push_back({"FVC2002 DB3_B/101_1.tif", ReadFile(*dir + "/fvc2002/DB3_B/101_1.tif"), ImageFormat::kTiff});
  }
  return seeds;
}

TEST(ImageDecodeFuzzTest, SeedsDecode) {
  for (const Seed& seed : Seeds()) {
    ASSERT_FALSE(seed.bytes.empty()) << seed.name;
    EXPECT_EQ(DetectImageFormat(seed.bytes), seed.format) << seed.name;
    absl::StatusOr<GrayImage> image = DecodeGrayImage(seed.bytes);
    ASSERT_TRUE(image.ok()) << seed.name << ": " << image.status();
    EXPECT_EQ(Problem(seed.bytes, image, DecodeOptions().max_pixels), "") << seed.name;
  }
}

TEST(ImageDecodeFuzzTest, EveryTruncation) {
  Checker checker;
  for (const Seed& seed : Seeds()) {
    const size_t n = seed.bytes.size();
    const size_t step = std::max<size_t>(1, n / 400);
    for (size_t len = 0; len < n; len += len < 300 ? 1 : step) {
      if (!checker.Check(seed.bytes.substr(0, len), absl::StrCat(seed.name, " cut to ", len))) return;
      // The format forced, as a request would: the decoder sees the stub.
      DecodeOptions forced;
      forced.format = seed.format;
      if (len < 64 &&
          !checker.Check(seed.bytes.substr(0, len), absl::StrCat(seed.name, " cut to ", len, ", forced"), forced)) {
        return;
      }
    }
  }
  checker.ExpectNoHang();
}

std::string Mutate(std::string b, std::mt19937& rng, std::string* how) {
  if (b.empty()) return b;
  auto uniform = [&rng](size_t lo, size_t hi) { return std::uniform_int_distribution<size_t>(lo, hi)(rng); };
  // Half the mutations land in the first 128 bytes, where the headers are.
  auto position = [&]() {
    return uniform(0, 1) ? uniform(0, std::min<size_t>(b.size(), 128) - 1) : uniform(0, b.size() - 1);
  };
  const int kind = static_cast<int>(uniform(0, 6));
  switch (kind) {
    case 0: {  // one byte set to a random value
      const size_t at = position();
      b[at] = static_cast<char>(uniform(0, 255));
      *how = absl::StrCat("byte ", at, " set");
      break;
    }
    case 1: {  // 1-8 bits flipped
      const size_t flips = uniform(1, 8);
      for (size_t i = 0; i < flips; ++i) b[position()] ^= static_cast<char>(1u << uniform(0, 7));
      *how = absl::StrCat(flips, " bits flipped");
      break;
    }
    case 2: {  // 2-16 bytes set at random places
      const size_t count = uniform(2, 16);
      for (size_t i = 0; i < count; ++i) b[position()] = static_cast<char>(uniform(0, 255));
      *how = absl::StrCat(count, " bytes set");
      break;
    }
    case 3: {  // a run of 0x00 or 0xff (huge sizes, zero sizes)
      const size_t at = position(), len = std::min(uniform(1, 4), b.size() - at);
      const char v = uniform(0, 1) ? '\xff' : '\0';
      for (size_t i = 0; i < len; ++i) b[at + i] = v;
      *how = absl::StrCat(len, " bytes at ", at, " set to ", static_cast<int>(static_cast<uint8_t>(v)));
      break;
    }
    case 4: {  // bytes inserted
      const size_t at = position(), len = uniform(1, 16);
      b.insert(at, std::string(len, static_cast<char>(uniform(0, 255))));
      *how = absl::StrCat(len, " bytes inserted at ", at);
      break;
    }
    case 5: {  // bytes deleted
      const size_t at = position(), len = std::min(uniform(1, 16), b.size() - at);
      b.erase(at, len);
      *how = absl::StrCat(len, " bytes deleted at ", at);
      break;
    }
    default: {  // a block copied over another place
      const size_t from = uniform(0, b.size() - 1), to = position();
      const size_t len = std::min({uniform(1, 64), b.size() - from, b.size() - to});
      b.replace(to, len, b.substr(from, len));
      *how = absl::StrCat(len, " bytes copied from ", from, " to ", to);
      break;
    }
  }
  return b;
}

TEST(ImageDecodeFuzzTest, RandomMutations) {
  Checker checker;
  uint32_t seed_number = 0;
  for (const Seed& seed : Seeds()) {
    std::mt19937 rng(1000 + seed_number++);
    const int mutations = seed.name.rfind("FVC", 0) == 0 ? 1500 : 3000;
    for (int i = 0; i < mutations; ++i) {
      std::string how;
      std::string bytes = Mutate(seed.bytes, rng, &how);
      if (i % 3 == 0) bytes = Mutate(bytes, rng, &how);  // two mutations
      if (seed.format == ImageFormat::kPng && i % 2 == 0) FixPngCrcs(&bytes);
      if (!checker.Check(bytes, absl::StrCat(seed.name, " mutation ", i, " (last: ", how, ")"))) return;
    }
  }
  checker.ExpectNoHang();
}

std::string PngIhdrSize(std::string png, uint32_t w, uint32_t h) {
  for (int i = 0; i < 4; ++i) {
    png[16 + i] = static_cast<char>(w >> (24 - 8 * i));
    png[20 + i] = static_cast<char>(h >> (24 - 8 * i));
  }
  FixPngCrcs(&png);
  return png;
}

// A TIFF directory with just the size, 8-bit gray and one 1-byte strip.
std::string TiffClaiming(uint32_t w, uint32_t h) {
  std::string s("II*\0", 4);
  Put32(&s, 8);
  Put16(&s, 6);
  auto entry = [&s](uint16_t tag, uint16_t type, uint32_t value) {
    Put16(&s, tag);
    Put16(&s, type);
    Put32(&s, 1);
    Put32(&s, value);
  };
  entry(TIFFTAG_IMAGEWIDTH, 4, w);
  entry(TIFFTAG_IMAGELENGTH, 4, h);
  entry(TIFFTAG_BITSPERSAMPLE, 3, 8);
  entry(TIFFTAG_PHOTOMETRIC, 3, PHOTOMETRIC_MINISBLACK);
  entry(TIFFTAG_STRIPOFFSETS, 4, 8 + 2 + 6 * 12 + 4);
  entry(TIFFTAG_STRIPBYTECOUNTS, 4, 1);
  Put32(&s, 0);
  s.push_back('\0');
  return s;
}

std::string BmpClaiming(std::string bmp, uint32_t w, uint32_t h) {
  std::string fields;
  Put32(&fields, w);
  Put32(&fields, h);
  return bmp.replace(18, 8, fields);
}

std::string JpegClaiming(std::string jpeg, uint16_t w, uint16_t h) {
  const size_t sof = jpeg.find("\xff\xc0");  // length(2) precision(1) height(2) width(2)
  if (sof == std::string::npos) return "";
  jpeg[sof + 5] = static_cast<char>(h >> 8);
  jpeg[sof + 6] = static_cast<char>(h & 0xff);
  jpeg[sof + 7] = static_cast<char>(w >> 8);
  jpeg[sof + 8] = static_cast<char>(w & 0xff);
  return jpeg;
}

TEST(ImageDecodeFuzzTest, HugeHeadersAreRefusedCheaply) {
  const std::string png = MakePng(8, 8, 1, 8, false, Pattern(10));
  const std::string bmp = MakeBmp(8, 8, 8, Pattern(11));
  const std::string jpeg = MakeJpeg(8, 8, 1, false, Pattern(12));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"PNG 100000x100000", PngIhdrSize(png, 100000, 100000)},
      {"PNG 2^31-1 x 2^31-1", PngIhdrSize(png, 0x7fffffff, 0x7fffffff)},
      {"TIFF 100000x100000", TiffClaiming(100000, 100000)},
      {"TIFF 2^32-1 x 2^32-1", TiffClaiming(0xffffffff, 0xffffffff)},
      {"BMP 100000x100000", BmpClaiming(bmp, 100000, 100000)},
      {"BMP 100000x-100000", BmpClaiming(bmp, 100000, static_cast<uint32_t>(-100000))},
      {"BMP 2^31-1 x -2^31", BmpClaiming(bmp, 0x7fffffff, 0x80000000)},
      {"JPEG 20000x20000", JpegClaiming(jpeg, 20000, 20000)},
      {"JPEG 65535x65535", JpegClaiming(jpeg, 65535, 65535)},
  };
  for (const auto& [name, bytes] : cases) {
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<GrayImage> image = DecodeGrayImage(bytes);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(image.status().code(), absl::StatusCode::kInvalidArgument) << name << ": " << image.status();
    EXPECT_LT(seconds, 0.5) << name;  // nothing of that size was allocated or decoded
  }
  // Zero sizes.
  for (const auto& [name, bytes] :
       std::vector<std::pair<std::string, std::string>>{{"PNG 0x8", PngIhdrSize(png, 0, 8)},
                                                        {"TIFF 8x0", TiffClaiming(8, 0)},
                                                        {"BMP 0x8", BmpClaiming(bmp, 0, 8)},
                                                        {"BMP 8x0", BmpClaiming(bmp, 8, 0)},
                                                        {"JPEG 0x8", JpegClaiming(jpeg, 0, 8)}}) {
    EXPECT_EQ(DecodeGrayImage(bytes).status().code(), absl::StatusCode::kInvalidArgument) << name;
  }
}

TEST(ImageDecodeFuzzTest, OneByOneBlackAndBlankImages) {
  struct Maker {
    const char* name;
    std::function<std::string(int, int, const PixelFn&)> make;
  };
  const Maker makers[] = {
      {"PNG", [](int w, int h, const PixelFn& p) { return MakePng(w, h, 1, 8, false, p); }},
      {"PNG RGB 16-bit", [](int w, int h, const PixelFn& p) { return MakePng(w, h, 3, 16, false, p); }},
      {"TIFF", [](int w, int h, const PixelFn& p) { return MakeTiff(w, h, 1, COMPRESSION_NONE, false, p); }},
      {"TIFF LZW", [](int w, int h, const PixelFn& p) { return MakeTiff(w, h, 1, COMPRESSION_LZW, false, p); }},
      {"JPEG", [](int w, int h, const PixelFn& p) { return MakeJpeg(w, h, 1, false, p); }},
      {"JPEG RGB progressive", [](int w, int h, const PixelFn& p) { return MakeJpeg(w, h, 3, true, p); }},
      {"BMP 8-bit", [](int w, int h, const PixelFn& p) { return MakeBmp(w, h, 8, p); }},
      {"BMP 24-bit", [](int w, int h, const PixelFn& p) { return MakeBmp(w, h, 24, p); }},
  };
  for (const Maker& m : makers) {
    absl::StatusOr<GrayImage> one = DecodeGrayImage(m.make(1, 1, Constant(77)));
    ASSERT_TRUE(one.ok()) << m.name << " 1x1: " << one.status();
    EXPECT_EQ(one->width, 1) << m.name;
    EXPECT_EQ(one->height, 1) << m.name;
    EXPECT_NEAR(one->pixels[0], 77, 1) << m.name;  // JPEG may round; the others are exact
    for (uint8_t v : {0, 255}) {
      absl::StatusOr<GrayImage> flat = DecodeGrayImage(m.make(48, 32, Constant(v)));
      ASSERT_TRUE(flat.ok()) << m.name << " all " << int{v} << ": " << flat.status();
      ASSERT_EQ(flat->pixels.size(), 48u * 32u) << m.name;
      for (uint8_t p : flat->pixels) ASSERT_EQ(p, v) << m.name << " all " << int{v};
    }
  }
}

TEST(ImageDecodeFuzzTest, RandomBytesAndEmptyInput) {
  Checker checker;
  std::mt19937 rng(77);
  const std::string signatures[] = {"",
                                    std::string("\x89PNG\r\n\x1a\n", 8),
                                    std::string("II*\0", 4),
                                    std::string("MM\0*", 4),
                                    "BM",
                                    "\xff\xd8\xff",
                                    "\xff\xa0\xff\xa8"};
  for (const std::string& signature : signatures) {
    for (size_t length : {0, 1, 2, 3, 4, 7, 8, 15, 16, 54, 100, 1000, 10000, 100000}) {
      for (int round = 0; round < 5; ++round) {
        std::string bytes = signature;
        for (size_t i = 0; i < length; ++i) bytes.push_back(static_cast<char>(rng() & 0xff));
        if (!checker.Check(
                bytes, absl::StrCat(bytes.size(), " random bytes after \"", signature.size(), "\"-byte signature"))) {
          return;
        }
      }
    }
  }
  // Empty input, detected and forced.
  for (ImageFormat format : {ImageFormat::kUnknown, ImageFormat::kPng, ImageFormat::kTiff, ImageFormat::kBmp,
                             ImageFormat::kJpeg, ImageFormat::kRaw}) {
    DecodeOptions options;
    options.format = format;
    absl::StatusOr<GrayImage> image = DecodeGrayImage("", options);
    EXPECT_EQ(image.status().code(), absl::StatusCode::kInvalidArgument) << ImageFormatName(format);
    options.raw_width = options.raw_height = 1;
    EXPECT_FALSE(DecodeGrayImage("", options).ok()) << ImageFormatName(format);
  }
  // Each seed decoded as every other format: refused, never misread.
  for (const Seed& seed : Seeds()) {
    for (ImageFormat format : {ImageFormat::kPng, ImageFormat::kTiff, ImageFormat::kBmp, ImageFormat::kJpeg}) {
      if (format == seed.format) continue;
      DecodeOptions options;
      options.format = format;
      EXPECT_EQ(DecodeGrayImage(seed.bytes, options).status().code(), absl::StatusCode::kInvalidArgument)
          << seed.name << " as " << ImageFormatName(format);
    }
  }
  checker.ExpectNoHang();
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
