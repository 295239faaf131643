// 3-D ESPIRiT (Uecker et al., MRM 71:990, 2014), as BART's `ecalib -m 1` on
// 3-D k-space: coil maps on an nx x ny x nz grid from a fully sampled
// calibration box. The steps of espirit.h in three dimensions:
//
//   1. Calibration matrix of every kx x ky x kz patch (all coils) of the
//      cx x cy x cz region; the kernel is k along each axis, 1 along an axis
//      of extent 1 (BART's rule, so nz = 1 is the 2-D calibration). Its Gram
//      matrix M (kx ky kz C square) is formed without the matrix: for each
//      coil pair and patch offset d the products y_c(r) conj(y_c'(r - d))
//      are summed over every patch window by separable sliding sums (a few
//      operations per calibration point instead of one per matrix row), then
//      the eigenvectors above threshold x the top eigenvalue are found by
//      LAPACK zheevr (the top eigenvalue first estimated by power iteration).
//   2. The kernels K_cc'(d) = sum_t sum_{p - p' = d} v_t(p, c) conj(v_t(p', c'))
//      on (2k - 1)^3 offsets, by FFT correlation (FFTW, double).
//   3. Their centred inverse FFTs at the image size (espirit_volume.h: FFTW on
//      the CPU, cuFFT on CUDA), scaled 1 / (kx ky kz): the Gram matrices G(r).
//   4. Per voxel (espirit_pixels.h, the 2-D code on voxels): top eigenvector,
//      crop, phase of the first principal component of the calibration data.
//
// Layouts: calibration, k-space and maps coil-major, x fastest (element
// u + nx (v + ny (w + nz c))); index u is k = u - n/2 and voxel i is at
// r = (i - n/2) / n, as in 2-D. Memory: the Gram volumes are C (C + 1) / 2
// complex floats per voxel (36 at 8 coils: 604 MB at 128^3), on the stream.
// Non-Cartesian data: grid the centre onto a Cartesian box first (as
// espirit_gridding.h does in 2-D) and call Espirit3dFromCalibration.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_MRI_ESPIRIT3D_H_
#define TESSERA_KERNELS_RECONSTRUCTION_MRI_ESPIRIT3D_H_

#include <array>
#include <complex>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "kernels/reconstruction/mri/espirit.h"

namespace tessera {
namespace recon {
namespace mri {

// Maps at image = {nx, ny, nz} (EspiritMaps with nz and calibration_z set)
// from a calibration box region = {cx, cy, cz} given on its own
// (cx x cy x cz x coils, centred). INVALID_ARGUMENT naming the field for a
// region smaller than the kernel along an axis (of extent > 1), an image
// smaller than the region, coils < 1, a calibration array of another size,
// options out of range (espirit.h), or a region without signal. On a CUDA
// stream the Gram volumes and the per-voxel step run on the device (host
// data in and out).
absl::StatusOr<EspiritMaps> Espirit3dFromCalibration(const Stream& stream,
                                                     const std::vector<std::complex<float>>& calibration,
                                                     std::array<int64_t, 3> region, int coils,
                                                     std::array<int64_t, 3> image, const EspiritOptions& options = {});
absl::StatusOr<EspiritMaps> Espirit3dFromCalibration(const std::vector<std::complex<float>>& calibration,
                                                     std::array<int64_t, 3> region, int coils,
                                                     std::array<int64_t, 3> image, const EspiritOptions& options = {});

// Cartesian 3-D k-space (nx x ny x nz x coils): the centre
// min(calibration_size, n) box per axis, shrunk as in 2-D (EspiritCartesian)
// to the largest centred box whose every point is sampled in some coil; then
// Espirit3dFromCalibration at the k-space's size. INVALID_ARGUMENT when that
// box is smaller than the kernel along an axis.
absl::StatusOr<EspiritMaps> Espirit3dCartesian(const Stream& stream, const std::complex<float>* kspace,
                                               std::array<int64_t, 3> dims, int coils,
                                               const EspiritOptions& options = {});
absl::StatusOr<EspiritMaps> Espirit3dCartesian(const std::complex<float>* kspace, std::array<int64_t, 3> dims,
                                               int coils, const EspiritOptions& options = {});

// The centred box `region` of Cartesian 3-D k-space (dims x coils) as its own array.
std::vector<std::complex<float>> ExtractCentre3d(const std::complex<float>* kspace, std::array<int64_t, 3> dims,
                                                 int coils, std::array<int64_t, 3> region);

}  // namespace mri
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_MRI_ESPIRIT3D_H_
