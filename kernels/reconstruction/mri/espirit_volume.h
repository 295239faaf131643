// ESPIRiT's image-space Gram volumes (espirit3d.h, step 3) on a stream: for
// each of `pairs` k-space kernels K_l, given on the offsets d in [-h, h] per
// axis (h = half, span 2h + 1; values already scaled), the centred inverse
// DFT at the image size
//   G_l(i) = sum_d K_l(d) exp(2 pi i d . (i - n/2) / n)    (n/2 rounded down),
// written to gram[l * voxels + i] (x fastest). The centring is a phase on
// the kernel values (exp(-2 pi i d floor(n/2) / n) per axis, in double on the
// host), which are then scattered to d mod n (summed where the span exceeds
// the image) and transformed by one unnormalised in-place 3-D FFT per pair:
// FFTW (FftwPlan, one pair per worker) on the CPU, one batched cuFFT plan on
// CUDA. `gram` is in the stream's memory, `kernels` on the host.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_MRI_ESPIRIT_VOLUME_H_
#define TESSERA_KERNELS_RECONSTRUCTION_MRI_ESPIRIT_VOLUME_H_

#include <array>
#include <complex>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/device.h"

namespace tessera {
namespace recon {
namespace mri {

// kernels: pairs x span_z x span_y x span_x (x fastest). INVALID_ARGUMENT for
// a dimension < 1, half < 0, pairs < 1 or a kernel array of another size.
absl::Status EspiritGramVolumes(const Stream& stream, std::array<int64_t, 3> dims, std::array<int, 3> half, int pairs,
                                const std::vector<std::complex<double>>& kernels, std::complex<float>* gram);

namespace cpu {
// phased: the kernels times the centring phase (float), as the dispatcher makes them.
absl::Status EspiritGramVolumes(std::array<int64_t, 3> dims, std::array<int, 3> half, int pairs,
                                const std::vector<std::complex<float>>& phased, std::complex<float>* gram);
}  // namespace cpu

namespace cuda {
absl::Status EspiritGramVolumes(const Stream& stream, std::array<int64_t, 3> dims, std::array<int, 3> half, int pairs,
                                const std::vector<std::complex<float>>& phased, std::complex<float>* gram);
}  // namespace cuda

}  // namespace mri
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_MRI_ESPIRIT_VOLUME_H_
