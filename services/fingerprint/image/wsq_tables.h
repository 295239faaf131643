// The WSQ marker segments that carry parameters, each parsed from its
// payload (the bytes after the 2-byte length): the frame header (SOF), the
// wavelet filters (DTT), the quantizer (DQT), Huffman tables (DHT), the
// restart interval (DRT) and NISTCOM comments (COM).
#ifndef TESSERA_SERVICES_FINGERPRINT_IMAGE_WSQ_TABLES_H_
#define TESSERA_SERVICES_FINGERPRINT_IMAGE_WSQ_TABLES_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "services/fingerprint/image/wsq_format.h"

namespace tessera {
namespace fingerprint {
namespace wsq_internal {

struct FrameHeader {
  int width = 0;
  int height = 0;
  // pixel = reconstructed * scale + shift (the spec's R and M).
  double shift = 0;
  double scale = 0;
};
absl::StatusOr<FrameHeader> ParseFrameHeader(SegmentCursor& in);

// The synthesis filters, derived from the analysis filters the DTT
// transmits (only the half of each symmetric filter from its centre on).
// Both lengths are odd (symmetric filters, the FBI 9/7 pair) or both even
// (a symmetric lowpass with an antisymmetric highpass).
struct WaveletFilters {
  std::vector<float> lowpass;   // synthesis lowpass, from the analysis highpass
  std::vector<float> highpass;  // synthesis highpass, from the analysis lowpass
  bool even_length() const { return lowpass.size() % 2 == 0; }
};
absl::StatusOr<WaveletFilters> ParseTransformTable(SegmentCursor& in);

// Dequantization: a coefficient q != 0 of subband k becomes
// sign(q) * (bin_width[k] * (|q| - bin_center) + zero_width[k] / 2).
// A subband whose bin width is 0 is not transmitted (all zero).
struct QuantTable {
  double bin_center = 0;  // the spec's C (0.44 from the FBI encoder)
  std::array<double, kNumSubbands> bin_width{};
  std::array<double, kNumSubbands> zero_width{};
};
absl::StatusOr<QuantTable> ParseQuantTable(SegmentCursor& in);

// One canonical Huffman code (JPEG style: code lengths 1..16).
struct HuffmanTable {
  std::array<uint8_t, 16> counts{};  // codes of length 1..16
  std::vector<uint8_t> values;       // the symbols in code order
  // Canonical decoding tables, index = code length: the codes of length L
  // are min_code[L]..max_code[L] (max_code[L] = -1 when there are none),
  // their symbols start at values[first_value[L]].
  std::array<int32_t, 17> min_code{};
  std::array<int32_t, 17> max_code{};
  std::array<int32_t, 17> first_value{};
  // Lookahead of 8 bits: (length << 8) | symbol for the codes of at most 8
  // bits, 0 where the next code is longer.
  std::array<uint16_t, 256> fast{};
};
// A DHT segment defines one or more tables; each goes into tables[id].
absl::Status ParseHuffmanTables(SegmentCursor& in, std::array<HuffmanTable, kMaxHuffmanTables>& tables,
                                std::array<bool, kMaxHuffmanTables>& defined);

// DRT: the restart interval (0 = no restart markers).
absl::StatusOr<int> ParseRestartInterval(SegmentCursor& in);

// The PPI of a NISTCOM comment ("NIST_COM <n>\n" then "NAME value" lines):
// > 0 when the comment is a NISTCOM with a positive integer PPI, else 0.
int NistcomPpi(absl::string_view comment);
bool IsNistcom(absl::string_view comment);

}  // namespace wsq_internal
}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_IMAGE_WSQ_TABLES_H_
