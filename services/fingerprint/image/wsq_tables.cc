#include "services/fingerprint/image/wsq_tables.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/status.h"

namespace tessera {
namespace fingerprint {
namespace wsq_internal {
namespace {

// Filters longer than this are refused: the FBI pair is 9/7 and nothing in
// the spec's examples exceeds a few dozen taps.
constexpr int kMaxFilterLength = 32;

// The spec's scaled integers: value / 10^exponent.
double Unscale(uint32_t value, uint8_t exponent) {
  double v = value;
  for (int i = 0; i < exponent; ++i) v /= 10.0;
  return v;
}

absl::Status ReadScaled16(SegmentCursor& in, absl::string_view field, double* out) {
  uint8_t exponent = 0;
  uint16_t value = 0;
  TESSERA_RETURN_IF_ERROR(in.U8(field, &exponent));
  TESSERA_RETURN_IF_ERROR(in.U16(field, &value));
  *out = Unscale(value, exponent);
  return absl::OkStatus();
}

// A DTT coefficient: a sign byte (0 = positive), an exponent and a 32-bit
// magnitude.
absl::Status ReadCoefficient(SegmentCursor& in, double* out) {
  uint8_t sign = 0, exponent = 0;
  uint32_t magnitude = 0;
  TESSERA_RETURN_IF_ERROR(in.U8("coefficient sign", &sign));
  TESSERA_RETURN_IF_ERROR(in.U8("coefficient exponent", &exponent));
  TESSERA_RETURN_IF_ERROR(in.U32("coefficient", &magnitude));
  *out = (sign != 0 ? -1.0 : 1.0) * Unscale(magnitude, exponent);
  return absl::OkStatus();
}

// The synthesis filter of length `length` whose analysis counterpart has
// the half `half` (centre first). Perfect reconstruction pairs each
// synthesis filter with the other band's analysis filter modulated by
// (-1)^n, so the signs alternate from the centre out. `antisymmetric`
// (even lengths, the synthesis highpass) mirrors with a sign change;
// `odd_first` starts the alternation at -1 (even lengths, the lowpass).
std::vector<float> MirrorHalf(const std::vector<double>& half, int length, bool antisymmetric, bool odd_first) {
  std::vector<float> filter(length, 0.0f);
  const int n = static_cast<int>(half.size());
  if (length % 2 == 1) {
    const int centre = n - 1;  // (length - 1) / 2
    for (int j = 0; j < n; ++j) {
      const double v = (j % 2 == 0 ? 1.0 : -1.0) * half[j];
      filter[centre + j] = static_cast<float>(v);
      filter[centre - j] = static_cast<float>(v);
    }
  } else {
    const int left = n - 1;  // the taps left..0 mirror left+1..length-1
    for (int j = 0; j < n; ++j) {
      const bool negative = (j % 2 == 1) != odd_first;
      const double v = (negative ? -1.0 : 1.0) * half[j];
      filter[left + 1 + j] = static_cast<float>(v);
      filter[left - j] = static_cast<float>(antisymmetric ? -v : v);
    }
  }
  return filter;
}

absl::Status BuildDecodingTables(HuffmanTable& t, int id, size_t offset) {
  int32_t code = 0;
  int32_t index = 0;
  for (int length = 1; length <= 16; ++length) {
    const int n = t.counts[length - 1];
    if (n == 0) {
      t.max_code[length] = -1;
    } else {
      t.first_value[length] = index;
      t.min_code[length] = code;
      code += n;
      index += n;
      t.max_code[length] = code - 1;
    }
    // More codes of this length than the lengths before leave room for:
    // the table is not a prefix code.
    if (code > (int32_t{1} << length)) {
      return WsqError(offset, absl::StrCat("Huffman table ", id, " has more codes of length ", length,
                                           " than a prefix code allows"));
    }
    code <<= 1;
  }
  t.fast.fill(0);
  for (int length = 1; length <= 8; ++length) {
    if (t.max_code[length] < 0) continue;
    for (int32_t c = t.min_code[length]; c <= t.max_code[length]; ++c) {
      const uint8_t symbol = t.values[t.first_value[length] + (c - t.min_code[length])];
      const int spare = 8 - length;
      for (int s = 0; s < (1 << spare); ++s) {
        t.fast[(c << spare) | s] = static_cast<uint16_t>((length << 8) | symbol);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<FrameHeader> ParseFrameHeader(SegmentCursor& in) {
  uint8_t black = 0, white = 0, encoder = 0;
  uint16_t height = 0, width = 0, software = 0;
  FrameHeader h;
  TESSERA_RETURN_IF_ERROR(in.U8("black level", &black));
  TESSERA_RETURN_IF_ERROR(in.U8("white level", &white));
  TESSERA_RETURN_IF_ERROR(in.U16("height", &height));
  TESSERA_RETURN_IF_ERROR(in.U16("width", &width));
  TESSERA_RETURN_IF_ERROR(ReadScaled16(in, "shift M", &h.shift));
  TESSERA_RETURN_IF_ERROR(ReadScaled16(in, "scale R", &h.scale));
  TESSERA_RETURN_IF_ERROR(in.U8("encoder number", &encoder));
  TESSERA_RETURN_IF_ERROR(in.U16("software number", &software));
  TESSERA_RETURN_IF_ERROR(in.ExpectEnd());
  if (width == 0 || height == 0) {
    return in.Error(absl::StrCat("the image size ", width, " x ", height, " is empty"));
  }
  h.width = width;
  h.height = height;
  return h;
}

absl::StatusOr<WaveletFilters> ParseTransformTable(SegmentCursor& in) {
  uint8_t lowpass_length = 0, highpass_length = 0;  // of the analysis filters
  TESSERA_RETURN_IF_ERROR(in.U8("lowpass filter length", &lowpass_length));
  TESSERA_RETURN_IF_ERROR(in.U8("highpass filter length", &highpass_length));
  for (int length : {int{lowpass_length}, int{highpass_length}}) {
    if (length < 1 || length > kMaxFilterLength) {
      return in.Error(absl::StrCat("filter length ", length, " is outside 1..", kMaxFilterLength));
    }
  }
  if (lowpass_length % 2 != highpass_length % 2) {
    return in.Error(absl::StrCat("filter lengths ", int{lowpass_length}, " and ", int{highpass_length},
                                 " are not both odd or both even"));
  }
  std::vector<double> lowpass_half((lowpass_length + 1) / 2), highpass_half((highpass_length + 1) / 2);
  for (double& c : lowpass_half) TESSERA_RETURN_IF_ERROR(ReadCoefficient(in, &c));
  for (double& c : highpass_half) TESSERA_RETURN_IF_ERROR(ReadCoefficient(in, &c));
  TESSERA_RETURN_IF_ERROR(in.ExpectEnd());
  WaveletFilters f;
  f.highpass = MirrorHalf(lowpass_half, lowpass_length, /*antisymmetric=*/true, /*odd_first=*/false);
  f.lowpass = MirrorHalf(highpass_half, highpass_length, /*antisymmetric=*/false, /*odd_first=*/true);
  return f;
}

absl::StatusOr<QuantTable> ParseQuantTable(SegmentCursor& in) {
  QuantTable q;
  TESSERA_RETURN_IF_ERROR(ReadScaled16(in, "bin centre C", &q.bin_center));
  for (int k = 0; k < kNumSubbands; ++k) {
    TESSERA_RETURN_IF_ERROR(ReadScaled16(in, "bin width", &q.bin_width[k]));
    TESSERA_RETURN_IF_ERROR(ReadScaled16(in, "zero bin width", &q.zero_width[k]));
  }
  TESSERA_RETURN_IF_ERROR(in.ExpectEnd());
  return q;
}

absl::Status ParseHuffmanTables(SegmentCursor& in, std::array<HuffmanTable, kMaxHuffmanTables>& tables,
                                std::array<bool, kMaxHuffmanTables>& defined) {
  std::array<bool, kMaxHuffmanTables> seen{};
  if (in.remaining() == 0) return in.Error("defines no table");
  while (in.remaining() > 0) {
    const size_t table_offset = in.offset();
    uint8_t id = 0;
    TESSERA_RETURN_IF_ERROR(in.U8("table identifier", &id));
    if (id >= kMaxHuffmanTables) {
      return WsqError(table_offset, absl::StrCat("Huffman table identifier ", int{id}, " is not 0..",
                                                 kMaxHuffmanTables - 1));
    }
    if (seen[id]) {
      return WsqError(table_offset, absl::StrCat("Huffman table ", int{id}, " is defined twice in one DHT"));
    }
    seen[id] = true;
    HuffmanTable t;
    int total = 0;
    for (uint8_t& count : t.counts) {
      TESSERA_RETURN_IF_ERROR(in.U8("code counts", &count));
      total += count;
    }
    if (total == 0 || total > 256) {
      return WsqError(table_offset, absl::StrCat("Huffman table ", int{id}, " has ", total, " codes (1..256)"));
    }
    t.values.resize(total);
    for (uint8_t& v : t.values) TESSERA_RETURN_IF_ERROR(in.U8("symbols", &v));
    TESSERA_RETURN_IF_ERROR(BuildDecodingTables(t, id, table_offset));
    tables[id] = std::move(t);
    defined[id] = true;
  }
  return absl::OkStatus();
}

absl::StatusOr<int> ParseRestartInterval(SegmentCursor& in) {
  uint16_t interval = 0;
  TESSERA_RETURN_IF_ERROR(in.U16("restart interval", &interval));
  TESSERA_RETURN_IF_ERROR(in.ExpectEnd());
  return int{interval};
}

bool IsNistcom(absl::string_view comment) { return absl::StartsWith(comment, "NIST_COM"); }

int NistcomPpi(absl::string_view comment) {
  if (!IsNistcom(comment)) return 0;
  for (absl::string_view line : absl::StrSplit(comment, absl::ByAnyChar("\n\r"), absl::SkipEmpty())) {
    line = absl::StripAsciiWhitespace(line);
    const size_t space = line.find_first_of(" \t");
    if (space == absl::string_view::npos || line.substr(0, space) != "PPI") continue;
    absl::string_view value = absl::StripAsciiWhitespace(line.substr(space + 1));
    while (!value.empty() && value.back() == '\0') value.remove_suffix(1);
    int ppi = 0;
    if (absl::SimpleAtoi(value, &ppi) && ppi > 0) return ppi;
    return 0;
  }
  return 0;
}

}  // namespace wsq_internal
}  // namespace fingerprint
}  // namespace tessera
