// PNG decoding with libpng, reading from memory (png_set_read_fn). libpng
// reports errors by calling our error function, which keeps the message in
// the per-call PngState and longjmps back to ReadPng; the size limit is
// checked on IHDR before anything is allocated. Palette, RGB, alpha (dropped)
// and 1-16-bit samples all become 8-bit gray (BT.601 luma).
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/fingerprint/image/format_decoders.h"

namespace tessera {
namespace fingerprint {
namespace image_internal {
namespace {

// Everything one decode needs, in the caller's frame. libpng longjmps only
// through its own frames and ReadFn/ErrorFn (which hold nothing with a
// destructor) back to ReadPng, whose own locals are plain integers.
struct PngState {
  const uint8_t* data = nullptr;
  size_t size = 0;
  size_t pos = 0;
  char error[256] = {};  // libpng's message when it failed
  absl::Status status;   // a failure of our own checks
  GrayImage image;
  std::vector<uint8_t> row;             // one decoded row (non-interlaced)
  std::unique_ptr<uint8_t[]> all_rows;  // the whole image (interlaced)
};

void ReadFn(png_structp png, png_bytep out, size_t n) {
  auto* s = static_cast<PngState*>(png_get_io_ptr(png));
  if (n > s->size - s->pos) png_error(png, "the data ends early (truncated file)");
  std::memcpy(out, s->data + s->pos, n);
  s->pos += n;
}

void ErrorFn(png_structp png, png_const_charp message) {
  auto* s = static_cast<PngState*>(png_get_error_ptr(png));
  std::snprintf(s->error, sizeof(s->error), "%s", message != nullptr ? message : "unknown libpng error");
  png_longjmp(png, 1);
}

void WarningFn(png_structp, png_const_charp) {}  // benign: ancillary CRC errors and the like

// Appends one row of `channels` (1 gray or 3 RGB) 8-bit samples as gray.
void AppendGray(const uint8_t* row, int width, int channels, std::vector<uint8_t>* out) {
  if (channels == 1) {
    out->insert(out->end(), row, row + width);
    return;
  }
  for (int x = 0; x < width; ++x, row += 3) out->push_back(Luma(row[0], row[1], row[2]));
}

// Runs libpng. False when libpng failed (s->error) or a check did (s->status).
bool ReadPng(png_structp png, png_infop info, int64_t max_pixels, PngState* s) {
  if (setjmp(png_jmpbuf(png))) return false;
  const int64_t side_limit = max_pixels < 0x7fffffff ? max_pixels : 0x7fffffff;
  png_set_user_limits(png, static_cast<png_uint_32>(side_limit), static_cast<png_uint_32>(side_limit));
  png_set_read_fn(png, s, ReadFn);
  png_read_info(png, info);

  png_uint_32 width = 0, height = 0;
  int bit_depth = 0, color_type = 0, interlace = 0;
  if (png_get_IHDR(png, info, &width, &height, &bit_depth, &color_type, &interlace, nullptr, nullptr) == 0) {
    s->status = absl::InvalidArgumentError("PNG: no IHDR chunk");
    return false;
  }
  s->status = CheckImageSize("PNG", width, height, max_pixels);
  if (!s->status.ok()) return false;

  png_uint_32 x_ppm = 0, y_ppm = 0;
  int unit = 0;
  if (png_get_pHYs(png, info, &x_ppm, &y_ppm, &unit) != 0 && unit == PNG_RESOLUTION_METER) {
    s->image.ppi = SaneResolution(PpmToPpi(x_ppm));
  }

  // To 8-bit gray or RGB: expand palettes and low bit depths, scale 16-bit
  // samples, drop alpha (transparency in a fingerprint means nothing).
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (bit_depth == 16) png_set_scale_16(png);
  if ((color_type & PNG_COLOR_MASK_ALPHA) != 0) png_set_strip_alpha(png);
  const int passes = png_set_interlace_handling(png);
  png_read_update_info(png, info);

  const int channels = png_get_channels(png, info);
  const size_t row_bytes = png_get_rowbytes(png, info);
  if (png_get_bit_depth(png, info) != 8 || (channels != 1 && channels != 3) ||
      row_bytes != static_cast<size_t>(width) * channels) {
    s->status = absl::InvalidArgumentError(
        absl::StrCat("PNG: unsupported layout (colour type ", color_type, ", bit depth ", bit_depth, ")"));
    return false;
  }
  s->image.width = static_cast<int>(width);
  s->image.height = static_cast<int>(height);
  // Reserved, not filled: a header that lies about its size costs nothing
  // until rows actually decode.
  s->image.pixels.reserve(static_cast<size_t>(width) * height);
  if (passes == 1) {
    s->row.resize(row_bytes);
    for (png_uint_32 y = 0; y < height; ++y) {
      png_read_row(png, s->row.data(), nullptr);
      AppendGray(s->row.data(), static_cast<int>(width), channels, &s->image.pixels);
    }
    return true;
  }
  // Interlaced rows are filled pass by pass, so the whole image is needed.
  // Left uninitialised: pages are only touched as rows actually decode.
  s->all_rows.reset(new (std::nothrow) uint8_t[row_bytes * height]);
  if (s->all_rows == nullptr) {
    s->status = absl::ResourceExhaustedError(absl::StrCat("PNG: no memory for ", width, "x", height, " pixels"));
    return false;
  }
  // What png_read_image does, without an array of row pointers.
  for (int pass = 0; pass < passes; ++pass) {
    for (png_uint_32 y = 0; y < height; ++y) png_read_row(png, s->all_rows.get() + y * row_bytes, nullptr);
  }
  for (png_uint_32 y = 0; y < height; ++y) {
    AppendGray(s->all_rows.get() + y * row_bytes, static_cast<int>(width), channels, &s->image.pixels);
  }
  return true;
}

}  // namespace

absl::StatusOr<GrayImage> DecodePng(absl::string_view bytes, int64_t max_pixels) {
  PngState state;
  state.data = reinterpret_cast<const uint8_t*>(bytes.data());
  state.size = bytes.size();
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &state, ErrorFn, WarningFn);
  if (png == nullptr) return absl::ResourceExhaustedError("PNG: cannot create the libpng reader");
  png_infop info = png_create_info_struct(png);
  if (info == nullptr) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    return absl::ResourceExhaustedError("PNG: cannot create the libpng info structure");
  }
  const bool ok = ReadPng(png, info, max_pixels, &state);
  png_destroy_read_struct(&png, &info, nullptr);
  if (!ok) {
    if (!state.status.ok()) return state.status;
    return absl::InvalidArgumentError(absl::StrCat("PNG: ", state.error));
  }
  return std::move(state.image);
}

}  // namespace image_internal
}  // namespace fingerprint
}  // namespace tessera
