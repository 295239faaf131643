// SENSE unfolding (Pruessmann et al. 1999; seed 001 section 2.2) for
// Cartesian undersampling by an integer factor R along one image axis:
// every pixel of the reduced-FOV coil images is a sum of R pixels of the full
// image, weighted by each coil's sensitivity there, and is unfolded by the
// regularised least-squares solve
//   (S^H S + lambda I) rho = S^H a,   S in C^{coils x R},
// one R x R Hermitian system per aliased pixel, through the batched Cholesky
// solve (linalg/batched_cholesky.h, n = R, nrhs = 1).
//
// Layouts (x fastest): maps and image are nx x ny (maps coil-major:
// i + nx (j + ny c)); aliased coil images are nx x ny/R (axis 1) or
// nx/R x ny (axis 0), coil-major. Folding convention: with L = n_axis / R,
// aliased pixel (i, j') of coil c is
//   a_c(i, j') = sum_{r < R} S_c(i, j' + r L) rho(i, j' + r L)      (axis 1)
// (axis 0 likewise in i). Zero-filled k-space with every R-th line kept,
// line k = 0 among them, gives exactly this (times 1/R) in its first L rows
// after the inverse FFT: cartesian_sense.h does that step.
//
// Pointers are in the stream's memory. Scratch (R^2 + R + 1 values per
// aliased pixel) is allocated per call. CPU: the reference, sums in double;
// CUDA: one thread per aliased pixel forms S^H S and S^H a in registers.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_MRI_SENSE_UNFOLD_H_
#define TESSERA_KERNELS_RECONSTRUCTION_MRI_SENSE_UNFOLD_H_

#include <complex>
#include <cstdint>

#include "absl/status/statusor.h"
#include "common/device.h"

namespace tessera {
namespace recon {
namespace mri {

constexpr int kMaxSenseReduction = 8;

struct SenseShape {
  int64_t nx = 0, ny = 0;  // full image
  int coils = 0;
  int reduction = 1;  // R in [1, kMaxSenseReduction], divides the axis size
  int axis = 1;       // 0 (x) or 1 (y): the undersampled (phase-encoding) axis
  int64_t aliased_pixels() const { return nx * ny / reduction; }
};

// Checks a shape: INVALID_ARGUMENT naming the field for sizes < 1, R outside
// [1, 8], an axis other than 0 / 1, or an axis size not divisible by R.
absl::Status CheckSenseShape(const SenseShape& shape);

// Unfolds `aliased` (coils x aliased_pixels) into `image` (nx x ny) with
// Tikhonov weight `lambda` >= 0. Returns the number of aliased pixels whose
// system was not positive definite (all coils zero there and lambda = 0):
// their R image pixels are set to 0. INVALID_ARGUMENT for a bad shape, a
// negative or non-finite lambda or a null pointer; FAILED_PRECONDITION for a
// CUDA stream without CUDA.
absl::StatusOr<int64_t> SenseUnfold(const Stream& stream, const SenseShape& shape, float lambda,
                                    const std::complex<float>* maps, const std::complex<float>* aliased,
                                    std::complex<float>* image);

// The steps, per backend. The normal equations are the batched solver's
// layout: normal[p R R + r + s R] = sum_c conj(S_c(r)) S_c(s) for r >= s
// (lower triangle; the upper one is left unwritten), rhs[p R + r] =
// sum_c conj(S_c(r)) a_c(p); Scatter writes image(position r of p) =
// solution[p R + r].
namespace cpu {
void FormSenseNormalEquations(const SenseShape& shape, const std::complex<float>* maps,
                              const std::complex<float>* aliased, std::complex<float>* normal,
                              std::complex<float>* rhs);
void ScatterSenseSolution(const SenseShape& shape, const std::complex<float>* solution, std::complex<float>* image);
// The forward model the unfolding inverts (tests, simulations):
// aliased = fold(maps . image), the convention above.
void SenseFold(const SenseShape& shape, const std::complex<float>* maps, const std::complex<float>* image,
               std::complex<float>* aliased);
}  // namespace cpu

namespace cuda {
absl::Status FormSenseNormalEquations(const Stream& stream, const SenseShape& shape, const std::complex<float>* maps,
                                      const std::complex<float>* aliased, std::complex<float>* normal,
                                      std::complex<float>* rhs);
absl::Status ScatterSenseSolution(const Stream& stream, const SenseShape& shape, const std::complex<float>* solution,
                                  std::complex<float>* image);
}  // namespace cuda

}  // namespace mri
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_MRI_SENSE_UNFOLD_H_
