// Non-uniform FFT (seed 001 section 2.2, code 2): type 1 (non-uniform points
// -> uniform modes, the adjoint of gridding) and type 2 (uniform modes ->
// non-uniform points, the MRI forward model), in 2-D and 3-D, single and
// double precision, on the CPU (FFTW) and CUDA (cuFFT).
//
//   NufftOptions options;  options.tolerance = 1e-5;
//   auto plan = NufftPlan<float>::Create(stream, NufftType::kType2, {256, 256, 1}, options);
//   TESSERA_RETURN_IF_ERROR((*plan)->SetPoints(m, kx, ky, nullptr));
//   TESSERA_RETURN_IF_ERROR((*plan)->Execute(samples, image));
//
// Definitions (FINUFFT's, with modes centred on zero). For N1 x N2 (x N3)
// modes k in [-N/2, (N-1)/2] per axis and M points x_j in [-pi, pi)^d:
//   type 1:  f[k] = sum_j c[j] exp(i * sign * k.x_j)         (sign = +1 default)
//   type 2:  c[j] = sum_k f[k] exp(i * sign * k.x_j)         (sign = -1 default)
// so type 1 with +1 is the adjoint of type 2 with -1. Coordinates outside
// [-pi, pi) are folded periodically; non-finite coordinates are
// INVALID_ARGUMENT at SetPoints. MRI trajectories "in units of 1/FOV" (BART)
// map to x = 2 pi k / N.
//
// Layouts: modes f are N1 x N2 x N3 with the first axis fastest, index 0 of
// each axis holding k = -N/2 (centred, like BART and fftshift'ed images);
// points c are M contiguous values; `ntransforms` vectors are stored back to
// back (f: ntransforms x modes, c: ntransforms x M) and share one point set
// (coils in MRI).
//
// Method: exponential-of-semicircle kernel exp(beta (sqrt(1 - (2x/w)^2) - 1))
// of width w chosen from the tolerance and upsampling factor sigma (2.0 or
// 1.25), points sorted into bins for spreading/interpolation, an FFT on the
// sigma-upsampled grid, and deconvolution by the kernel's Fourier transform.
// Contract: relative l2 error against the direct sum (nudft.h) is at most
// 4 x tolerance for tolerances 1e-2 .. 1e-6 (1e-2 .. 1e-12 in double).
// Limits with upsampling 1.25: single precision holds the contract down to
// 1e-5 (at 1e-6 fine-grid rounding amplified by the deconvolution near the
// band edge gives ~1.5e-5), double down to 1e-9 (the width caps at 16).
//
// Pointers live in the stream's backend memory (host for CPU streams, device
// for CUDA streams); the stream must outlive the plan. A plan owns its FFT
// plan, sorted points and scratch; Execute allocates nothing. Not
// thread-safe (one Execute at a time).
#ifndef TESSERA_KERNELS_RECONSTRUCTION_NUFFT_NUFFT_H_
#define TESSERA_KERNELS_RECONSTRUCTION_NUFFT_NUFFT_H_

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

enum class NufftType { kType1 = 1, kType2 = 2 };

struct NufftOptions {
  double tolerance = 1e-6;   // requested relative l2 accuracy, [1e-15, 1e-1]
  double upsampling = 2.0;   // sigma: 2.0 or 1.25 (smaller FFT, wider kernel)
  int sign = 0;              // +1 or -1; 0 picks +1 for type 1, -1 for type 2
  int ntransforms = 1;       // vectors per Execute sharing the points
  // kDeterministic: type 1 spreads by a gather (each grid cell sums its
  // points in sorted order) instead of atomics, bit-identical run to run.
  ExecutionMode mode = ExecutionMode::kDefault;
};

// What a plan picked, for logs and benches.
struct NufftKernelInfo {
  int width = 0;        // kernel width w in grid cells
  double beta = 0;      // ES kernel shape parameter
  std::array<int64_t, 3> fine_grid = {1, 1, 1};  // upsampled FFT grid
};

template <typename T>  // float or double
class NufftPlan {
 public:
  // modes = {N1, N2, N3}; dim 2 takes N3 == 1. INVALID_ARGUMENT for a mode
  // count < 2 (or N3 != 1 in 2-D), tolerance out of range, upsampling other
  // than 2.0 / 1.25, sign other than 0 / +-1 or ntransforms < 1;
  // FAILED_PRECONDITION for a CUDA stream without CUDA; RESOURCE_EXHAUSTED
  // when the fine grid does not fit.
  static absl::StatusOr<std::unique_ptr<NufftPlan>> Create(const Stream& stream, NufftType type,
                                                           std::array<int64_t, 3> modes, const NufftOptions& options = {});
  virtual ~NufftPlan() = default;

  // M points (x, y[, z]) in the stream's memory, copied and sorted into bins
  // by the plan (the caller may free them afterwards). z is nullptr in 2-D.
  virtual absl::Status SetPoints(int64_t m, const T* x, const T* y, const T* z) = 0;

  // type 1: reads c (ntransforms x M), writes f (ntransforms x modes);
  // type 2: reads f, writes c.
  virtual absl::Status Execute(std::complex<T>* c, std::complex<T>* f) = 0;

  virtual NufftType type() const = 0;
  virtual int dim() const = 0;
  virtual std::array<int64_t, 3> modes() const = 0;
  virtual int64_t num_points() const = 0;
  virtual const NufftOptions& options() const = 0;
  virtual NufftKernelInfo kernel_info() const = 0;
};

}  // namespace nufft
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_NUFFT_NUFFT_H_
