// Where the 64 WSQ subbands lie in the coefficient image, and the order in
// which the 2-D synthesis steps put them back together.
//
// Every step splits a rectangle into four quadrants by position (top-left,
// top-right, bottom-left, bottom-right). Along each axis the lowpass half
// holds ceil(n/2) samples and the highpass half floor(n/2); normally the
// lowpass half comes first, but a quadrant that lies right of (below) its
// parent's split is "spectrally inverted" along x (y): its own split puts
// the highpass half first. That keeps the subbands in frequency order.
#ifndef TESSERA_SERVICES_FINGERPRINT_IMAGE_WSQ_SUBBANDS_H_
#define TESSERA_SERVICES_FINGERPRINT_IMAGE_WSQ_SUBBANDS_H_

#include <array>
#include <vector>

#include "services/fingerprint/image/wsq_format.h"

namespace tessera {
namespace fingerprint {
namespace wsq_internal {

struct Rect {
  int x = 0, y = 0, width = 0, height = 0;
  long long area() const { return static_cast<long long>(width) * height; }
};

// One 2-D synthesis step: the four quadrants inside `rect` become `rect`.
struct SynthesisStep {
  Rect rect;
  bool invert_x = false;  // the highpass half is on the left
  bool invert_y = false;  // the highpass half is on top
};

struct SubbandLayout {
  // subbands[k]: subband k (0..63) in the coefficient image. 60..63 are
  // never transmitted and stay zero.
  std::array<Rect, kNumSubbands> subbands;
  // In synthesis order: every step after the steps of its quadrants.
  std::vector<SynthesisStep> steps;
};

// The fixed WSQ decomposition (spec part 1, figure of the 64 subbands) of
// a width x height image (both >= 1; tiny images give empty subbands).
SubbandLayout BuildSubbandLayout(int width, int height);

}  // namespace wsq_internal
}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_IMAGE_WSQ_SUBBANDS_H_
