// The centred, unnormalised DFT of `batch` contiguous 2-D / 3-D grids (x
// fastest; dims[2] == 1 in 2-D), in place, per axis of size N:
//   X[k] = sum_n x[n] exp(sign 2 pi i (k - N/2)(n - N/2) / N)
// (index N/2 is k = 0 and x = 0: BART's and the NUFFT's centred convention),
// i.e. ifftshift, FFT, fftshift, for any N. The Cartesian SENSE operator's
// transform (cartesian_operator.h). CPU: FFTW (a plan per sign, a padded work
// grid per batch entry, entries in parallel); CUDA: a batched cuFFT plan and
// a shift pass each way. Plan once, Execute allocates nothing. Not
// thread-safe.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_MRI_CENTERED_FFT_H_
#define TESSERA_KERNELS_RECONSTRUCTION_MRI_CENTERED_FFT_H_

#include <array>
#include <complex>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/device.h"

namespace tessera {
namespace recon {
namespace mri {

class CenteredFft {
 public:
  // INVALID_ARGUMENT for a size < 1 or batch < 1; FAILED_PRECONDITION for a
  // CUDA stream without CUDA.
  static absl::StatusOr<std::unique_ptr<CenteredFft>> Create(const Stream& stream, std::array<int64_t, 3> dims,
                                                             int batch);
  virtual ~CenteredFft() = default;
  // data: batch x dims values in the stream's memory; sign +1 or -1.
  virtual absl::Status Execute(std::complex<float>* data, int sign) = 0;
};

namespace cpu {
absl::StatusOr<std::unique_ptr<CenteredFft>> CreateCenteredFft(std::array<int64_t, 3> dims, int batch);
}  // namespace cpu
namespace cuda {
absl::StatusOr<std::unique_ptr<CenteredFft>> CreateCenteredFft(const Stream& stream, std::array<int64_t, 3> dims,
                                                               int batch);
}  // namespace cuda

}  // namespace mri
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_MRI_CENTERED_FFT_H_
