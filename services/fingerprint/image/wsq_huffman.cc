#include "services/fingerprint/image/wsq_huffman.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "services/fingerprint/image/wsq_format.h"

namespace tessera {
namespace fingerprint {
namespace wsq_internal {
namespace {

// Bits of the entropy-coded data, with the stuffed zero bytes removed. It
// stops in front of the first marker (or at the end of the data) and
// remembers where that was.
class BitReader {
 public:
  BitReader(absl::string_view data, size_t offset) : data_(data), pos_(offset) {}

  // Buffers at least 57 bits, or all that is left before the stop.
  void Refill() {
    while (bits_ <= 56 && !stopped_) {
      if (pos_ >= data_.size()) {
        Stop(data_.size(), false);
        break;
      }
      const uint8_t b = Byte(pos_);
      if (b == 0xFF) {
        if (pos_ + 1 >= data_.size()) {  // a lone 0xFF at the very end
          Stop(pos_, false);
          break;
        }
        if (Byte(pos_ + 1) != 0x00) {
          Stop(pos_, true);
          break;
        }
        pos_ += 2;
      } else {
        pos_ += 1;
      }
      buffer_ = (buffer_ << 8) | b;
      bits_ += 8;
    }
  }
  int available() const { return bits_; }
  uint32_t Peek(int n) const { return static_cast<uint32_t>(buffer_ >> (bits_ - n)) & ((uint32_t{1} << n) - 1); }
  void Skip(int n) { bits_ -= n; }
  uint32_t Take(int n) {
    const uint32_t v = Peek(n);
    Skip(n);
    return v;
  }

  bool stopped() const { return stopped_; }
  bool at_marker() const { return at_marker_; }
  size_t stop_offset() const { return stop_; }
  uint16_t marker() const { return static_cast<uint16_t>((Byte(stop_) << 8) | Byte(stop_ + 1)); }
  // About where the next unread bit lies (for errors).
  size_t offset() const { return pos_ - static_cast<size_t>(bits_ / 8); }

  // Continues after a restart marker: byte-aligned, the padding dropped.
  void RestartAfter(size_t offset) {
    pos_ = offset;
    bits_ = 0;
    buffer_ = 0;
    stopped_ = false;
    at_marker_ = false;
  }

 private:
  uint8_t Byte(size_t i) const { return static_cast<uint8_t>(data_[i]); }
  void Stop(size_t where, bool marker) {
    stopped_ = true;
    at_marker_ = marker;
    stop_ = where;
  }

  absl::string_view data_;
  size_t pos_;
  uint64_t buffer_ = 0;
  int bits_ = 0;
  bool stopped_ = false;
  bool at_marker_ = false;
  size_t stop_ = 0;
};

constexpr int kNoCode = -1;      // the bits before the stop do not complete a code
constexpr int kInvalidCode = -2;  // 16 bits that are no code of the table

// The next symbol, or kNoCode / kInvalidCode.
int DecodeSymbol(BitReader& in, const HuffmanTable& t) {
  in.Refill();
  if (in.available() >= 8) {
    const uint16_t fast = t.fast[in.Peek(8)];
    if (fast != 0) {
      in.Skip(fast >> 8);
      return fast & 0xFF;
    }
  }
  for (int length = 1; length <= 16; ++length) {
    if (length > in.available()) return kNoCode;  // only at a stop
    const int32_t code = static_cast<int32_t>(in.Peek(length));
    if (t.max_code[length] >= 0 && code <= t.max_code[length]) {
      in.Skip(length);
      return t.values[t.first_value[length] + (code - t.min_code[length])];
    }
  }
  return kInvalidCode;
}

}  // namespace

absl::StatusOr<size_t> DecodeBlock(absl::string_view data, size_t offset, const HuffmanTable& table, int table_id,
                                   int block, bool restarts_allowed, QuantizedCoefficients& out) {
  BitReader in(data, offset);
  auto overflow = [&](uint64_t n) {
    return WsqError(in.offset(), absl::StrCat("block ", block, " codes more coefficients than the ", out.expected,
                                              " of the coded subbands (", out.count, " + ", n, ")"));
  };
  // Every symbol takes at least one bit and every pass either takes one or
  // stops, so the loop is bounded by the data.
  for (;;) {
    const int symbol = DecodeSymbol(in, table);
    if (symbol == kInvalidCode) {
      return WsqError(in.offset(), absl::StrCat("block ", block, ": the bits are no code of Huffman table ", table_id));
    }
    if (symbol == kNoCode) {
      if (!in.at_marker()) {
        return WsqError(in.stop_offset(), absl::StrCat("the data ends inside block ", block, " (no marker after it)"));
      }
      const uint16_t marker = in.marker();
      if (marker < kRst0 || marker > kRst7) return in.stop_offset();
      if (!restarts_allowed) {
        return WsqError(in.stop_offset(), absl::StrFormat("restart marker %04X in block %d without a DRT restart "
                                                          "interval", marker, block));
      }
      in.RestartAfter(in.stop_offset() + 2);
      continue;
    }
    if (symbol >= 1 && symbol <= 100) {
      if (static_cast<uint64_t>(symbol) > out.expected - out.count) return overflow(symbol);
      out.count += symbol;
      continue;
    }
    if (symbol >= 107 && symbol <= 254) {
      if (out.count >= out.expected) return overflow(1);
      if (symbol != 180) {
        out.index.push_back(static_cast<uint32_t>(out.count));
        out.value.push_back(symbol - 180);
      }
      ++out.count;
      continue;
    }
    if (symbol < 101 || symbol > 106) {
      return WsqError(in.offset(), absl::StrCat("block ", block, ": Huffman table ", table_id, " decodes to symbol ",
                                                symbol, ", which has no meaning"));
    }
    // An escape: 8 or 16 more bits, a coefficient or a zero run length.
    const int bits = (symbol == 101 || symbol == 102 || symbol == 105) ? 8 : 16;
    in.Refill();
    if (in.available() < bits) {
      return WsqError(in.offset(), absl::StrCat("block ", block, ": the data stops inside the ", bits,
                                                "-bit value of escape symbol ", symbol));
    }
    const uint32_t v = in.Take(bits);
    if (symbol == 105 || symbol == 106) {
      if (v > out.expected - out.count) return overflow(v);
      out.count += v;
      continue;
    }
    if (out.count >= out.expected) return overflow(1);
    if (v != 0) {
      out.index.push_back(static_cast<uint32_t>(out.count));
      out.value.push_back((symbol == 101 || symbol == 103) ? static_cast<int32_t>(v) : -static_cast<int32_t>(v));
    }
    ++out.count;
  }
}

}  // namespace wsq_internal
}  // namespace fingerprint
}  // namespace tessera
