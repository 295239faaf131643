// Bounds-checked big-endian reading and writing for the binary template
// formats (internal to services/fingerprint). Every read names the field it
// wants, so a short buffer yields an error such as
//   "ISO 19794-2 record: minutia 3 of view 0 at byte 50 needs 6 bytes, 2 remain".
#ifndef TESSERA_SERVICES_FINGERPRINT_FORMATS_BYTE_IO_H_
#define TESSERA_SERVICES_FINGERPRINT_FORMATS_BYTE_IO_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace tessera {
namespace fingerprint {
namespace internal {

class ByteReader {
 public:
  // `context` prefixes every error ("ISO 19794-2 record"). Running out of
  // bytes is `shortage_code`: DATA_LOSS while the buffer itself may be
  // truncated, INVALID_ARGUMENT once its length is known to be consistent.
  ByteReader(absl::Span<const uint8_t> bytes, std::string context,
             absl::StatusCode shortage_code = absl::StatusCode::kInvalidArgument)
      : bytes_(bytes), context_(std::move(context)), shortage_code_(shortage_code) {}

  size_t offset() const { return offset_; }
  size_t remaining() const { return bytes_.size() - offset_; }
  void set_shortage_code(absl::StatusCode code) { shortage_code_ = code; }
  // Restricts the reader to the first `size` bytes (size <= the buffer).
  void Truncate(size_t size) { bytes_ = bytes_.subspan(0, size); }

  absl::Status Need(size_t n, absl::string_view field) const {
    if (remaining() >= n) return absl::OkStatus();
    return absl::Status(shortage_code_, absl::StrCat(context_, ": ", field, " at byte ", offset_, " needs ", n,
                                                     " bytes, ", remaining(), " remain"));
  }
  absl::Status U8(absl::string_view field, uint8_t* v) {
    absl::Status s = Need(1, field);
    if (!s.ok()) return s;
    *v = bytes_[offset_++];
    return absl::OkStatus();
  }
  absl::Status U16(absl::string_view field, uint16_t* v) {
    absl::Status s = Need(2, field);
    if (!s.ok()) return s;
    *v = static_cast<uint16_t>((bytes_[offset_] << 8) | bytes_[offset_ + 1]);
    offset_ += 2;
    return absl::OkStatus();
  }
  absl::Status U32(absl::string_view field, uint32_t* v) {
    absl::Status s = Need(4, field);
    if (!s.ok()) return s;
    *v = (uint32_t{bytes_[offset_]} << 24) | (uint32_t{bytes_[offset_ + 1]} << 16) |
         (uint32_t{bytes_[offset_ + 2]} << 8) | uint32_t{bytes_[offset_ + 3]};
    offset_ += 4;
    return absl::OkStatus();
  }
  absl::Status Bytes(size_t n, absl::string_view field, std::string* out) {
    absl::Status s = Need(n, field);
    if (!s.ok()) return s;
    out->assign(reinterpret_cast<const char*>(bytes_.data() + offset_), n);
    offset_ += n;
    return absl::OkStatus();
  }
  // An INVALID_ARGUMENT error with this reader's context.
  absl::Status Invalid(absl::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat(context_, ": ", message));
  }
  const std::string& context() const { return context_; }

 private:
  absl::Span<const uint8_t> bytes_;
  size_t offset_ = 0;
  std::string context_;
  absl::StatusCode shortage_code_;
};

class ByteWriter {
 public:
  void U8(uint32_t v) { out_.push_back(static_cast<uint8_t>(v)); }
  void U16(uint32_t v) {
    U8(v >> 8);
    U8(v);
  }
  void U32(uint32_t v) {
    U16(v >> 16);
    U16(v);
  }
  void Bytes(absl::string_view s) { out_.insert(out_.end(), s.begin(), s.end()); }
  size_t size() const { return out_.size(); }
  // Overwrites a big-endian field written earlier.
  void PatchU16(size_t at, uint32_t v) {
    out_[at] = static_cast<uint8_t>(v >> 8);
    out_[at + 1] = static_cast<uint8_t>(v);
  }
  void PatchU32(size_t at, uint32_t v) {
    PatchU16(at, v >> 16);
    PatchU16(at + 2, v);
  }
  std::vector<uint8_t> Take() { return std::move(out_); }

 private:
  std::vector<uint8_t> out_;
};

}  // namespace internal
}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_FORMATS_BYTE_IO_H_
