// FBI WSQ 3.1 (Wavelet Scalar Quantization Gray-scale Fingerprint Image
// Compression Specification, IAFIS-IC-0110(V3.1), 2010): a decoder written
// from the specification. Markers SOI, SOF, SOB, DTT (wavelet filters),
// DQT (quantization), DHT (Huffman tables), COM (NISTCOM comments: PPI), EOI.
//
// Malformed input (a missing or repeated marker, a table out of range, a
// Huffman code that does not decode, a block that runs past the data, an
// image size over DecodeOptions::max_pixels) is INVALID_ARGUMENT naming the
// problem and the byte offset.
#ifndef TESSERA_SERVICES_FINGERPRINT_IMAGE_WSQ_DECODE_H_
#define TESSERA_SERVICES_FINGERPRINT_IMAGE_WSQ_DECODE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "services/fingerprint/image/gray_image.h"

namespace tessera {
namespace fingerprint {

// `ppi` of the result: the NISTCOM "PPI" comment when there is one (WSQ has
// no resolution field of its own; -1 there means unknown), else 0.
absl::StatusOr<GrayImage> DecodeWsq(absl::string_view bytes, int64_t max_pixels);

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_IMAGE_WSQ_DECODE_H_
