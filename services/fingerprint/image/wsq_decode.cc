// FBI WSQ 3.1 decoding: the marker structure (this file), the parameter
// segments (wsq_tables), the Huffman-coded blocks (wsq_huffman), the
// subband layout (wsq_subbands) and the inverse wavelet transform
// (wsq_wavelet).
//
// Stream:  SOI  {tables}  SOF  {tables  SOB  coded data}...  EOI
// where tables are DTT, DQT, DHT, DRT and COM segments. The coded data of
// all blocks is one sequence of coefficients filling the transmitted
// subbands (bin width != 0, in subband order, row by row); the FBI encoder
// sends it in three blocks (subbands 0-18, 19-51 and 52-59), each with its
// own Huffman table. Bytes after EOI are ignored.
#include "services/fingerprint/image/wsq_decode.h"

#include <cmath>
#include <optional>

#include "absl/strings/str_format.h"
#include "common/status.h"
#include "services/fingerprint/image/wsq_format.h"
#include "services/fingerprint/image/wsq_huffman.h"
#include "services/fingerprint/image/wsq_subbands.h"
#include "services/fingerprint/image/wsq_tables.h"
#include "services/fingerprint/image/wsq_wavelet.h"

namespace tessera {
namespace fingerprint {

using wsq_internal::BuildSubbandLayout;
using wsq_internal::DecodeBlock;
using wsq_internal::FrameHeader;
using wsq_internal::HuffmanTable;
using wsq_internal::InverseWaveletTransform;
using wsq_internal::IsNistcom;
using wsq_internal::NistcomPpi;
using wsq_internal::ParseFrameHeader;
using wsq_internal::ParseHuffmanTables;
using wsq_internal::ParseQuantTable;
using wsq_internal::ParseRestartInterval;
using wsq_internal::ParseTransformTable;
using wsq_internal::QuantizedCoefficients;
using wsq_internal::QuantTable;
using wsq_internal::Rect;
using wsq_internal::SegmentCursor;
using wsq_internal::SubbandLayout;
using wsq_internal::WaveletFilters;
using wsq_internal::WsqError;
using wsq_internal::kCodedSubbands;
using wsq_internal::kCom;
using wsq_internal::kDht;
using wsq_internal::kDqt;
using wsq_internal::kDrt;
using wsq_internal::kDtt;
using wsq_internal::kEoi;
using wsq_internal::kMaxHuffmanTables;
using wsq_internal::kSob;
using wsq_internal::kSof;
using wsq_internal::kSoi;

namespace {

absl::string_view SegmentName(uint16_t marker) {
  switch (marker) {
    case kSof: return "SOF segment";
    case kSob: return "SOB segment";
    case kDtt: return "DTT segment";
    case kDqt: return "DQT segment";
    case kDht: return "DHT segment";
    case kDrt: return "DRT segment";
    case kCom: return "COM segment";
    default: return "segment";
  }
}

// Everything read from the stream before the coefficients are rebuilt.
struct Stream {
  std::optional<FrameHeader> frame;
  std::optional<WaveletFilters> filters;
  std::optional<QuantTable> quant;
  std::array<HuffmanTable, kMaxHuffmanTables> huffman;
  std::array<bool, kMaxHuffmanTables> huffman_defined{};
  int restart_interval = 0;
  int ppi = 0;
  bool nistcom_seen = false;
  int blocks = 0;
  SubbandLayout layout;
  QuantizedCoefficients coefficients;
};

class Parser {
 public:
  Parser(absl::string_view bytes, int64_t max_pixels) : data_(bytes), max_pixels_(max_pixels) {}

  absl::Status Run(Stream& s) {
    if (data_.size() < 2 || Marker(0) != kSoi) return WsqError(0, "the data does not start with the SOI marker FFA0");
    size_t pos = 2;
    for (;;) {
      if (pos + 2 > data_.size()) {
        return WsqError(pos, s.frame ? "the data ends before the EOI marker" : "the data ends before the SOF marker");
      }
      const uint16_t marker = Marker(pos);
      switch (marker) {
        case kDtt:
        case kDqt:
        case kDht:
        case kDrt:
        case kCom:
        case kSof: {
          TESSERA_ASSIGN_OR_RETURN(pos, Segment(pos, marker, s));
          break;
        }
        case kSob: {
          TESSERA_ASSIGN_OR_RETURN(pos, Block(pos, s));
          break;
        }
        case kEoi:
          return Finish(pos, s);
        default:
          if ((marker >> 8) != 0xFF) return WsqError(pos, absl::StrFormat("expected a marker, found bytes %04X", marker));
          return WsqError(pos, absl::StrFormat("unexpected marker %04X", marker));
      }
    }
  }

 private:
  uint16_t Marker(size_t pos) const {
    return static_cast<uint16_t>((static_cast<uint8_t>(data_[pos]) << 8) | static_cast<uint8_t>(data_[pos + 1]));
  }

  // The payload of the segment whose marker is at `pos`, checked against
  // the data; *end is where the next marker starts.
  absl::StatusOr<SegmentCursor> Payload(size_t pos, uint16_t marker, size_t* end) const {
    const absl::string_view name = SegmentName(marker);
    if (pos + 4 > data_.size()) return WsqError(pos + 2, absl::StrCat("the data ends inside the ", name, "'s length"));
    const size_t length = Marker(pos + 2);
    if (length < 2) return WsqError(pos + 2, absl::StrCat(name, " length ", length, " is less than 2"));
    if (pos + 2 + length > data_.size()) {
      return WsqError(pos + 2, absl::StrCat(name, " length ", length, " runs past the end of the data (",
                                            data_.size() - pos - 2, " bytes left)"));
    }
    *end = pos + 2 + length;
    return SegmentCursor(data_.substr(pos + 4, length - 2), pos + 4, name);
  }

  absl::StatusOr<size_t> Segment(size_t pos, uint16_t marker, Stream& s) {
    size_t end = 0;
    TESSERA_ASSIGN_OR_RETURN(SegmentCursor in, Payload(pos, marker, &end));
    switch (marker) {
      case kSof: {
        if (s.frame) return WsqError(pos, "a second SOF frame header");
        TESSERA_ASSIGN_OR_RETURN(FrameHeader frame, ParseFrameHeader(in));
        // Refuse an oversized image before anything is sized by it.
        const int64_t pixels = int64_t{frame.width} * frame.height;
        if (pixels > max_pixels_) {
          return WsqError(pos, absl::StrCat("the image is ", frame.width, " x ", frame.height, " = ", pixels,
                                            " pixels, over the limit of ", max_pixels_));
        }
        s.frame = frame;
        break;
      }
      case kDtt: {
        TESSERA_ASSIGN_OR_RETURN(s.filters, ParseTransformTable(in));
        break;
      }
      case kDqt: {
        // The quantizer fixes which subbands the blocks fill: it cannot
        // change once they have started.
        if (s.blocks > 0) return WsqError(pos, "a DQT quantization table after the first block");
        TESSERA_ASSIGN_OR_RETURN(s.quant, ParseQuantTable(in));
        break;
      }
      case kDht:
        TESSERA_RETURN_IF_ERROR(ParseHuffmanTables(in, s.huffman, s.huffman_defined));
        break;
      case kDrt: {
        TESSERA_ASSIGN_OR_RETURN(s.restart_interval, ParseRestartInterval(in));
        break;
      }
      case kCom: {
        // The first NISTCOM comment gives the resolution.
        const absl::string_view text = in.Rest();
        if (!s.nistcom_seen && IsNistcom(text)) {
          s.nistcom_seen = true;
          s.ppi = NistcomPpi(text);
        }
        break;
      }
    }
    return end;
  }

  absl::StatusOr<size_t> Block(size_t pos, Stream& s) {
    const int block = s.blocks + 1;
    if (!s.frame) return WsqError(pos, "a SOB block before the SOF frame header");
    if (!s.quant) return WsqError(pos, absl::StrCat("block ", block, " starts before any DQT quantization table"));
    size_t end = 0;
    TESSERA_ASSIGN_OR_RETURN(SegmentCursor in, Payload(pos, kSob, &end));
    uint8_t table = 0;
    TESSERA_RETURN_IF_ERROR(in.U8("Huffman table identifier", &table));
    TESSERA_RETURN_IF_ERROR(in.ExpectEnd());
    if (table >= kMaxHuffmanTables || !s.huffman_defined[table]) {
      return WsqError(pos, absl::StrCat("Huffman table ", int{table}, " used by block ", block, " is not defined"));
    }
    if (s.blocks == 0) {
      s.layout = BuildSubbandLayout(s.frame->width, s.frame->height);
      for (int k = 0; k < kCodedSubbands; ++k) {
        if (s.quant->bin_width[k] != 0.0) s.coefficients.expected += s.layout.subbands[k].area();
      }
    }
    s.blocks = block;
    return DecodeBlock(data_, end, s.huffman[table], table, block, s.restart_interval > 0, s.coefficients);
  }

  absl::Status Finish(size_t pos, const Stream& s) const {
    if (!s.frame) return WsqError(pos, "EOI before the SOF frame header");
    if (s.blocks == 0) return WsqError(pos, "EOI before any SOB block");
    if (s.coefficients.count != s.coefficients.expected) {
      return WsqError(pos, absl::StrCat("the blocks code ", s.coefficients.count, " coefficients, the subbands need ",
                                        s.coefficients.expected));
    }
    if (!s.filters) return WsqError(pos, "no DTT wavelet filter table");
    return absl::OkStatus();
  }

  absl::string_view data_;
  int64_t max_pixels_;
};

// Rebuilds the subbands from the quantized coefficients.
std::vector<float> Dequantize(const Stream& s) {
  const int width = s.frame->width;
  std::vector<float> image(static_cast<size_t>(width) * s.frame->height, 0.0f);
  const QuantTable& q = *s.quant;
  const QuantizedCoefficients& c = s.coefficients;
  size_t next = 0;     // the next non-zero coefficient
  uint64_t base = 0;   // the first coefficient of subband k
  for (int k = 0; k < kCodedSubbands; ++k) {
    if (q.bin_width[k] == 0.0) continue;
    const Rect& r = s.layout.subbands[k];
    const uint64_t end = base + static_cast<uint64_t>(r.area());
    const double half_zero = q.zero_width[k] / 2.0;
    for (; next < c.index.size() && c.index[next] < end; ++next) {
      const uint64_t local = c.index[next] - base;
      const int row = static_cast<int>(local / r.width);
      const int col = static_cast<int>(local % r.width);
      const int32_t v = c.value[next];
      const double magnitude = q.bin_width[k] * (std::abs(v) - q.bin_center) + half_zero;
      image[static_cast<size_t>(r.y + row) * width + r.x + col] = static_cast<float>(v > 0 ? magnitude : -magnitude);
    }
    base = end;
  }
  return image;
}

}  // namespace

absl::StatusOr<GrayImage> DecodeWsq(absl::string_view bytes, int64_t max_pixels) {
  Stream s;
  TESSERA_RETURN_IF_ERROR(Parser(bytes, max_pixels).Run(s));
  std::vector<float> values = Dequantize(s);
  InverseWaveletTransform(*s.filters, s.layout, s.frame->width, values);

  GrayImage image;
  image.width = s.frame->width;
  image.height = s.frame->height;
  image.ppi = s.ppi;
  image.pixels.resize(values.size());
  const float scale = static_cast<float>(s.frame->scale);
  const float shift = static_cast<float>(s.frame->shift);
  for (size_t i = 0; i < values.size(); ++i) {
    // Round half up, then clamp: quantization can overshoot 0..255 (and
    // absurd tables can give infinities or NaN, which must not reach the
    // conversion).
    const float v = values[i] * scale + shift + 0.5f;
    image.pixels[i] = !(v > 0.0f) ? 0 : v >= 255.0f ? 255 : static_cast<uint8_t>(v);
  }
  return image;
}

}  // namespace fingerprint
}  // namespace tessera
