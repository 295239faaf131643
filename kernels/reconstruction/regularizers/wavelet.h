// Orthogonal Daubechies wavelet transform of complex 2-D / 3-D images and the
// L1-wavelet proximal map BART's `pics -R W:7:0:lambda` uses: soft-threshold
// the detail coefficients of a randomly (circularly) shifted image.
//
// Transform: separable, multi-level (Mallat layout, in place): at each level
// every axis still being split is filtered along its current low band, the
// low half (approximation) first, the high half (detail) after. Boundaries
// are periodic, so the transform is exactly orthogonal for any even band
// length. Levels per axis (BART's rule: split while the coarse band stays
// >= min_size, 16 as pics uses): an axis of length n is split L_a times,
// the largest L_a with n / 2^L_a >= min_size and n divisible by 2^L_a; an
// axis of odd length (nz = 1 in 2-D) is not transformed. Instead of BART's
// extended (non-periodic) boundary bands this keeps the transform orthogonal
// at any size without padding: sizes that are not multiples of 2^L simply get
// fewer levels.
//
// Filters: db2 (4 taps, BART's "Daubechies 2") and db4 (8 taps).
//
// Random shifts (BART's randshift, on by default in pics): the prox draws a
// per-axis shift s_a in [0, 2^L_a) from a seeded generator at each call
// (deterministic: the same seed gives the same sequence on CPU and CUDA) and
// returns S^-1 W^T soft(W S x) with S the circular shift: the exact prox of
// lambda ||W S x||_1 for that call's S (translation invariance on average).
//
// Pointers are in the stream's memory (host for CPU streams, device for CUDA
// streams); images are x-fastest, nx x ny x nz complex values.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_REGULARIZERS_WAVELET_H_
#define TESSERA_KERNELS_RECONSTRUCTION_REGULARIZERS_WAVELET_H_

#include <array>
#include <complex>
#include <cstdint>
#include <memory>
#include <random>

#include "absl/status/statusor.h"
#include "common/buffer.h"
#include "common/device.h"

namespace tessera {
namespace recon {
namespace regularizers {

enum class WaveletFilter { kDb2, kDb4 };

struct WaveletShape {
  int64_t nx = 0, ny = 0, nz = 1;
  WaveletFilter filter = WaveletFilter::kDb2;
  int64_t min_size = 16;  // coarsest band per split axis (BART pics: 16)
};

// Levels per axis (x, y, z) under the rule above. INVALID_ARGUMENT naming the
// field for sizes < 1 or min_size < 1.
absl::StatusOr<std::array<int, 3>> WaveletLevels(const WaveletShape& shape);

// coeffs = W S x, with S the circular shift y[i] = x[(i + shift) mod n] per
// axis (shift {0, 0, 0}: plain W). coeffs may not alias x.
absl::Status WaveletForward(const Stream& stream, const WaveletShape& shape, const std::array<int64_t, 3>& shift,
                            const std::complex<float>* x, std::complex<float>* coeffs);
// x = S^-1 W^T coeffs; coeffs is overwritten (the inverse runs in place).
absl::Status WaveletInverse(const Stream& stream, const WaveletShape& shape, const std::array<int64_t, 3>& shift,
                            std::complex<float>* coeffs, std::complex<float>* x);

// c <- c max(0, 1 - threshold / |c|) for every coefficient outside the
// coarse approximation band (which BART leaves unthresholded too).
absl::Status SoftThresholdDetails(const Stream& stream, const WaveletShape& shape, float threshold,
                                  std::complex<float>* coeffs);

// The L1-wavelet prox with random shifts; owns one image of scratch.
class WaveletProx {
 public:
  // shifts_per_call K >= 1: Apply averages K independently shifted proxes
  // (K = 1 is BART's; see Apply).
  static absl::StatusOr<std::unique_ptr<WaveletProx>> Create(const Stream& stream, const WaveletShape& shape,
                                                             uint64_t seed = 1, bool random_shift = true,
                                                             int shifts_per_call = 1);
  // x <- S^-1 W^T soft(W S x, threshold), S drawn anew (threshold >= 0).
  // With K shifts per call, x <- (1/K) sum_k S_k^-1 W^T soft(W S_k x): the
  // same expected map as BART's single random shift with 1/K its variance
  // (an average of proxes is itself the prox of a convex function).
  absl::Status Apply(float threshold, std::complex<float>* x);
  // The shift the next Apply uses is drawn there; this is the last one used.
  const std::array<int64_t, 3>& last_shift() const { return shift_; }

 private:
  WaveletProx(const Stream& stream, const WaveletShape& shape) : stream_(stream), shape_(shape) {}

  const Stream& stream_;
  WaveletShape shape_;
  std::array<int, 3> levels_{};
  bool random_shift_ = true;
  int shifts_per_call_ = 1;
  std::mt19937_64 rng_;
  std::array<int64_t, 3> shift_{};
  std::shared_ptr<Buffer> scratch_;  // coefficients (+ input and sum with K > 1)
};

}  // namespace regularizers
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_REGULARIZERS_WAVELET_H_
