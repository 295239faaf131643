// TIFF decoding with libtiff 4.5, reading the first directory (page) from
// memory through TIFFClientOpenExt. Errors and warnings go to handlers set in
// this call's TIFFOpenOptions (never libtiff's process-wide handlers), so
// concurrent decodes each get their own message. Strip images of 1-16-bit
// gray (MinIsBlack / MinIsWhite), palette and contiguous RGB are read
// scanline by scanline; anything else (tiles, planar RGB, YCbCr, CMYK, other
// orientations) goes through TIFFReadRGBAImageOriented. The size limit is
// checked on the directory before any pixel buffer exists.
#include <tiffio.h>

#include <algorithm>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/fingerprint/image/format_decoders.h"

namespace tessera {
namespace fingerprint {
namespace image_internal {
namespace {

// The input as libtiff's client "file".
struct TiffSource {
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  uint64_t pos = 0;
};

tmsize_t TiffRead(thandle_t handle, void* buffer, tmsize_t n) {
  auto* src = static_cast<TiffSource*>(handle);
  if (n <= 0 || src->pos >= src->size) return 0;
  const uint64_t count = std::min<uint64_t>(static_cast<uint64_t>(n), src->size - src->pos);
  std::memcpy(buffer, src->data + src->pos, count);
  src->pos += count;
  return static_cast<tmsize_t>(count);
}

tmsize_t TiffWrite(thandle_t, void*, tmsize_t) { return -1; }  // read-only

toff_t TiffSeek(thandle_t handle, toff_t offset, int whence) {
  auto* src = static_cast<TiffSource*>(handle);
  uint64_t base = 0;
  if (whence == SEEK_CUR) base = src->pos;
  if (whence == SEEK_END) base = src->size;
  // Offsets are unsigned; libtiff passes "negative" ones as huge values.
  if (offset > UINT64_MAX - base) return static_cast<toff_t>(-1);
  src->pos = base + offset;  // past the end is allowed; reads there return 0
  return src->pos;
}

int TiffClose(thandle_t) { return 0; }
toff_t TiffSize(thandle_t handle) { return static_cast<TiffSource*>(handle)->size; }
// The bytes are "mapped" as they are: libtiff then reads strips and tiles in
// place (it only ever reads a mapping; its own maps are PROT_READ). Without
// a mapping, libtiff 4.5.0 rejects uncompressed tiles whose size is not a
// multiple of 1024 ("Invalid tile byte count"), its read buffer being
// rounded up.
int TiffMap(thandle_t handle, void** base, toff_t* size) {
  auto* src = static_cast<TiffSource*>(handle);
  *base = const_cast<uint8_t*>(src->data);
  *size = src->size;
  return 1;
}
void TiffUnmap(thandle_t, void*, toff_t) {}

// libtiff's first error of this call.
struct TiffErrors {
  std::string first;
};

int OnError(TIFF*, void* user_data, const char* module, const char* fmt, va_list ap) {
  auto* errors = static_cast<TiffErrors*>(user_data);
  if (errors->first.empty()) {
    char message[512];
    std::vsnprintf(message, sizeof(message), fmt, ap);
    errors->first = module != nullptr && module[0] != '\0' ? absl::StrCat(module, ": ", message) : message;
  }
  return 1;  // handled: do not call the process-wide handler
}

int OnWarning(TIFF*, void*, const char*, const char*, va_list) { return 1; }  // unknown tags and the like

struct TiffCloser {
  void operator()(TIFF* tif) const { TIFFClose(tif); }
};
struct OptionsFreer {
  void operator()(TIFFOpenOptions* opts) const { TIFFOpenOptionsFree(opts); }
};

// The directory fields that decide how the pixels are read.
struct TiffLayout {
  uint32_t width = 0, height = 0;
  uint16_t bits = 1, samples = 1, photometric = PHOTOMETRIC_MINISBLACK;
  uint16_t planar = PLANARCONFIG_CONTIG, sample_format = SAMPLEFORMAT_UINT, orientation = ORIENTATION_TOPLEFT;
  bool has_photometric = false;
};

TiffLayout ReadLayout(TIFF* tif) {
  TiffLayout l;
  TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &l.width);
  TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &l.height);
  TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &l.bits);
  TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &l.samples);
  l.has_photometric = TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &l.photometric) != 0;
  TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &l.planar);
  TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLEFORMAT, &l.sample_format);
  TIFFGetFieldDefaulted(tif, TIFFTAG_ORIENTATION, &l.orientation);
  return l;
}

double ReadPpi(TIFF* tif) {
  float x_resolution = 0;
  uint16_t unit = RESUNIT_INCH;
  if (TIFFGetField(tif, TIFFTAG_XRESOLUTION, &x_resolution) == 0) return 0;
  TIFFGetFieldDefaulted(tif, TIFFTAG_RESOLUTIONUNIT, &unit);
  if (unit == RESUNIT_INCH) return SaneResolution(x_resolution);
  if (unit == RESUNIT_CENTIMETER) return SaneResolution(x_resolution * 2.54);
  return 0;  // RESUNIT_NONE: an aspect ratio only
}

// Sample `index` of a row of `bits`-bit samples (1, 2, 4, 8 or 16; libtiff
// has already put 16-bit samples in native byte order).
uint32_t SampleAt(const uint8_t* row, uint64_t index, int bits) {
  if (bits == 8) return row[index];
  if (bits == 16) {
    uint16_t v;
    std::memcpy(&v, row + 2 * index, 2);
    return v;
  }
  const uint64_t bit = index * bits;
  const int shift = 8 - bits - static_cast<int>(bit % 8);
  return (row[bit / 8] >> shift) & ((1u << bits) - 1);
}

// A `bits`-bit gray level as 8 bits.
uint8_t GrayTo8(uint32_t v, int bits) {
  if (bits == 8) return static_cast<uint8_t>(v);
  if (bits == 16) return Scale16To8(v);
  return static_cast<uint8_t>(v * 255 / ((1u << bits) - 1));
}

// Palette (TIFF colour maps are 16-bit; some old writers put 8-bit values in
// them, which libtiff's own RGBA reader also accepts).
struct Palette {
  std::vector<uint8_t> gray;  // one entry per index
};

bool ReadPalette(TIFF* tif, int bits, Palette* palette) {
  uint16_t *r = nullptr, *g = nullptr, *b = nullptr;
  if (TIFFGetField(tif, TIFFTAG_COLORMAP, &r, &g, &b) == 0 || r == nullptr || g == nullptr || b == nullptr) {
    return false;
  }
  const size_t n = size_t{1} << bits;
  bool eight_bit = true;
  for (size_t i = 0; i < n; ++i) eight_bit = eight_bit && r[i] < 256 && g[i] < 256 && b[i] < 256;
  palette->gray.resize(n);
  for (size_t i = 0; i < n; ++i) {
    palette->gray[i] = eight_bit ? Luma(r[i], g[i], b[i]) : Luma(Scale16To8(r[i]), Scale16To8(g[i]), Scale16To8(b[i]));
  }
  return true;
}

// Whether ReadScanlines handles this layout; otherwise ReadRgba does.
bool ScanlineReadable(TIFF* tif, const TiffLayout& l) {
  if (TIFFIsTiled(tif) || l.orientation != ORIENTATION_TOPLEFT || !l.has_photometric) return false;
  if (l.sample_format != SAMPLEFORMAT_UINT && l.sample_format != SAMPLEFORMAT_VOID) return false;
  if (l.samples > 4 || (l.samples > 1 && l.planar != PLANARCONFIG_CONTIG)) return false;
  switch (l.photometric) {
    case PHOTOMETRIC_MINISBLACK:
    case PHOTOMETRIC_MINISWHITE:
      return l.bits == 1 || l.bits == 2 || l.bits == 4 || l.bits == 8 || l.bits == 16;
    case PHOTOMETRIC_PALETTE:
      return l.samples == 1 && (l.bits == 1 || l.bits == 2 || l.bits == 4 || l.bits == 8);
    case PHOTOMETRIC_RGB:
      return l.samples >= 3 && (l.bits == 8 || l.bits == 16);
    default:
      return false;
  }
}

absl::Status TiffError(const TiffErrors& errors, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("TIFF: ", what, errors.first.empty() ? "" : ": ", errors.first));
}

absl::Status ReadScanlines(TIFF* tif, const TiffLayout& l, const TiffErrors& errors, GrayImage* image) {
  const tmsize_t line_size = TIFFScanlineSize(tif);
  const uint64_t needed = (static_cast<uint64_t>(l.width) * l.samples * l.bits + 7) / 8;
  if (line_size <= 0 || static_cast<uint64_t>(line_size) < needed) {
    return TiffError(errors, absl::StrCat("scanline size ", line_size, " does not fit ", l.width, " pixels of ",
                                          l.samples, "x", l.bits, " bits"));
  }
  Palette palette;
  if (l.photometric == PHOTOMETRIC_PALETTE && !ReadPalette(tif, l.bits, &palette)) {
    return TiffError(errors, "palette image without a colour map");
  }
  std::vector<uint8_t> line(static_cast<size_t>(line_size));
  // Reserved, not filled: a directory that lies about the size costs nothing
  // until rows actually decode.
  image->pixels.reserve(static_cast<size_t>(l.width) * l.height);
  const bool invert = l.photometric == PHOTOMETRIC_MINISWHITE;
  for (uint32_t y = 0; y < l.height; ++y) {
    if (TIFFReadScanline(tif, line.data(), y, 0) < 0) return TiffError(errors, absl::StrCat("cannot read row ", y));
    for (uint32_t x = 0; x < l.width; ++x) {
      const uint64_t first = static_cast<uint64_t>(x) * l.samples;
      uint8_t v;
      if (l.photometric == PHOTOMETRIC_PALETTE) {
        v = palette.gray[SampleAt(line.data(), first, l.bits)];
      } else if (l.photometric == PHOTOMETRIC_RGB) {
        v = Luma(GrayTo8(SampleAt(line.data(), first, l.bits), l.bits),
                 GrayTo8(SampleAt(line.data(), first + 1, l.bits), l.bits),
                 GrayTo8(SampleAt(line.data(), first + 2, l.bits), l.bits));
      } else {
        v = GrayTo8(SampleAt(line.data(), first, l.bits), l.bits);
        if (invert) v = static_cast<uint8_t>(255 - v);
      }
      image->pixels.push_back(v);
    }
  }
  return absl::OkStatus();
}

absl::Status ReadRgba(TIFF* tif, const TiffLayout& l, const TiffErrors& errors, GrayImage* image) {
  char why[1024] = {};
  if (TIFFRGBAImageOK(tif, why) == 0) {
    return absl::InvalidArgumentError(absl::StrCat("TIFF: unsupported image (photometric ", l.photometric, ", ",
                                                   l.samples, " samples of ", l.bits, " bits): ", why));
  }
  const size_t n = static_cast<size_t>(l.width) * l.height;
  // Uninitialised on purpose (see ReadScanlines); libtiff writes every pixel
  // or fails.
  std::unique_ptr<uint32_t[]> raster(new (std::nothrow) uint32_t[n]);
  if (raster == nullptr) return absl::ResourceExhaustedError(absl::StrCat("TIFF: no memory for ", n, " pixels"));
  if (TIFFReadRGBAImageOriented(tif, l.width, l.height, raster.get(), ORIENTATION_TOPLEFT, /*stop_on_error=*/1) == 0) {
    return TiffError(errors, "cannot read the image");
  }
  image->pixels.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t p = raster[i];
    image->pixels[i] = Luma(TIFFGetR(p), TIFFGetG(p), TIFFGetB(p));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GrayImage> DecodeTiff(absl::string_view bytes, int64_t max_pixels) {
  TiffSource source{reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), 0};
  TiffErrors errors;
  std::unique_ptr<TIFFOpenOptions, OptionsFreer> options(TIFFOpenOptionsAlloc());
  if (options == nullptr) return absl::ResourceExhaustedError("TIFF: cannot allocate libtiff options");
  TIFFOpenOptionsSetErrorHandlerExtR(options.get(), OnError, &errors);
  TIFFOpenOptionsSetWarningHandlerExtR(options.get(), OnWarning, nullptr);
  // No single libtiff allocation beyond what the largest accepted image
  // needs (RGBA raster, strip buffers), plus room for tag arrays.
  const int64_t max_alloc = max_pixels < (int64_t{1} << 40) ? max_pixels * 8 + (int64_t{64} << 20) : 0;
  if (max_alloc > 0) TIFFOpenOptionsSetMaxSingleMemAlloc(options.get(), static_cast<tmsize_t>(max_alloc));

  // "r": read the header and the first directory (mapped: TiffMap).
  std::unique_ptr<TIFF, TiffCloser> tif(TIFFClientOpenExt("input", "r", &source, TiffRead, TiffWrite, TiffSeek,
                                                          TiffClose, TiffSize, TiffMap, TiffUnmap, options.get()));
  if (tif == nullptr) return TiffError(errors, "cannot read the header or first directory");

  const TiffLayout layout = ReadLayout(tif.get());
  absl::Status size_ok = CheckImageSize("TIFF", layout.width, layout.height, max_pixels);
  if (!size_ok.ok()) return size_ok;

  GrayImage image;
  image.width = static_cast<int>(layout.width);
  image.height = static_cast<int>(layout.height);
  image.ppi = ReadPpi(tif.get());
  absl::Status read = ScanlineReadable(tif.get(), layout) ? ReadScanlines(tif.get(), layout, errors, &image)
                                                          : ReadRgba(tif.get(), layout, errors, &image);
  if (!read.ok()) return read;
  return image;
}

}  // namespace image_internal
}  // namespace fingerprint
}  // namespace tessera
