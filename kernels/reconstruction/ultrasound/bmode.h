// B-mode display of a beamformed complex image: envelope, normalisation to
// the brightest pixel, log compression and a dB window.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_ULTRASOUND_BMODE_H_
#define TESSERA_KERNELS_RECONSTRUCTION_ULTRASOUND_BMODE_H_

#include <complex>
#include <vector>

namespace tessera {
namespace recon {
namespace ultrasound {

// 20 log10(|y| / max |y|) per pixel, clamped to [-dynamic_range_db, 0]
// (all -dynamic_range_db for an all-zero image). Same layout as the input.
std::vector<float> LogCompress(const std::vector<std::complex<float>>& image, double dynamic_range_db);

}  // namespace ultrasound
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_ULTRASOUND_BMODE_H_
