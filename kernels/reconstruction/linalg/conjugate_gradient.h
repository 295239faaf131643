// Conjugate gradient (seed code 2) for A x = b with A symmetric positive
// definite, on any matvec: an SpmvPlan, a Toeplitz/FFT operator, a normal-
// equations operator A^T W A built from a LinearOperator. The matvec is the
// only large operator; everything else is recon::vector_ops on the same
// stream, and every dot product is recon::Dot (deterministic, double), so a
// deterministic matvec gives bit-identical iterates run to run.
//
// Complex Hermitian positive-definite systems (CG-SENSE): for such A every CG
// scalar (rho = r^H r, p^H A p, alpha, beta) is real, so the complex
// recurrence is exactly the real one on interleaved (re, im) floats with the
// real dot Re(u^H v) = sum of the interleaved products. ConjugateGradient-
// Complex says so in its signature.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_LINALG_CONJUGATE_GRADIENT_H_
#define TESSERA_KERNELS_RECONSTRUCTION_LINALG_CONJUGATE_GRADIENT_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "common/device.h"

namespace tessera {
namespace recon {
namespace linalg {

// ax = A x, both n floats in the stream's memory; ax is overwritten.
using Matvec = std::function<absl::Status(const float* x, float* ax)>;

struct CgOptions {
  int max_iterations = 100;
  // Stops once ||r_k|| <= tolerance ||b|| (the recurrence residual).
  double tolerance = 1e-6;
  // Start from x = 0 (x is overwritten; saves the first matvec) instead of
  // the initial guess that x holds.
  bool zero_initial_guess = false;
  // After each iteration k (1-based) of at most `total`; a non-OK return stops
  // the solve and is returned (CANCELLED for a cancel, DEADLINE_EXCEEDED ...),
  // with x holding iterate k.
  std::function<absl::Status(int iteration, int total, double relative_residual)> progress;
};

struct CgResult {
  int iterations = 0;
  bool converged = false;
  double relative_residual = 0;  // ||r|| / ||b|| at the end
  // ||r_k|| / ||b|| for k = 0 (the start), 1, ..., iterations.
  std::vector<double> residual_history;
};

// Solves A x = b (n floats each, stream memory); x holds the initial guess
// unless options.zero_initial_guess. Scratch: 3 n floats on the stream's
// device. b == 0 gives x = 0 at once. Errors: INVALID_ARGUMENT for bad sizes
// or options, FAILED_PRECONDITION when p^T A p <= 0 (A is not positive
// definite) or the iteration turns non-finite, and whatever the matvec or
// the progress callback returns.
absl::StatusOr<CgResult> ConjugateGradient(const Stream& stream, const Matvec& matvec, const float* b, float* x,
                                           int64_t n, const CgOptions& options = {});

// Hermitian positive-definite A on n complex unknowns stored as interleaved
// (re, im) floats (std::complex<float> / float2 / cuComplex layout): the
// matvec gets and returns 2 n floats.
absl::StatusOr<CgResult> ConjugateGradientComplex(const Stream& stream, const Matvec& matvec, const float* b, float* x,
                                                  int64_t n_complex, const CgOptions& options = {});

}  // namespace linalg
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_LINALG_CONJUGATE_GRADIENT_H_
