// The direct non-uniform DFT: the accuracy reference of the NUFFT (and of
// BART comparisons). Same definitions and layouts as nufft.h (centred modes,
// first axis fastest, ntransforms vectors back to back), in double with
// exact exponentials, O(M x modes); threaded with common/parallel.h.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_NUFFT_NUDFT_H_
#define TESSERA_KERNELS_RECONSTRUCTION_NUFFT_NUDFT_H_

#include <array>
#include <complex>
#include <cstdint>

namespace tessera {
namespace recon {
namespace nufft {

// M points (x, y[, z]); z == nullptr means 2-D (modes[2] must then be 1).
struct NudftPoints {
  int64_t m = 0;
  const double* x = nullptr;
  const double* y = nullptr;
  const double* z = nullptr;
};

// f[t][k] = sum_j c[t][j] exp(i sign k.x_j)   (t < ntransforms)
void NudftType1(std::array<int64_t, 3> modes, const NudftPoints& points, int sign, int ntransforms,
                const std::complex<double>* c, std::complex<double>* f);

// c[t][j] = sum_k f[t][k] exp(i sign k.x_j)
void NudftType2(std::array<int64_t, 3> modes, const NudftPoints& points, int sign, int ntransforms,
                const std::complex<double>* f, std::complex<double>* c);

}  // namespace nufft
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_NUFFT_NUDFT_H_
