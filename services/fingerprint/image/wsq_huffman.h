// WSQ entropy-coded data: the Huffman-coded quantized coefficients of one
// block, read from the bytes after its SOB header up to the next marker.
//
// Symbols (spec part 1, table of Huffman code categories):
//   1..100   a run of that many zero coefficients
//   101/102  the next 8 bits are a positive/negative coefficient
//   103/104  the next 16 bits are a positive/negative coefficient
//   105/106  the next 8/16 bits are the length of a zero run
//   107..254 the coefficient symbol - 180 (-73..74)
// A 0xFF data byte is followed by a stuffed 0x00; any other 0xFF xx is a
// marker and ends the data (RST0..RST7 only byte-align it, when a DRT
// defined a restart interval). The bits left before a marker pad the last
// byte and do not complete a code.
#ifndef TESSERA_SERVICES_FINGERPRINT_IMAGE_WSQ_HUFFMAN_H_
#define TESSERA_SERVICES_FINGERPRINT_IMAGE_WSQ_HUFFMAN_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "services/fingerprint/image/wsq_tables.h"

namespace tessera {
namespace fingerprint {
namespace wsq_internal {

// The quantized coefficients of all blocks, in transmission order (the
// coded subbands one after another, each row by row). Only the non-zero
// ones are stored, so memory follows the input size, not the image size a
// header claims.
struct QuantizedCoefficients {
  uint64_t expected = 0;  // coefficients in the coded subbands
  uint64_t count = 0;     // decoded so far
  std::vector<uint32_t> index;  // position of each non-zero coefficient
  std::vector<int32_t> value;
};

// Decodes the block whose coded data starts at `offset` with Huffman
// table `table` (identifier `table_id`, of block number `block`, both for
// errors) and appends its coefficients. Returns the offset of the marker
// that ends the block.
absl::StatusOr<size_t> DecodeBlock(absl::string_view data, size_t offset, const HuffmanTable& table, int table_id,
                                   int block, bool restarts_allowed, QuantizedCoefficients& out);

}  // namespace wsq_internal
}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_IMAGE_WSQ_HUFFMAN_H_
