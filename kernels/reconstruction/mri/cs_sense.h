// Compressed-sensing SENSE (issue 36): the image x minimising
//   0.5 ||E x - y||^2 + lambda' R(x),   R = ||W S x||_1 (L1-wavelet) or TV(x)
// by FISTA (solvers/fista.h) on any encoding operator (encoding_operator.h:
// the non-Cartesian SenseOperator, 2-D or 3-D, or a Cartesian one), with the
// gradient E^H E x - E^H y through op.Normal (the Toeplitz embedding when the
// operator was made with it) and the prox of
//   l1-wavelet: regularizers/wavelet.h (db2 by default, levels down to 16,
//               random circular shifts per iteration, seeded), the coarse
//               band unthresholded, as BART's `pics -R W:7:0:lambda`, but
//               averaging shifts_per_iteration shifted proxes (BART: one);
//   tv:         regularizers/tv.h (isotropic, complex as 2 channels, FGP
//               inner iterations), as `pics -R T:7:0:lambda`.
// No density weights in the data term (BART's pics has none either).
//
// lambda is on BART's scale. pics divides y by s_b = the statistic of
// |E_b^H y| below (E_b: BART's operator, c E for some constant c: its
// unitary FFT scaling), solves 0.5 ||E_b u - y / s_b||^2 + lambda ||Psi u||_1
// and (by default) returns u unscaled. With u = z / (c s_b) that problem is,
// times s_b^2, 0.5 ||E z - y||^2 + lambda (s_b / c) ||Psi z||_1, and s_b / c
// is the same statistic of |E^H y| for our E: c cancels. So
//   lambda' = lambda * scale(|E^H y|),
//   scale(a) = p90 if max - p90 < 2 (p90 - median) else max   (BART's rule)
// and our image z stays in the data's units (the phantom's, for E without
// 1/sqrt(N)), i.e. BART's output times its printed scaling over c.
// Step: 1 / L with L = rho + r from the power iteration on E^H E (rho its
// Rayleigh quotient, r its last residual norm; solvers/fista.h
// LipschitzEstimate): tight once the iteration has converged (12 steps on
// the radial phantoms: L within 1e-3 of rho), where the former fixed margin
// L = 1.05 rho cost 5 % of every step (BART's -e: 0.95 / its estimate). At
// 100 iterations, far from convergence at small lambda, the longer step is
// worth 1.5 % NRMSE at 8x, lambda 0.001 (bench/results/2026-12-07-cs-vs-
// bart.md). options.lipschitz when the caller knows it (e.g. a stack sharing
// one operator). The image starts at 0, as pics does.
//
// Pointers are in the stream's memory. Errors: INVALID_ARGUMENT naming the
// field (iterations < 1, lambda not finite and >= 0, shape not matching
// op.pixels(), null pointers, tv_iterations < 1), those of the operator,
// the prox and FISTA; whatever progress returns (CANCELLED for example),
// with `image` holding the last completed iterate.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_MRI_CS_SENSE_H_
#define TESSERA_KERNELS_RECONSTRUCTION_MRI_CS_SENSE_H_

#include <complex>
#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "kernels/reconstruction/mri/encoding_operator.h"
#include "kernels/reconstruction/mri/sense_operator.h"
#include "kernels/reconstruction/regularizers/wavelet.h"
#include "kernels/reconstruction/solvers/solver_options.h"

namespace tessera {
namespace recon {
namespace mri {

enum class CsRegularizer { kL1Wavelet, kTv };

struct CsSenseOptions {
  CsRegularizer regularizer = CsRegularizer::kL1Wavelet;
  int iterations = 50;
  double lambda = 0.005;     // on BART's scale (see above), >= 0
  regularizers::WaveletFilter wavelet = regularizers::WaveletFilter::kDb2;
  int64_t wavelet_min_size = 16;
  bool random_shift = true;  // wavelet: BART's randshift
  // wavelet: K shifted proxes averaged per iteration (wavelet.h); 1 is BART's
  // single random shift. 4 gave 2-5 % lower NRMSE than 1 on the radial
  // phantom at 4x and 8x for three more proxes per iteration (~1.3 ms each
  // at 128^2 on the CPU; bench/results/2026-12-07-cs-vs-bart.md).
  int shifts_per_iteration = 4;
  uint64_t seed = 1;         // of the shifts: the same seed, the same image
  int tv_iterations = 10;    // FGP iterations per TV prox
  double lipschitz = 0;      // ||E^H E||; 0: estimated (power_iterations steps)
  int power_iterations = 12;
  // false: L = 1.05 rho, the fixed margin used before the residual bound
  // (kept for the comparison in bench/cs_bench --fixed_margin).
  bool residual_step_bound = true;
  bool adaptive_restart = false;  // FISTA's gradient restart (fista.h)
  // After each iteration (iteration, total, relative update); a non-OK status
  // stops the solve and is returned.
  std::function<absl::Status(int iteration, int total, double relative_update)> progress;
};

struct CsSenseResult {
  solvers::SolverReport fista;
  double data_scale = 0;       // BART's scale statistic of |E^H y|
  double lambda_absolute = 0;  // lambda' = lambda x data_scale
  double lipschitz = 0;        // L used (step 1 / L)
};

// Image shape the regulariser sees (nx ny nz = op.pixels()).
struct CsImageShape {
  int64_t nx = 0, ny = 0, nz = 1;
};

absl::StatusOr<CsSenseResult> CsSense(const Stream& stream, EncodingOperator& op, const CsImageShape& shape,
                                      const std::complex<float>* kspace, const CsSenseOptions& options,
                                      std::complex<float>* image);

// The same on a SenseOperator made here from `geometry` (Toeplitz normal
// operator by default: FFTs only per iteration).
absl::StatusOr<CsSenseResult> CsSense(const Stream& stream, const SenseGeometry& geometry,
                                      const std::complex<float>* kspace, const CsSenseOptions& options,
                                      std::complex<float>* image, SenseOperatorOptions operator_options = {
                                          1e-5, 2.0, ExecutionMode::kDefault, /*use_toeplitz=*/true});

// BART's data scale of an image's magnitudes (host values): p90 when
// max - p90 < 2 (p90 - median), else max; 1 for an all-zero image.
double BartScale(const std::complex<float>* image, int64_t n);

}  // namespace mri
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_MRI_CS_SENSE_H_
