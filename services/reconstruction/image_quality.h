// Image-quality figures for reconstructions against a ground truth: RMSE and
// SSIM (Wang, Bovik, Sheikh & Simoncelli 2004: Gaussian window sigma 1.5,
// truncated at 11 pixels, K1 = 0.01, K2 = 0.03), as the accuracy tests and
// benches report them.
#ifndef TESSERA_SERVICES_RECONSTRUCTION_IMAGE_QUALITY_H_
#define TESSERA_SERVICES_RECONSTRUCTION_IMAGE_QUALITY_H_

#include <cstdint>

namespace tessera::reconstruction {

// Root mean squared difference over the n values.
double Rmse(const float* image, const float* truth, int64_t n);

// Mean SSIM of the slices of (nx, ny, nz) volumes (x fastest), each slice
// scored in 2-D over the window positions that fit inside it (valid
// filtering, as scikit-image with gaussian_weights and no padding).
// `data_range`: the truth's max - min (L in the constants).
double Ssim(const float* image, const float* truth, int64_t nx, int64_t ny, int64_t nz, double data_range);

}  // namespace tessera::reconstruction

#endif  // TESSERA_SERVICES_RECONSTRUCTION_IMAGE_QUALITY_H_
