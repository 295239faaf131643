// Toeplitz embedding of the NUFFT normal operator (seed 001 section 2.2):
// for the type-2 NUFFT A (modes N, M points x_j, sign s) and real weights
// w_j (density compensation; all ones when omitted),
//   (A^H W A f)[m] = sum_n f[n] h[m - n],  h[d] = sum_j w_j exp(-i s d.x_j),
// a convolution. h is computed once (a type-1 NUFFT onto 2N modes per axis)
// and its FFT on the 2N grid stored; each Apply is zero-pad, FFT, multiply,
// inverse FFT, crop: no spreading per iteration (CG-SENSE's inner loop).
//
//   ToeplitzOptions options;  options.tolerance = 1e-5;
//   auto op = ToeplitzOperator<float>::Create(stream, {256, 256, 1}, m, kx, ky, nullptr, dcf, options);
//   TESSERA_RETURN_IF_ERROR((*op)->Apply(image, normal_image));
//
// Layout as nufft.h: centred modes, first axis fastest, ntransforms images
// back to back; pointers in the stream's memory (host for CPU streams). The
// kernel's relative error follows the tolerance (Apply vs type1(W type2(f))
// within ~10 x tolerance). Execute-time memory: the 2N grid per transform in
// a batch. Not thread-safe; on CUDA Apply is asynchronous on the stream.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_NUFFT_TOEPLITZ_H_
#define TESSERA_KERNELS_RECONSTRUCTION_NUFFT_TOEPLITZ_H_

#include <array>
#include <complex>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/device.h"
#include "kernels/reconstruction/execution_mode.h"

namespace tessera {
namespace recon {
namespace nufft {

struct ToeplitzOptions {
  double tolerance = 1e-6;  // of the type-1 NUFFT that computes the kernel
  double upsampling = 2.0;  // of that NUFFT
  int sign = -1;            // exponent sign of the forward (type-2) operator A
  int ntransforms = 1;      // images per Apply
  ExecutionMode mode = ExecutionMode::kDefault;  // of the kernel's NUFFT (Apply itself is deterministic)
};

template <typename T>  // float or double
class ToeplitzOperator {
 public:
  // modes as NufftPlan (2-D: N3 == 1); points as NufftPlan::SetPoints;
  // weights: M finite reals or nullptr (W = I). INVALID_ARGUMENT for bad
  // modes/options (named) or a non-finite coordinate or weight.
  static absl::StatusOr<std::unique_ptr<ToeplitzOperator>> Create(const Stream& stream,
                                                                  std::array<int64_t, 3> modes, int64_t m,
                                                                  const T* x, const T* y, const T* z,
                                                                  const T* weights,
                                                                  const ToeplitzOptions& options = {});
  virtual ~ToeplitzOperator() = default;

  // out = A^H W A in, for ntransforms images (out must not alias in).
  virtual absl::Status Apply(const std::complex<T>* in, std::complex<T>* out) = 0;

  virtual std::array<int64_t, 3> modes() const = 0;
  virtual const ToeplitzOptions& options() const = 0;
};

}  // namespace nufft
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_NUFFT_TOEPLITZ_H_
