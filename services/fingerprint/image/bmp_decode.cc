// BMP decoding, written here (no library needed): BITMAPFILEHEADER and a
// BITMAPCOREHEADER (12), BITMAPINFOHEADER (40), its V2/V3 (52/56), V4 (108)
// or V5 (124) successors; uncompressed 1/4/8-bit palette, 16-bit (5-5-5),
// 24-bit and 32-bit pixels, plus 32-bit BI_BITFIELDS when the masks are the
// plain 8-bit R, G, B ones. Rows are bottom-up (positive height) or top-down
// (negative) and padded to 4 bytes. Every offset and size in the headers is
// untrusted and checked against the buffer before it is used.
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "services/fingerprint/image/format_decoders.h"

namespace tessera {
namespace fingerprint {
namespace image_internal {
namespace {

constexpr uint32_t kBiRgb = 0;
constexpr uint32_t kBiBitfields = 3;

uint16_t U16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }
uint32_t U32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}
int32_t S32(const uint8_t* p) {
  const uint32_t u = U32(p);
  int32_t s;
  std::memcpy(&s, &u, 4);
  return s;
}

const char* CompressionName(uint32_t compression) {
  switch (compression) {
    case 1:
      return "BI_RLE8";
    case 2:
      return "BI_RLE4";
    case 3:
      return "BI_BITFIELDS";
    case 4:
      return "BI_JPEG";
    case 5:
      return "BI_PNG";
    case 6:
      return "BI_ALPHABITFIELDS";
    default:
      return "unknown";
  }
}

// What the headers say, once checked.
struct BmpLayout {
  int64_t width = 0;
  int64_t height = 0;  // positive; top_down from the sign in the file
  bool top_down = false;
  int bits = 0;
  uint32_t compression = kBiRgb;
  int64_t x_ppm = 0;
  uint64_t palette_offset = 0;
  uint64_t palette_entries = 0;
  int palette_entry_bytes = 4;
};

absl::StatusOr<BmpLayout> ReadHeaders(const uint8_t* d, uint64_t n) {
  if (n < 18) return absl::InvalidArgumentError(absl::StrCat("BMP: ", n, " bytes are too few for the file header"));
  if (d[0] != 'B' || d[1] != 'M') return absl::InvalidArgumentError("BMP: no \"BM\" signature");
  const uint32_t header_size = U32(d + 14);
  if (header_size != 12 && header_size != 40 && header_size != 52 && header_size != 56 && header_size != 108 &&
      header_size != 124) {
    return absl::InvalidArgumentError(
        absl::StrCat("BMP: info header of ", header_size, " bytes is not supported (12, 40, 52, 56, 108 or 124)"));
  }
  if (14 + uint64_t{header_size} > n) {
    return absl::InvalidArgumentError(
        absl::StrCat("BMP: the ", n, "-byte file ends inside its ", header_size, "-byte info header"));
  }
  BmpLayout l;
  uint32_t colors_used = 0;
  if (header_size == 12) {  // BITMAPCOREHEADER: unsigned 16-bit sizes, bottom-up, RGB palette triples
    l.width = U16(d + 18);
    l.height = U16(d + 20);
    l.bits = U16(d + 24);
    l.palette_entry_bytes = 3;
  } else {
    l.width = S32(d + 18);
    const int64_t height = S32(d + 22);
    l.top_down = height < 0;
    l.height = height < 0 ? -height : height;
    l.bits = U16(d + 28);
    l.compression = U32(d + 30);
    l.x_ppm = S32(d + 38);
    colors_used = U32(d + 46);
  }
  if (l.bits != 1 && l.bits != 4 && l.bits != 8 && l.bits != 16 && l.bits != 24 && l.bits != 32) {
    return absl::InvalidArgumentError(absl::StrCat("BMP: ", l.bits, " bits per pixel is not supported"));
  }
  if (l.compression == kBiBitfields && l.bits == 32) {
    // The masks follow a 40-byte header and sit inside the longer ones.
    if (n < 66) return absl::InvalidArgumentError("BMP: the file ends inside its colour masks");
    if (U32(d + 54) != 0x00ff0000u || U32(d + 58) != 0x0000ff00u || U32(d + 62) != 0x000000ffu) {
      return absl::InvalidArgumentError(absl::StrCat("BMP compression 3 is not supported with masks R ",
                                                     absl::Hex(U32(d + 54)), " G ", absl::Hex(U32(d + 58)), " B ",
                                                     absl::Hex(U32(d + 62)), " (only ff0000, ff00, ff)"));
    }
  } else if (l.compression != kBiRgb) {
    return absl::InvalidArgumentError(absl::StrCat("BMP compression ", l.compression, " is not supported (",
                                                   CompressionName(l.compression), " with ", l.bits,
                                                   " bits per pixel; only uncompressed pixels are)"));
  }
  if (l.bits <= 8) {
    const uint64_t full = uint64_t{1} << l.bits;
    l.palette_entries = colors_used == 0 || colors_used > full ? full : colors_used;
    l.palette_offset = 14 + uint64_t{header_size};
    if (l.palette_offset + l.palette_entries * l.palette_entry_bytes > n) {
      return absl::InvalidArgumentError(absl::StrCat("BMP: the palette of ", l.palette_entries,
                                                     " colours runs past the end of the ", n, "-byte file"));
    }
  }
  return l;
}

// One row of `width` pixels at `row` as gray. Palette indices past the
// palette's end (a short colour table) read as black.
void ConvertRow(const uint8_t* row, const BmpLayout& l, const uint8_t* palette_gray, uint8_t* out) {
  const int64_t w = l.width;
  switch (l.bits) {
    case 1:
    case 4:
    case 8:
      for (int64_t x = 0; x < w; ++x) {
        const uint64_t bit = static_cast<uint64_t>(x) * l.bits;
        const int shift = 8 - l.bits - static_cast<int>(bit % 8);
        out[x] = palette_gray[(row[bit / 8] >> shift) & ((1u << l.bits) - 1)];
      }
      break;
    case 16:  // 5-5-5, blue in the low bits
      for (int64_t x = 0; x < w; ++x) {
        const uint16_t v = U16(row + 2 * x);
        auto five = [](uint32_t c) { return static_cast<uint32_t>((c * 255 + 15) / 31); };
        out[x] = Luma(five((v >> 10) & 31), five((v >> 5) & 31), five(v & 31));
      }
      break;
    default:  // 24 and 32: B, G, R (, unused)
      const int step = l.bits / 8;
      for (int64_t x = 0; x < w; ++x, row += step) out[x] = Luma(row[2], row[1], row[0]);
      break;
  }
}

}  // namespace

absl::StatusOr<GrayImage> DecodeBmp(absl::string_view bytes, int64_t max_pixels) {
  const auto* d = reinterpret_cast<const uint8_t*>(bytes.data());
  const uint64_t n = bytes.size();
  absl::StatusOr<BmpLayout> layout = ReadHeaders(d, n);
  if (!layout.ok()) return layout.status();
  const BmpLayout& l = *layout;
  absl::Status size_ok = CheckImageSize("BMP", l.width, l.height, max_pixels);
  if (!size_ok.ok()) return size_ok;

  const uint64_t pixel_offset = U32(d + 10);
  const uint64_t row_bytes = (static_cast<uint64_t>(l.width) * l.bits + 7) / 8;
  const uint64_t stride = (static_cast<uint64_t>(l.width) * l.bits + 31) / 32 * 4;
  // The last row's padding may be missing; its pixels may not.
  const uint64_t needed = (static_cast<uint64_t>(l.height) - 1) * stride + row_bytes;
  if (pixel_offset > n || needed > n - pixel_offset) {
    return absl::InvalidArgumentError(absl::StrCat("BMP: ", l.width, "x", l.height, " pixels of ", l.bits,
                                                   " bits need ", needed, " bytes at offset ", pixel_offset,
                                                   ", past the end of the ", n, "-byte file"));
  }

  uint8_t palette_gray[256] = {};
  for (uint64_t i = 0; i < l.palette_entries; ++i) {
    const uint8_t* c = d + l.palette_offset + i * l.palette_entry_bytes;  // B, G, R (, reserved)
    palette_gray[i] = Luma(c[2], c[1], c[0]);
  }

  GrayImage image;
  image.width = static_cast<int>(l.width);
  image.height = static_cast<int>(l.height);
  if (l.x_ppm > 0) image.ppi = SaneResolution(PpmToPpi(static_cast<double>(l.x_ppm)));
  image.pixels.resize(static_cast<size_t>(l.width) * l.height);
  for (int64_t y = 0; y < l.height; ++y) {
    const int64_t file_row = l.top_down ? y : l.height - 1 - y;
    ConvertRow(d + pixel_offset + file_row * stride, l, palette_gray, image.pixels.data() + y * l.width);
  }
  return image;
}

}  // namespace image_internal
}  // namespace fingerprint
}  // namespace tessera
