#include "common/png_io.h"

#include <png.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"

namespace tessera {
namespace {

// Largest image ReadPng will allocate for (pixels); bigger headers are refused.
constexpr int64_t kMaxPixels = int64_t{1} << 28;

absl::Status PathError(absl::StatusCode code, const std::string& path, absl::string_view what) {
  return absl::Status(code, absl::StrCat(path, ": ", what));
}

absl::Status ErrnoError(int err, const std::string& path, absl::string_view what) {
  if (err == 0) return PathError(absl::StatusCode::kInternal, path, what);
  absl::Status s = absl::ErrnoToStatus(err, "");
  return PathError(s.code(), path, absl::StrCat(what, ": ", std::strerror(err)));
}

struct FileCloser {
  void operator()(FILE* f) const {
    if (f != nullptr) std::fclose(f);
  }
};
using FilePtr = std::unique_ptr<FILE, FileCloser>;

// Frees libpng's state for `image` on every path out of a function.
struct PngImageGuard {
  png_image* image;
  ~PngImageGuard() { png_image_free(image); }
};

absl::Status WriteImage(png_image* image, const void* buffer, const std::string& path) {
  errno = 0;
  FILE* raw = std::fopen(path.c_str(), "wb");
  if (raw == nullptr) return ErrnoError(errno, path, "cannot create file");
  FilePtr file(raw);
  PngImageGuard guard{image};
  if (png_image_write_to_stdio(image, file.get(), /*convert_to_8_bit=*/0, buffer, /*row_stride=*/0,
                               /*colormap=*/nullptr) == 0) {
    const std::string message = image->message;
    file.reset();
    std::remove(path.c_str());
    return PathError(absl::StatusCode::kInternal, path, absl::StrCat("cannot write PNG: ", message));
  }
  errno = 0;
  const bool flushed = std::fflush(file.get()) == 0;
  const int flush_errno = errno;
  const bool closed = std::fclose(file.release()) == 0;
  if (!flushed || !closed) {
    const int err = flush_errno != 0 ? flush_errno : errno;
    std::remove(path.c_str());
    return ErrnoError(err, path, "cannot finish writing PNG");
  }
  return absl::OkStatus();
}

// Opens a PNG for reading with the simplified API; the caller frees `image`.
absl::Status BeginRead(const std::string& path, png_image* image) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) return PathError(absl::StatusCode::kNotFound, path, "no such file");
    return ErrnoError(err, path, "cannot access file");
  }
  if (!S_ISREG(st.st_mode)) return PathError(absl::StatusCode::kInvalidArgument, path, "is not a regular file");
  {
    errno = 0;
    FilePtr file(std::fopen(path.c_str(), "rb"));
    if (file == nullptr) return ErrnoError(errno, path, "cannot open file");
    png_byte signature[8] = {};
    const size_t got = std::fread(signature, 1, sizeof(signature), file.get());
    if (got < sizeof(signature) || png_sig_cmp(signature, 0, sizeof(signature)) != 0) {
      return PathError(absl::StatusCode::kInvalidArgument, path, "not a PNG file (bad signature)");
    }
  }
  std::memset(image, 0, sizeof(*image));
  image->version = PNG_IMAGE_VERSION;
  if (png_image_begin_read_from_file(image, path.c_str()) == 0) {
    return PathError(absl::StatusCode::kDataLoss, path, absl::StrCat("bad PNG header: ", image->message));
  }
  if (static_cast<int64_t>(image->width) * image->height > kMaxPixels) {
    return PathError(absl::StatusCode::kInvalidArgument, path,
                     absl::StrCat("PNG of ", image->width, "x", image->height, " is too large"));
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status FinishRead(png_image* image, std::vector<T>* out, const std::string& path) {
  out->resize(PNG_IMAGE_SIZE(*image) / sizeof(T));
  if (png_image_finish_read(image, /*background=*/nullptr, out->data(), /*row_stride=*/0, /*colormap=*/nullptr) ==
      0) {
    return PathError(absl::StatusCode::kDataLoss, path, absl::StrCat("corrupt PNG data: ", image->message));
  }
  return absl::OkStatus();
}

absl::Status CheckSize(int width, int height, size_t samples, size_t expected_per_pixel, const std::string& path) {
  if (width <= 0 || height <= 0) {
    return PathError(absl::StatusCode::kInvalidArgument, path,
                     absl::StrCat("cannot write an empty image (", width, "x", height, ")"));
  }
  if (samples != static_cast<size_t>(width) * height * expected_per_pixel) {
    return PathError(absl::StatusCode::kInvalidArgument, path,
                     absl::StrCat("image buffer has ", samples, " samples, expected ", width, "x", height, "x",
                                  expected_per_pixel));
  }
  return absl::OkStatus();
}

}  // namespace

Image8 Image8::Make(int width, int height, int channels, uint8_t fill) {
  Image8 image;
  image.width = width;
  image.height = height;
  image.channels = channels;
  image.pixels.assign(static_cast<size_t>(width) * height * channels, fill);
  return image;
}

namespace {

// libpng's description of an 8-bit gray or RGB image, after checking it
// (errors name `what`: the path, or "(in memory)").
absl::StatusOr<png_image> DescribeImage8(const Image8& image, const std::string& what) {
  if (image.channels != 1 && image.channels != 3) {
    return PathError(absl::StatusCode::kInvalidArgument, what,
                     absl::StrCat("PNG images need 1 or 3 channels, not ", image.channels));
  }
  absl::Status size_ok = CheckSize(image.width, image.height, image.pixels.size(), image.channels, what);
  if (!size_ok.ok()) return size_ok;
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(image.width);
  png.height = static_cast<png_uint_32>(image.height);
  png.format = image.channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  return png;
}

}  // namespace

absl::Status WritePng(const Image8& image, const std::string& path) {
  absl::StatusOr<png_image> png = DescribeImage8(image, path);
  if (!png.ok()) return png.status();
  return WriteImage(&*png, image.pixels.data(), path);
}

absl::StatusOr<std::string> EncodePngBytes(const Image8& image) {
  absl::StatusOr<png_image> described = DescribeImage8(image, "(in memory)");
  if (!described.ok()) return described.status();
  png_image& png = *described;
  // First call sizes the output, the second writes it.
  png_alloc_size_t size = 0;
  if (png_image_write_to_memory(&png, nullptr, &size, /*convert_to_8bit=*/0, image.pixels.data(), 0, nullptr) == 0) {
    return absl::InternalError(absl::StrCat("PNG encoding failed: ", png.message));
  }
  std::string out(size, '\0');
  if (png_image_write_to_memory(&png, out.data(), &size, 0, image.pixels.data(), 0, nullptr) == 0) {
    return absl::InternalError(absl::StrCat("PNG encoding failed: ", png.message));
  }
  out.resize(size);
  return out;
}

absl::Status WritePng16(const Image16& image, const std::string& path) {
  absl::Status size_ok = CheckSize(image.width, image.height, image.pixels.size(), 1, path);
  if (!size_ok.ok()) return size_ok;
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(image.width);
  png.height = static_cast<png_uint_32>(image.height);
  png.format = PNG_FORMAT_LINEAR_Y;  // 16-bit samples, stored as they are
  return WriteImage(&png, image.pixels.data(), path);
}

absl::StatusOr<Image8> ReadPng(const std::string& path) {
  png_image png;
  std::memset(&png, 0, sizeof(png));
  PngImageGuard guard{&png};
  absl::Status begun = BeginRead(path, &png);
  if (!begun.ok()) return begun;
  Image8 out;
  out.width = static_cast<int>(png.width);
  out.height = static_cast<int>(png.height);
  const bool color = (png.format & PNG_FORMAT_FLAG_COLOR) != 0;
  const bool deep = (png.format & PNG_FORMAT_FLAG_LINEAR) != 0;
  if (!color && deep) {
    // 16-bit gray: keep the top byte rather than re-encoding the gamma.
    png.format = PNG_FORMAT_LINEAR_Y;
    std::vector<uint16_t> wide;
    absl::Status read = FinishRead(&png, &wide, path);
    if (!read.ok()) return read;
    out.channels = 1;
    out.pixels.resize(wide.size());
    for (size_t i = 0; i < wide.size(); ++i) out.pixels[i] = static_cast<uint8_t>(wide[i] >> 8);
    return out;
  }
  png.format = color ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
  out.channels = color ? 3 : 1;
  absl::Status read = FinishRead(&png, &out.pixels, path);
  if (!read.ok()) return read;
  return out;
}

absl::StatusOr<Image16> ReadPng16(const std::string& path) {
  png_image png;
  std::memset(&png, 0, sizeof(png));
  PngImageGuard guard{&png};
  absl::Status begun = BeginRead(path, &png);
  if (!begun.ok()) return begun;
  if ((png.format & PNG_FORMAT_FLAG_COLOR) != 0) {
    return PathError(absl::StatusCode::kInvalidArgument, path, "is a color PNG; ReadPng16 reads gray images");
  }
  Image16 out;
  out.width = static_cast<int>(png.width);
  out.height = static_cast<int>(png.height);
  if ((png.format & PNG_FORMAT_FLAG_LINEAR) != 0) {
    png.format = PNG_FORMAT_LINEAR_Y;
    absl::Status read = FinishRead(&png, &out.pixels, path);
    if (!read.ok()) return read;
    return out;
  }
  png.format = PNG_FORMAT_GRAY;
  std::vector<uint8_t> narrow;
  absl::Status read = FinishRead(&png, &narrow, path);
  if (!read.ok()) return read;
  out.pixels.resize(narrow.size());
  for (size_t i = 0; i < narrow.size(); ++i) out.pixels[i] = static_cast<uint16_t>(narrow[i] * 257);
  return out;
}

}  // namespace tessera
