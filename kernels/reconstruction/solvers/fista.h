// FISTA (Beck & Teboulle 2009): minimises f(x) + R(x) for a smooth f with an
// L-Lipschitz gradient and an R whose proximal map is cheap, by
//   x_k     = prox_{s R}(y_k - s grad f(y_k))          (s = step <= 1/L)
//   t_{k+1} = (1 + sqrt(1 + 4 t_k^2)) / 2
//   y_{k+1} = x_k + ((t_k - 1) / t_{k+1}) (x_k - x_{k-1})
// The problem supplies the gradient and the prox as callbacks, so one loop
// serves CT (real volumes, f = 0.5 ||A x - y||^2, R = TV) and MRI (complex
// images as interleaved float pairs, f = 0.5 ||E x - y||^2 through the SENSE
// normal operator, R = L1-wavelet or TV). Everything runs on the stream's
// backend through recon's vector ops.
//
//   FistaProblem p;
//   p.size = 2 * pixels;                      // complex image
//   p.step = 1.0 / lipschitz;                 // EstimateLipschitz below
//   p.gradient = [&](const float* x, float* g) { ... g = E^H E x - E^H y ... };
//   p.prox = [&](double step, float* x) { ... soft-threshold at step*lambda ... };
//   auto report = Fista(stream, p, options, x);   // x: start in, result out
//
// The report's residual_norms hold, per iteration, the relative update
// ||x_k - x_{k-1}|| / ||x_k|| (FISTA needs no forward projection of its own,
// so the data residual is not measured). Errors: INVALID_ARGUMENT for a
// non-positive or non-finite size/step, missing callbacks or negative
// iterations; whatever a callback or progress returns (x then holds the last
// completed iterate).
#ifndef TESSERA_KERNELS_RECONSTRUCTION_SOLVERS_FISTA_H_
#define TESSERA_KERNELS_RECONSTRUCTION_SOLVERS_FISTA_H_

#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "kernels/reconstruction/solvers/solver_options.h"

namespace tessera {
namespace recon {
namespace solvers {

struct FistaProblem {
  int64_t size = 0;   // floats in x (complex images: 2 x pixels, interleaved)
  double step = 0;    // s, at most 1 / L for L the Lipschitz constant of grad f
  // g = grad f(x); x and g hold `size` floats in the stream's memory.
  std::function<absl::Status(const float* x, float* g)> gradient;
  // x = prox_{step R}(x), in place.
  std::function<absl::Status(double step, float* x)> prox;
};

struct FistaOptions {
  int iterations = 50;
  // O'Donoghue & Candes' gradient restart: momentum reset to 0 whenever the
  // step goes against the last update ((y_k - x_k) . (x_k - x_{k-1}) > 0).
  // Off by default: plain FISTA, as BART and TIGRE run it.
  bool adaptive_restart = false;
  SolverProgress progress;  // (iteration, total, relative update)
};

absl::StatusOr<SolverReport> Fista(const Stream& stream, const FistaProblem& problem, const FistaOptions& options,
                                   float* x);

// The largest eigenvalue of a symmetric positive semi-definite operator
// (A^T A, or E^H E seen as a real operator on interleaved pairs) by
// `iterations` power-iteration steps from a fixed pseudo-random start: the
// Lipschitz constant FISTA's step needs. Multiply by a small margin (1.05,
// say): the estimate approaches the eigenvalue from below.
absl::StatusOr<double> EstimateLipschitz(const Stream& stream, int64_t size,
                                         const std::function<absl::Status(const float* x, float* out)>& normal,
                                         int iterations = 20);

// The same power iteration with its last residual: rayleigh = v.Nv / v.v
// (what EstimateLipschitz returns, <= the largest eigenvalue) and residual =
// ||N v - rayleigh v|| / ||v||. Some eigenvalue lies within `residual` of
// `rayleigh` (Krylov-Bogoliubov), and once v is near the top eigenvector
// the gap to it is only ~residual^2 / (its distance to the next eigenvalue)
// (Kato-Temple), so bound() = rayleigh + residual is a step bound that is
// tight when the iteration has converged and wide when it has not, instead
// of a fixed margin.
struct LipschitzEstimate {
  double rayleigh = 0;
  double residual = 0;
  double bound() const { return rayleigh + residual; }
};
absl::StatusOr<LipschitzEstimate> EstimateLipschitzWithResidual(
    const Stream& stream, int64_t size, const std::function<absl::Status(const float* x, float* out)>& normal,
    int iterations = 20);

}  // namespace solvers
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_SOLVERS_FISTA_H_
