// Internal: what both NUFFT backends derive from (type, modes, options): the
// checked options, kernel, fine grid, deconvolution factors, and the folding
// of a coordinate onto the fine grid.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_NUFFT_NUFFT_SETUP_H_
#define TESSERA_KERNELS_RECONSTRUCTION_NUFFT_NUFFT_SETUP_H_

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/reconstruction/nufft/es_kernel.h"
#include "kernels/reconstruction/nufft/nufft.h"

namespace tessera {
namespace recon {
namespace nufft {

struct NufftSetup {
  NufftType type = NufftType::kType1;
  int dim = 2;
  std::array<int64_t, 3> modes = {1, 1, 1};
  NufftOptions options;  // sign resolved to +1 / -1
  EsKernelParams kernel;
  std::array<int64_t, 3> fine = {1, 1, 1};  // fine[2] == 1 in 2-D
  // Per axis and mode index i (k = i - N/2): 1 / phihat(|k|), and the fine-grid
  // index of k (k mod n).
  std::array<std::vector<double>, 3> deconv;
  std::array<std::vector<int64_t>, 3> fine_index;

  int64_t num_modes() const { return modes[0] * modes[1] * modes[2]; }
  int64_t fine_size() const { return fine[0] * fine[1] * fine[2]; }
  NufftKernelInfo info() const;
};

// Checks everything NufftPlan::Create documents (INVALID_ARGUMENT naming the
// field) and derives the rest. `element_bytes` is sizeof(std::complex<T>):
// RESOURCE_EXHAUSTED when one fine grid would exceed `max_grid_bytes`.
absl::StatusOr<NufftSetup> MakeNufftSetup(NufftType type, std::array<int64_t, 3> modes, const NufftOptions& options,
                                          size_t element_bytes, size_t max_grid_bytes);

// A coordinate x (any finite value; period 2 pi) on a fine axis of n cells:
// t = x n / (2 pi) folded into [0, n), split into cell = floor(t) and
// frac = t - cell in [0, 1). Computed in double so single-precision plans
// keep sub-cell accuracy (frac has 24 bits of its own).
inline void FoldToGrid(double x, int64_t n, int32_t* cell, double* frac) {
  double t = x * (static_cast<double>(n) / (2.0 * M_PI));
  t -= std::floor(t / static_cast<double>(n)) * static_cast<double>(n);
  double c = std::floor(t);
  double f = t - c;
  if (c >= static_cast<double>(n)) c -= static_cast<double>(n);  // rounding at the top edge
  if (c < 0) c = 0, f = 0;
  *cell = static_cast<int32_t>(c);
  *frac = f;
}

// The fraction in T, kept below 1 (a double just under 1 may round up to
// 1.0f), so a point never leaves its cell; the CUDA backend does the same.
template <typename T>
inline T FracAsT(double frac) {
  const T r = static_cast<T>(frac);
  return r < T(1) ? r : T(1) - std::numeric_limits<T>::epsilon() / 2;
}

// The first grid offset (relative to the point's cell) of the w cells a point
// at fraction f touches: ceil(f - w / 2); cell offsets o .. o + w - 1 have
// kernel arguments z = o + k - f inside (-w/2, w/2].
template <typename T>
inline int FirstOffset(T frac, int width) {
  return static_cast<int>(std::ceil(frac - static_cast<T>(width) * T(0.5)));
}

}  // namespace nufft
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_NUFFT_NUFFT_SETUP_H_
