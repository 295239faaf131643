// Internal to ESPIRiT (espirit.h, espirit3d.h): the option checks, LAPACK
// Hermitian eigensolvers and the phase reference shared by the 2-D and 3-D
// calibrations.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_MRI_ESPIRIT_CALIBRATION_H_
#define TESSERA_KERNELS_RECONSTRUCTION_MRI_ESPIRIT_CALIBRATION_H_

#include <complex>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/reconstruction/mri/espirit.h"

namespace tessera {
namespace recon {
namespace mri {
namespace espirit_internal {

// INVALID_ARGUMENT naming the option out of range (espirit.h).
absl::Status CheckOptions(const EspiritOptions& o);

// Eigenvalues (ascending) and eigenvectors (columns, in place) of the
// Hermitian n x n column-major matrix `a` (upper triangle read): zheevd.
absl::Status HermitianEigen(int n, std::vector<std::complex<double>>* a, std::vector<double>* values);

// The eigenpairs of `a` (as above, destroyed) with eigenvalue > lower, by
// zheevr (MRRR after one tridiagonalisation; several times faster than
// zheevd when few are wanted): values ascending, vectors the matching n-long
// columns of *vectors.
absl::Status HermitianEigenAbove(int n, std::vector<std::complex<double>>* a, double lower,
                                 std::vector<double>* values, std::vector<std::complex<double>>* vectors);

// The first principal component of the calibration data over coils (the top
// eigenvector of sum_k y(k) y(k)^H): the phase reference of the maps.
// calibration: coils x points.
absl::StatusOr<std::vector<std::complex<double>>> PrincipalCoilVector(const std::vector<std::complex<float>>& calibration,
                                                                     int64_t points, int coils);

}  // namespace espirit_internal
}  // namespace mri
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_MRI_ESPIRIT_CALIBRATION_H_
