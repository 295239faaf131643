// ESPIRiT coil calibration (Uecker et al., MRM 71:990, 2014), as BART's
// `ecalib -m 1`: coil sensitivity maps from a fully sampled k-space centre.
//
//   1. Calibration matrix: every k x k patch (all coils) of the cx x cy
//      calibration region is a row; its Gram matrix M (k^2 C square) is
//      eigendecomposed (LAPACK zheevd) and the eigenvectors with
//      lambda_i / lambda_0 > threshold span the signal subspace (BART -t:
//      singular values sigma_i / sigma_0 > sqrt(threshold)).
//   2. The subspace projector P = V V^H, applied to every patch and averaged,
//      is in image space a C x C matrix per pixel,
//        G(r) = 1/k^2 sum_d K(d) exp(2 pi i d . r),  K_cc'(d) = sum_{p - p' = d} P[(p,c),(p',c')],
//      computed from the (2k - 1)^2 k-space kernels K by centred FFTs at the
//      image size (exact: BART's Gram at 2k x 2k, sinc-interpolated).
//   3. Per pixel (espirit_pixels.h; CPU or CUDA): the top eigenvector of G
//      (power iteration on G^8) with its
//      eigenvalue (~1 inside the object). Maps are 0 where the eigenvalue
//      <= crop (BART -c, hard crop), unit-norm over coils elsewhere, and
//      phased so that their projection on the first principal component of
//      the calibration data (the coil covariance's top eigenvector) is real
//      and positive (BART's default phase rotation).
//
// Layouts: k-space and maps coil-major, x fastest (element u + nx (v + ny c));
// k-space index u is k = u - nx/2 and pixel i is r = (i - nx/2)/nx (the
// centred convention of cartesian_sense.h, coil_maps.h).
#ifndef TESSERA_KERNELS_RECONSTRUCTION_MRI_ESPIRIT_H_
#define TESSERA_KERNELS_RECONSTRUCTION_MRI_ESPIRIT_H_

#include <complex>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/device.h"

namespace tessera {
namespace recon {
namespace mri {

struct EspiritOptions {
  int calibration_size = 24;  // BART -r: the centre region used (at most), per axis
  int kernel_size = 6;        // BART -k
  double threshold = 0.001;   // BART -t (relative eigenvalue of the calibration Gram)
  double crop = 0.8;          // BART -c, in [0, 1)
  int power_iterations = 8;   // on G^8 (= 64 plain iterations)
};

struct EspiritMaps {
  int64_t nx = 0, ny = 0;
  int64_t nz = 1;  // > 1: 3-D maps (espirit3d.h)
  int coils = 0;
  std::vector<std::complex<float>> maps;  // coils x (nz x) ny x nx
  std::vector<float> eigenvalues;         // (nz x) ny x nx, the top eigenvalue of G
  int kernels = 0;                        // signal-subspace dimension kept
  int64_t calibration_x = 0, calibration_y = 0;  // region used
  int64_t calibration_z = 1;
};

// Maps at nx x ny from a calibration region given on its own (cx x cy x
// coils, centred: index u is k = u - cx/2). INVALID_ARGUMENT for sizes below
// the kernel, nx < cx or ny < cy, coils < 1, options out of range
// (kernel_size < 1, threshold outside (0, 1), crop outside [0, 1),
// power_iterations < 1), or a region without signal.
absl::StatusOr<EspiritMaps> EspiritFromCalibration(const std::vector<std::complex<float>>& calibration, int64_t cx,
                                                   int64_t cy, int coils, int64_t nx, int64_t ny,
                                                   const EspiritOptions& options = {});

// The same with the per-pixel step (espirit_pixels.h) on `stream` (CUDA:
// the Gram images are copied there, the maps back; host data in and out).
absl::StatusOr<EspiritMaps> EspiritFromCalibration(const Stream& stream,
                                                   const std::vector<std::complex<float>>& calibration, int64_t cx,
                                                   int64_t cy, int coils, int64_t nx, int64_t ny,
                                                   const EspiritOptions& options = {});

// The centre min(calibration_size, n) region of Cartesian k-space (nx x ny x
// coils), shrunk (as BART's ecalib does) to the largest centred box whose
// every point is sampled (non-zero in some coil); then EspiritFromCalibration.
// INVALID_ARGUMENT when that box is smaller than the kernel along an axis.
absl::StatusOr<EspiritMaps> EspiritCartesian(const std::complex<float>* kspace, int64_t nx, int64_t ny, int coils,
                                             const EspiritOptions& options = {});
absl::StatusOr<EspiritMaps> EspiritCartesian(const Stream& stream, const std::complex<float>* kspace, int64_t nx,
                                             int64_t ny, int coils, const EspiritOptions& options = {});

// The cx x cy centre of Cartesian k-space (nx x ny x coils) as its own array.
std::vector<std::complex<float>> ExtractCentre(const std::complex<float>* kspace, int64_t nx, int64_t ny, int coils,
                                               int64_t cx, int64_t cy);

}  // namespace mri
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_MRI_ESPIRIT_H_
