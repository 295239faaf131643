// The FBP/FDK ramp filter along detector rows.
//
// The kernel is the spatially discretised ramp of Kak & Slaney (eq. 3.61):
//   h[0] = 1 / (4 tau^2),  h[n odd] = -1 / (n pi tau)^2,  h[n even, != 0] = 0,
// with tau the detector pixel width, applied as the discrete convolution
//   q[k] = tau sum_j h[k - j] p[j].
// Transforming this h by FFT (instead of sampling |nu|) keeps the DC term
// right: a sampled |nu| has no DC and biases every reconstruction by a
// constant. Rows are zero-padded to a power of two >= 2 cols, so the circular
// convolution equals the linear one on the whole row (no wrap-around).
// A window then shapes the spectrum, as in ASTRA and MATLAB's iradon, with
// nu in [0, 1] the fraction of Nyquist and d = cutoff in (0, 1]:
//   ram-lak: 1;  shepp-logan: sin(x)/x, x = pi nu / (2 d);
//   cosine: cos(pi nu / (2 d));  hann: (1 + cos(pi nu / d)) / 2;
// and every window is 0 above nu = d (frequency scaling and cutoff).
#ifndef TESSERA_KERNELS_RECONSTRUCTION_FBP_FILTER_H_
#define TESSERA_KERNELS_RECONSTRUCTION_FBP_FILTER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera {
namespace recon {
namespace fbp {

enum class FilterKind { kRamLak, kSheppLogan, kCosine, kHann };

// "ram-lak", "shepp-logan", "cosine", "hann" (the service's names).
const char* FilterKindName(FilterKind kind);
// The names above (case-insensitive); INVALID_ARGUMENT naming the value otherwise.
absl::StatusOr<FilterKind> ParseFilterKind(absl::string_view name);

// INVALID_ARGUMENT unless cutoff is finite and in (0, 1].
absl::Status ValidateCutoff(double cutoff);

// The FFT length for rows of `cols` samples: the smallest power of two >= 2 cols.
int64_t PaddedLength(int64_t cols);

// h[n] for n = 0 .. cols - 1 (the kernel is even), tau = 1: the spatial
// ramp. For pixel width tau, multiply the filtered row by 1 / tau.
std::vector<double> RampKernel(int64_t cols);

// The real spectrum to multiply the *unnormalised* forward DFT of a
// zero-padded row of length `padded` by (entries k = 0 .. padded / 2), so that
// the unnormalised inverse DFT gives the filtered row for tau = 1: it holds
// DFT(h)[k], the window and the 1 / padded of the inverse transform.
std::vector<float> FilterSpectrum(FilterKind kind, double cutoff, int64_t padded);

// The derivative short-scan filter (short_scan_derivative.h): the discrete
// Hilbert kernel h[n] = (1 - cos(pi n)) / (pi n) (2 / (pi n) for odd n, 0 for
// even n), i.e. (1 / pi) p.v. integral of p(u') / (u - u') du' on the pixel
// grid (dimensionless: the pixel width cancels), windowed as the ramp. Its
// DFT is imaginary, -i S[k]: this returns S[k] x window / padded for
// k = 0 .. padded / 2, so the filtered spectrum is z[k] (-i S[k]).
std::vector<float> HilbertSpectrum(FilterKind kind, double cutoff, int64_t padded);

// The window alone at fraction of Nyquist nu in [0, 1].
double FilterWindow(FilterKind kind, double cutoff, double nu);

}  // namespace fbp
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_FBP_FILTER_H_
