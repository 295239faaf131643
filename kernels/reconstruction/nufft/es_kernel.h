// The exponential-of-semicircle (ES) spreading kernel of FINUFFT (Barnett,
// Magland, af Klinteberg, SISC 2019): parameter choice from the tolerance and
// upsampling factor, the fine-grid size, and the kernel's Fourier transform
// used for deconvolution. Plain functions, shared by the CPU and CUDA plans.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_NUFFT_ES_KERNEL_H_
#define TESSERA_KERNELS_RECONSTRUCTION_NUFFT_ES_KERNEL_H_

#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera {
namespace recon {
namespace nufft {

constexpr int kMaxKernelWidth = 16;

struct EsKernelParams {
  int width = 0;    // w: grid cells each point touches per axis
  double beta = 0;  // shape
  double c = 0;     // 4 / w^2, so phi(z) = exp(beta (sqrt(1 - c z^2) - 1)) for |z| < w / 2
};

// FINUFFT's rules: sigma 2: w = ceil(log10(1 / tol)) + 1, beta = 2.30 w (2.20,
// 2.26, 2.38 for w = 2, 3, 4); other sigma: w = ceil(ln(1 / tol) / (pi
// sqrt(1 - 1 / sigma))) + 1 (one cell more than FINUFFT, for the 4 x tol
// contract), beta = 0.97 pi (1 - 1 / (2 sigma)) w. w is clamped
// to [2, kMaxKernelWidth] (tolerances past what w = 16 reaches are still
// accepted; the error then exceeds the request). INVALID_ARGUMENT for tol
// outside [1e-15, 1e-1] or sigma other than 2.0 / 1.25.
absl::StatusOr<EsKernelParams> ChooseEsKernel(double tolerance, double upsampling);

// phi(z) with z in grid cells (0 outside |z| < w / 2).
inline double EsKernelValue(const EsKernelParams& p, double z) {
  const double s = 1.0 - p.c * z * z;
  return s > 0 ? std::exp(p.beta * (std::sqrt(s) - 1.0)) : 0.0;
}

// Smallest n >= max(ceil(sigma * modes), 2 w) that is even and has no prime
// factor above 5 (FFT-friendly), as FINUFFT's next235even.
int64_t FineGridSize(int64_t modes, double upsampling, int width);

// phihat(k) = integral of phi(z) exp(2 pi i k z / n) dz over z in grid cells,
// for k = 0 .. n / 2 (it is even in k), by Gauss-Legendre quadrature on the
// kernel's support, as FINUFFT's onedim_fseries_kernel. Deconvolving a mode k
// divides by phihat(|k|).
std::vector<double> EsKernelFourierSeries(const EsKernelParams& p, int64_t n);

// Gauss-Legendre nodes and weights on [-1, 1] (n nodes), by Newton iteration
// on the Legendre recurrence.
void GaussLegendre(int n, std::vector<double>* nodes, std::vector<double>* weights);

}  // namespace nufft
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_NUFFT_ES_KERNEL_H_
