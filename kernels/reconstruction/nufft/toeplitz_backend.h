// Internal: what the Toeplitz backends share: checked geometry, and the
// embedding of the centred 2N-mode kernel h into the circulant's first column.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_NUFFT_TOEPLITZ_BACKEND_H_
#define TESSERA_KERNELS_RECONSTRUCTION_NUFFT_TOEPLITZ_BACKEND_H_

#include <array>
#include <memory>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "kernels/reconstruction/nufft/nufft.h"
#include "kernels/reconstruction/nufft/toeplitz.h"

namespace tessera {
namespace recon {
namespace nufft {

struct ToeplitzSetup {
  std::array<int64_t, 3> modes = {1, 1, 1};   // N
  std::array<int64_t, 3> padded = {1, 1, 1};  // 2N (1 on axis 3 in 2-D)
  int dim = 2;
  ToeplitzOptions options;
  NufftOptions kernel_nufft;  // type 1, sign -options.sign, onto `padded` modes

  int64_t num_modes() const { return modes[0] * modes[1] * modes[2]; }
  int64_t padded_size() const { return padded[0] * padded[1] * padded[2]; }
};

// Index in the padded (FFT-order) grid of centred kernel index q on an axis
// of 2N: d = q - N, stored at d mod 2N; q == 0 (d = -N, never used by the
// convolution of two N-vectors) is dropped (-1).
inline int64_t CirculantIndex(int64_t q, int64_t two_n) {
  const int64_t n = two_n / 2;
  if (q == 0 && two_n > 1) return -1;
  const int64_t d = q - n;
  return d < 0 ? d + two_n : d;
}

template <typename T>
absl::StatusOr<std::unique_ptr<ToeplitzOperator<T>>> MakeCpuToeplitz(const ToeplitzSetup& setup, int64_t m,
                                                                     const T* x, const T* y, const T* z,
                                                                     const T* weights);
namespace cuda {
template <typename T>
absl::StatusOr<std::unique_ptr<ToeplitzOperator<T>>> MakeToeplitz(const ToeplitzSetup& setup, const Stream& stream,
                                                                  int64_t m, const T* x, const T* y, const T* z,
                                                                  const T* weights);
}  // namespace cuda

}  // namespace nufft
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_NUFFT_TOEPLITZ_BACKEND_H_
