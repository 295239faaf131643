// JPEG decoding with libjpeg(-turbo) from memory (jpeg_mem_src), straight to
// gray (out_color_space JCS_GRAYSCALE: the luma channel). libjpeg's fatal
// errors, and its "corrupt data" warnings (truncated or damaged entropy
// data, which it would otherwise paper over with gray), longjmp back to
// ReadJpeg with the formatted message kept in the per-call JpegState.
// The size limit is checked after jpeg_read_header, before
// jpeg_start_decompress allocates; a progress monitor caps the number of
// progressive scans so crafted files cannot spin for minutes.
#include <climits>
#include <csetjmp>
#include <cstdio>  // before jpeglib.h, which uses FILE and size_t
#include <vector>

#include <jpeglib.h>
// The message codes (JWRN_...).
#include <jerror.h>

#include "absl/strings/str_cat.h"
#include "services/fingerprint/image/format_decoders.h"

namespace tessera {
namespace fingerprint {
namespace image_internal {
namespace {

// Progressive JPEGs rarely have more than ~20 scans; libjpeg-turbo's own
// tools use this limit against scan-flooding files.
constexpr int kMaxScans = 500;

// One decode's libjpeg state. `pub` must stay the first member of the error
// manager: libjpeg hands our callbacks &pub as cinfo->err.
struct JpegErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

struct JpegState {
  JpegErrorManager error = {};
  jpeg_progress_mgr progress = {};
  jpeg_decompress_struct cinfo = {};
  absl::Status status;  // a failure of our own checks
  GrayImage image;
};

[[noreturn]] void Fail(j_common_ptr cinfo) {
  auto* error = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, error->message);
  std::longjmp(error->jump, 1);
}

void ErrorExit(j_common_ptr cinfo) { Fail(cinfo); }

// Warnings (level -1) about damaged data are errors here. Ignored: trace
// messages (level >= 0), an unknown Adobe transform code or JFIF revision,
// and junk bytes between segments (libjpeg skips them to the next marker;
// some cameras write them).
void EmitMessage(j_common_ptr cinfo, int level) {
  if (level >= 0) return;
  const int code = cinfo->err->msg_code;
  if (code == JWRN_ADOBE_XFORM || code == JWRN_JFIF_MAJOR || code == JWRN_EXTRANEOUS_DATA) return;
  Fail(cinfo);
}

void OutputMessage(j_common_ptr) {}

void OnProgress(j_common_ptr cinfo) {
  if (!cinfo->is_decompressor) return;
  const auto* dinfo = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (dinfo->input_scan_number <= kMaxScans) return;
  auto* error = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  std::snprintf(error->message, sizeof(error->message), "more than %d progressive scans", kMaxScans);
  std::longjmp(error->jump, 1);
}

// Runs libjpeg. False when libjpeg failed (s->error.message) or a check did
// (s->status). Its locals are plain values, so a longjmp skips no destructor.
bool ReadJpeg(const uint8_t* data, size_t size, int64_t max_pixels, JpegState* s) {
  j_decompress_ptr cinfo = &s->cinfo;
  if (setjmp(s->error.jump)) return false;
  jpeg_create_decompress(cinfo);
  // No in-memory image (progressive coefficients, colour buffers) beyond
  // what the largest accepted image needs.
  const int64_t max_memory = max_pixels < (int64_t{1} << 40) ? max_pixels * 8 + (int64_t{64} << 20) : 0;
  if (max_memory > 0 && max_memory < static_cast<int64_t>(LONG_MAX)) cinfo->mem->max_memory_to_use = max_memory;
  cinfo->progress = &s->progress;
  jpeg_mem_src(cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(cinfo, TRUE);

  s->status = CheckImageSize("JPEG", cinfo->image_width, cinfo->image_height, max_pixels);
  if (!s->status.ok()) return false;
  if (cinfo->saw_JFIF_marker && cinfo->density_unit == 1) s->image.ppi = SaneResolution(cinfo->X_density);
  if (cinfo->saw_JFIF_marker && cinfo->density_unit == 2) s->image.ppi = SaneResolution(cinfo->X_density * 2.54);

  cinfo->out_color_space = JCS_GRAYSCALE;
  jpeg_start_decompress(cinfo);
  if (cinfo->output_components != 1 || cinfo->output_width != cinfo->image_width ||
      cinfo->output_height != cinfo->image_height) {
    s->status = absl::InvalidArgumentError(absl::StrCat("JPEG: decoder gave ", cinfo->output_width, "x",
                                                        cinfo->output_height, "x", cinfo->output_components, " for a ",
                                                        cinfo->image_width, "x", cinfo->image_height, " gray image"));
    return false;
  }
  const size_t width = cinfo->output_width;
  s->image.width = static_cast<int>(cinfo->output_width);
  s->image.height = static_cast<int>(cinfo->output_height);
  // Reserved, then grown a row at a time: a header that lies about the size
  // costs nothing until rows actually decode.
  s->image.pixels.reserve(width * cinfo->output_height);
  while (cinfo->output_scanline < cinfo->output_height) {
    const size_t y = cinfo->output_scanline;
    s->image.pixels.resize((y + 1) * width);
    JSAMPROW row = s->image.pixels.data() + y * width;
    if (jpeg_read_scanlines(cinfo, &row, 1) != 1) {
      s->status = absl::InvalidArgumentError(absl::StrCat("JPEG: no data for row ", y));
      return false;
    }
  }
  jpeg_finish_decompress(cinfo);
  return true;
}

}  // namespace

absl::StatusOr<GrayImage> DecodeJpeg(absl::string_view bytes, int64_t max_pixels) {
  JpegState state;
  state.cinfo.err = jpeg_std_error(&state.error.pub);
  state.error.pub.error_exit = ErrorExit;
  state.error.pub.emit_message = EmitMessage;
  state.error.pub.output_message = OutputMessage;
  state.progress.progress_monitor = OnProgress;
  const bool ok = ReadJpeg(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), max_pixels, &state);
  jpeg_destroy_decompress(&state.cinfo);
  if (!ok) {
    if (!state.status.ok()) return state.status;
    return absl::InvalidArgumentError(absl::StrCat("JPEG: ", state.error.message));
  }
  return std::move(state.image);
}

}  // namespace image_internal
}  // namespace fingerprint
}  // namespace tessera
