// ESPIRiT's per-pixel step (espirit.h, step 3) on a stream: for each pixel i
// the C x C Hermitian matrix G(i), given packed as its upper triangle
// (gram[l * pixels + i], l running over c1 <= c2 row by row), its top
// eigenpair by power iteration on G^8 (three renormalised squarings, then
// `iterations` steps from G^8's largest-diagonal column; the eigenvalue is
// the Rayleigh quotient with G), in double precision on both backends:
//   eigenvalues[i] = lambda,
//   maps[c * pixels + i] = v_c conj(z) / |z|,  z = sum_c conj(reference_c) v_c
// (phase of the first principal component), or 0 for every coil where
// lambda <= crop (BART's hard crop). Pointers in the stream's memory.
// INVALID_ARGUMENT for coils outside [1, kMaxEspiritCudaCoils] on CUDA
// (per-thread matrices), coils < 1 or iterations < 1.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_MRI_ESPIRIT_PIXELS_H_
#define TESSERA_KERNELS_RECONSTRUCTION_MRI_ESPIRIT_PIXELS_H_

#include <complex>
#include <cstdint>

#include "absl/status/status.h"
#include "common/device.h"

namespace tessera {
namespace recon {
namespace mri {

constexpr int kMaxEspiritCudaCoils = 32;

absl::Status EspiritPixelMaps(const Stream& stream, int coils, int64_t pixels, const std::complex<float>* gram,
                              const std::complex<double>* reference, int iterations, double crop,
                              std::complex<float>* maps, float* eigenvalues);

namespace cpu {
void EspiritPixelMaps(int coils, int64_t pixels, const std::complex<float>* gram, const std::complex<double>* reference,
                      int iterations, double crop, std::complex<float>* maps, float* eigenvalues);
}  // namespace cpu

namespace cuda {
absl::Status EspiritPixelMaps(const Stream& stream, int coils, int64_t pixels, const std::complex<float>* gram,
                              const std::complex<double>* reference, int iterations, double crop,
                              std::complex<float>* maps, float* eigenvalues);
}  // namespace cuda

}  // namespace mri
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_MRI_ESPIRIT_PIXELS_H_
