// Placeholder until the WSQ decoder lands (being written now).
#include "services/fingerprint/image/wsq_decode.h"

namespace tessera {
namespace fingerprint {

absl::StatusOr<GrayImage> DecodeWsq(absl::string_view, int64_t) {
  return absl::UnimplementedError("WSQ decoding is not built yet");
}

}  // namespace fingerprint
}  // namespace tessera
