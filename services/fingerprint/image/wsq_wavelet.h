// WSQ inverse wavelet transform: the 2-D synthesis steps of the subband
// layout (wsq_subbands.h), each a 1-D synthesis down the columns and then
// along the rows.
//
// The encoder filtered a symmetrically extended signal, so each band is
// itself symmetric (or antisymmetric) about its ends; synthesis extends the
// bands the same way and applies the two synthesis filters.
//   odd-length filters (the FBI 9/7 pair): lowpass samples sit at even
//     positions 2k, highpass at odd 2k+1; both bands are whole-sample
//     symmetric about an end whose position they own, half-sample
//     symmetric about one they do not.
//   even-length filters: both bands sit at 2k + 1/2; the lowpass is
//     symmetric, the highpass antisymmetric (its mirrored samples change
//     sign, and the sample on a whole-sample axis is an implied zero).
#ifndef TESSERA_SERVICES_FINGERPRINT_IMAGE_WSQ_WAVELET_H_
#define TESSERA_SERVICES_FINGERPRINT_IMAGE_WSQ_WAVELET_H_

#include <cstdint>
#include <vector>

#include "services/fingerprint/image/wsq_subbands.h"
#include "services/fingerprint/image/wsq_tables.h"

namespace tessera {
namespace fingerprint {
namespace wsq_internal {

// The 1-D synthesis of a line of `length` samples laid out as its two
// bands (lowpass ceil(length/2) samples first, or the highpass floor(length/2)
// first when `inverted`), written as a sparse matrix: output i is the sum
// of weight[j] * line[source[j]] for j in [start[i], start[i + 1]).
struct LineSynthesis {
  std::vector<int32_t> start;
  std::vector<int32_t> source;
  std::vector<float> weight;
  // Away from the ends the matrix is regular: for parity p (0: even
  // outputs, 1: odd) and t in [begin, end), output 2t + p is the sum of
  // tap.weight * line[tap.source + t]. The ends use the rows above.
  struct Tap {
    int32_t source;
    float weight;
  };
  struct Interior {
    int begin = 0, end = 0;
    std::vector<Tap> taps;
  };
  Interior interior[2];
};
LineSynthesis BuildLineSynthesis(const WaveletFilters& filters, int length, bool inverted);

// Runs the synthesis steps in place over `image` (row-major floats, `width`
// a row, the subbands at their layout positions).
void InverseWaveletTransform(const WaveletFilters& filters, const SubbandLayout& layout, int width,
                             std::vector<float>& image);

}  // namespace wsq_internal
}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_IMAGE_WSQ_WAVELET_H_
