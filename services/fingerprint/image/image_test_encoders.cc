#include "services/fingerprint/image/image_test_encoders.h"

#include <cstdio>  // before jpeglib.h
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <jpeglib.h>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace tessera {
namespace fingerprint {
namespace {

void PngAppend(png_structp png, png_bytep data, size_t n) {
  static_cast<std::string*>(png_get_io_ptr(png))->append(reinterpret_cast<const char*>(data), n);
}
void PngFlush(png_structp) {}

}  // namespace

void Put16(std::string* s, uint32_t v) {
  s->push_back(static_cast<char>(v & 0xff));
  s->push_back(static_cast<char>(v >> 8 & 0xff));
}
void Put32(std::string* s, uint32_t v) {
  Put16(s, v & 0xffff);
  Put16(s, v >> 16);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string EncodePng(const PngSpec& spec) {
  std::string out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return "";
  }
  png_set_write_fn(png, &out, PngAppend, PngFlush);
  png_set_IHDR(png, info, spec.width, spec.height, spec.bit_depth, spec.color_type, spec.interlace,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (!spec.palette.empty()) png_set_PLTE(png, info, spec.palette.data(), static_cast<int>(spec.palette.size()));
  if (spec.x_ppm > 0) png_set_pHYs(png, info, spec.x_ppm, spec.x_ppm, spec.phys_unit);
  png_write_info(png, info);
  const int channels = png_get_channels(png, info);
  const size_t row_bytes = (static_cast<size_t>(spec.width) * channels * spec.bit_depth + 7) / 8;
  std::vector<png_bytep> rows(spec.height);
  for (int y = 0; y < spec.height; ++y) rows[y] = const_cast<png_bytep>(spec.data.data() + y * row_bytes);
  png_write_image(png, rows.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

PngSpec GrayPng(const GrayImage& image) {
  PngSpec spec;
  spec.width = image.width;
  spec.height = image.height;
  spec.data = image.pixels;
  return spec;
}

std::string EncodeTiff(const TiffSpec& spec) {
  static int counter = 0;
  const std::string path = absl::StrCat(::testing::TempDir(), "/encode_", counter++, ".tif");
  TIFF* tif = TIFFOpen(path.c_str(), spec.big_endian ? "wb" : "wl");
  if (tif == nullptr) return "";
  const size_t row_bytes = (static_cast<size_t>(spec.width) * spec.samples * spec.bits + 7) / 8;
  for (int page = 0; page < spec.pages; ++page) {
    TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, spec.width);
    TIFFSetField(tif, TIFFTAG_IMAGELENGTH, spec.height);
    TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, spec.bits);
    TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, spec.samples);
    TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, spec.photometric);
    TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
    TIFFSetField(tif, TIFFTAG_COMPRESSION, spec.compression);
    if (spec.x_resolution > 0) {
      TIFFSetField(tif, TIFFTAG_XRESOLUTION, spec.x_resolution);
      TIFFSetField(tif, TIFFTAG_YRESOLUTION, spec.x_resolution);
      TIFFSetField(tif, TIFFTAG_RESOLUTIONUNIT, spec.resolution_unit);
    }
    if (!spec.colormap.empty()) {
      const size_t n = size_t{1} << spec.bits;
      TIFFSetField(tif, TIFFTAG_COLORMAP, spec.colormap.data(), spec.colormap.data() + n, spec.colormap.data() + 2 * n);
    }
    std::vector<uint8_t> data = spec.data;
    if (page > 0) {
      for (uint8_t& b : data) b = static_cast<uint8_t>(~b);
      TIFFSetField(tif, TIFFTAG_SUBFILETYPE, FILETYPE_PAGE);
    }
    if (spec.tiled) {
      constexpr int kTile = 16;
      TIFFSetField(tif, TIFFTAG_TILEWIDTH, kTile);
      TIFFSetField(tif, TIFFTAG_TILELENGTH, kTile);
      const size_t pixel_bytes = spec.samples * spec.bits / 8;  // whole bytes only
      std::vector<uint8_t> tile(kTile * kTile * pixel_bytes);
      for (int ty = 0; ty < spec.height; ty += kTile) {
        for (int tx = 0; tx < spec.width; tx += kTile) {
          std::fill(tile.begin(), tile.end(), 0);
          for (int y = ty; y < std::min(spec.height, ty + kTile); ++y) {
            for (int x = tx; x < std::min(spec.width, tx + kTile); ++x) {
              std::memcpy(&tile[((y - ty) * kTile + (x - tx)) * pixel_bytes], &data[y * row_bytes + x * pixel_bytes],
                          pixel_bytes);
            }
          }
          TIFFWriteTile(tif, tile.data(), tx, ty, 0, 0);
        }
      }
    } else {
      TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP,
                   spec.rows_per_strip > 0 ? spec.rows_per_strip : TIFFDefaultStripSize(tif, 0));
      for (int y = 0; y < spec.height; ++y) TIFFWriteScanline(tif, &data[y * row_bytes], y, 0);
    }
    if (spec.pages > 1) TIFFWriteDirectory(tif);
  }
  TIFFClose(tif);
  std::string bytes = ReadFile(path);
  std::remove(path.c_str());
  return bytes;
}

TiffSpec GrayTiff(const GrayImage& image) {
  TiffSpec spec;
  spec.width = image.width;
  spec.height = image.height;
  spec.data = image.pixels;
  return spec;
}

std::string EncodeJpeg(int width, int height, int components, const std::vector<uint8_t>& samples, int quality,
                       int density_unit, int density, bool progressive) {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr err;
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_compress(&cinfo);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buffer, &size);
  cinfo.image_width = width;
  cinfo.image_height = height;
  cinfo.input_components = components;
  cinfo.in_color_space = components == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  if (progressive) jpeg_simple_progression(&cinfo);
  cinfo.density_unit = static_cast<UINT8>(density_unit);
  cinfo.X_density = static_cast<UINT16>(density);
  cinfo.Y_density = static_cast<UINT16>(density);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(&samples[static_cast<size_t>(cinfo.next_scanline) * width * components]);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::string out(reinterpret_cast<const char*>(buffer), size);
  std::free(buffer);
  return out;
}

std::string EncodeBmp(const BmpSpec& spec) {
  const uint32_t stride = (spec.width * spec.bits + 31) / 32 * 4;
  const uint32_t masks = spec.compression == 3 && spec.header_size == 40 ? 12 : 0;
  const uint32_t offset = 14 + spec.header_size + masks + 4 * static_cast<uint32_t>(spec.palette.size());
  std::string s = "BM";
  Put32(&s, offset + stride * spec.height);
  Put32(&s, 0);
  Put32(&s, offset);
  Put32(&s, spec.header_size);
  Put32(&s, spec.width);
  Put32(&s, static_cast<uint32_t>(spec.top_down ? -spec.height : spec.height));
  Put16(&s, 1);
  Put16(&s, spec.bits);
  Put32(&s, spec.compression);
  Put32(&s, stride * spec.height);
  Put32(&s, spec.x_ppm);
  Put32(&s, spec.x_ppm);
  Put32(&s, static_cast<uint32_t>(spec.palette.size()));
  Put32(&s, 0);
  if (spec.header_size > 40 || masks > 0) {  // R, G, B (, A) masks
    Put32(&s, 0x00ff0000);
    Put32(&s, 0x0000ff00);
    Put32(&s, 0x000000ff);
  }
  s.resize(14 + spec.header_size + masks, '\0');  // rest of a V4/V5 header: zeros
  for (uint32_t c : spec.palette) Put32(&s, c);   // B, G, R, 0 little-endian
  for (int file_row = 0; file_row < spec.height; ++file_row) {
    const int y = spec.top_down ? file_row : spec.height - 1 - file_row;
    std::string row;
    if (spec.bits <= 8) {
      std::vector<uint8_t> packed(stride, 0);
      for (int x = 0; x < spec.width; ++x) {
        const int bit = x * spec.bits;
        packed[bit / 8] |= static_cast<uint8_t>(spec.pixel(x, y) << (8 - spec.bits - bit % 8));
      }
      row.assign(packed.begin(), packed.end());
    } else {
      for (int x = 0; x < spec.width; ++x) {
        const uint32_t c = spec.pixel(x, y);
        row.push_back(static_cast<char>(c & 0xff));
        row.push_back(static_cast<char>(c >> 8 & 0xff));
        row.push_back(static_cast<char>(c >> 16 & 0xff));
        if (spec.bits == 32) row.push_back('\x7f');
      }
      row.resize(stride, '\0');
    }
    s += row;
  }
  return s;
}

std::vector<uint32_t> GrayPalette() {
  std::vector<uint32_t> palette;
  for (uint32_t v = 0; v < 256; ++v) palette.push_back(v << 16 | v << 8 | v);
  return palette;
}

}  // namespace fingerprint
}  // namespace tessera
