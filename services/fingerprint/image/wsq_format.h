// WSQ internals shared by the decoder's parts (wsq_decode.cc and its
// wsq_*.cc helpers): the marker codes, the error every part returns, and a
// bounds-checked big-endian cursor over one marker segment.
#ifndef TESSERA_SERVICES_FINGERPRINT_IMAGE_WSQ_FORMAT_H_
#define TESSERA_SERVICES_FINGERPRINT_IMAGE_WSQ_FORMAT_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tessera {
namespace fingerprint {
namespace wsq_internal {

// Marker codes (WSQ 3.1, Table 1 of part 1, annex B).
constexpr uint16_t kSoi = 0xFFA0;  // start of image
constexpr uint16_t kEoi = 0xFFA1;  // end of image
constexpr uint16_t kSof = 0xFFA2;  // start of frame
constexpr uint16_t kSob = 0xFFA3;  // start of block
constexpr uint16_t kDtt = 0xFFA4;  // define transform (wavelet filter) table
constexpr uint16_t kDqt = 0xFFA5;  // define quantization table
constexpr uint16_t kDht = 0xFFA6;  // define Huffman table(s)
constexpr uint16_t kDrt = 0xFFA7;  // define restart interval
constexpr uint16_t kCom = 0xFFA8;  // comment
constexpr uint16_t kRst0 = 0xFFB0;  // restart markers RST0..RST7
constexpr uint16_t kRst7 = 0xFFB7;

// The 64 subbands of the decomposition; 60..63 (the finest diagonal
// quarter of the image) are never transmitted.
constexpr int kNumSubbands = 64;
constexpr int kCodedSubbands = 60;
// Huffman table identifiers a block may name.
constexpr int kMaxHuffmanTables = 8;

// Every decoding error: INVALID_ARGUMENT "WSQ: <what> (offset N)", N being
// the byte offset in the stream where the problem was found.
inline absl::Status WsqError(size_t offset, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("WSQ: ", what, " (offset ", offset, ")"));
}

// Reads one marker segment's payload: every read is checked against the
// segment's end, and offsets are reported relative to the whole stream.
class SegmentCursor {
 public:
  // `bytes` is the payload; `base` is its offset in the stream; `segment`
  // names it in errors ("DQT segment").
  SegmentCursor(absl::string_view bytes, size_t base, absl::string_view segment)
      : bytes_(bytes), base_(base), segment_(segment) {}

  size_t offset() const { return base_ + pos_; }  // in the stream
  size_t remaining() const { return bytes_.size() - pos_; }

  absl::Status U8(absl::string_view field, uint8_t* v) {
    if (remaining() < 1) return Short(field, 1);
    *v = static_cast<uint8_t>(bytes_[pos_++]);
    return absl::OkStatus();
  }
  absl::Status U16(absl::string_view field, uint16_t* v) {
    if (remaining() < 2) return Short(field, 2);
    *v = static_cast<uint16_t>((Byte(pos_) << 8) | Byte(pos_ + 1));
    pos_ += 2;
    return absl::OkStatus();
  }
  absl::Status U32(absl::string_view field, uint32_t* v) {
    if (remaining() < 4) return Short(field, 4);
    *v = (uint32_t{Byte(pos_)} << 24) | (uint32_t{Byte(pos_ + 1)} << 16) | (uint32_t{Byte(pos_ + 2)} << 8) |
         uint32_t{Byte(pos_ + 3)};
    pos_ += 4;
    return absl::OkStatus();
  }
  absl::string_view Rest() {
    absl::string_view rest = bytes_.substr(pos_);
    pos_ = bytes_.size();
    return rest;
  }
  // The whole payload must have been read: a segment length that does not
  // match its content is a malformed stream, not something to skip over.
  absl::Status ExpectEnd() const {
    if (remaining() == 0) return absl::OkStatus();
    return WsqError(offset(), absl::StrCat(segment_, " has ", remaining(), " bytes beyond its content"));
  }
  absl::Status Error(absl::string_view what) const { return WsqError(offset(), absl::StrCat(segment_, ": ", what)); }

 private:
  uint32_t Byte(size_t i) const { return static_cast<uint8_t>(bytes_[i]); }
  absl::Status Short(absl::string_view field, size_t n) const {
    return WsqError(offset(), absl::StrCat(segment_, " ends inside its ", field, " (needs ", n, " bytes, ",
                                           remaining(), " left)"));
  }

  absl::string_view bytes_;
  size_t base_;
  absl::string_view segment_;
  size_t pos_ = 0;
};

}  // namespace wsq_internal
}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_IMAGE_WSQ_FORMAT_H_
