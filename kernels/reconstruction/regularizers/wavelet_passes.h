// The passes wavelet.cc strings together, on the CPU (wavelet_cpu.cc, the
// reference) and CUDA (wavelet.cu): circular shift copies, one in-place 1-D
// filter bank along an axis of a sub-block, soft thresholding outside the
// coarse band. Internal to the wavelet library.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_REGULARIZERS_WAVELET_PASSES_H_
#define TESSERA_KERNELS_RECONSTRUCTION_REGULARIZERS_WAVELET_PASSES_H_

#include <complex>
#include <cstdint>

#include "absl/status/status.h"
#include "common/device.h"

namespace tessera {
namespace recon {
namespace regularizers {

// Orthonormal analysis filters: low h, high g[j] = (-1)^j h[taps - 1 - j].
struct WaveletTaps {
  int taps = 0;
  float h[8] = {};
  float g[8] = {};
};

// Dimensions of the full image and of the sub-block a pass works on.
struct Dims3 {
  int64_t n[3] = {1, 1, 1};
};

namespace cpu {
// unshift = false: dst[i] = src[(i + s) mod n]; true: dst[(i + s) mod n] = src[i].
void ShiftCopy(const Dims3& dims, const int64_t shift[3], bool unshift, const std::complex<float>* src,
               std::complex<float>* dst);
// Filter every line along `axis` of the block [0, block.n) in place: forward
// writes approximation then detail halves; inverse undoes it.
void FilterAxis(const Dims3& dims, const Dims3& block, int axis, const WaveletTaps& taps, bool inverse,
                std::complex<float>* data);
// Soft threshold outside [0, coarse.n).
void SoftThresholdOutside(const Dims3& dims, const Dims3& coarse, float threshold, std::complex<float>* data);
}  // namespace cpu

namespace cuda {
absl::Status ShiftCopy(const Stream& stream, const Dims3& dims, const int64_t shift[3], bool unshift,
                       const std::complex<float>* src, std::complex<float>* dst);
absl::Status FilterAxis(const Stream& stream, const Dims3& dims, const Dims3& block, int axis,
                        const WaveletTaps& taps, bool inverse, std::complex<float>* data);
absl::Status SoftThresholdOutside(const Stream& stream, const Dims3& dims, const Dims3& coarse, float threshold,
                                  std::complex<float>* data);
}  // namespace cuda

}  // namespace regularizers
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_REGULARIZERS_WAVELET_PASSES_H_
