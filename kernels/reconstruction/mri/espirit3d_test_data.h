// Test input for 3-D ESPIRiT (espirit3d_test, espirit3d_cuda_test): an object
// (two nested ellipsoids) seen by `coils` smooth receive coils placed around
// it (|S_c| ~ 1 / distance to the coil, a linear phase each, normalised so
// that sum_c |S_c|^2 = 1), and its exact centred DFT on an n^3 grid (the
// Cartesian k-space of that image x map product; positions and indices as
// espirit3d.h).
#ifndef TESSERA_KERNELS_RECONSTRUCTION_MRI_ESPIRIT3D_TEST_DATA_H_
#define TESSERA_KERNELS_RECONSTRUCTION_MRI_ESPIRIT3D_TEST_DATA_H_

#include <array>
#include <complex>
#include <cstdint>
#include <vector>

namespace tessera {
namespace recon {
namespace mri {

struct Espirit3dProblem {
  std::array<int64_t, 3> dims = {0, 0, 0};
  int coils = 0;
  std::vector<std::complex<float>> maps;    // coils x nz x ny x nx
  std::vector<std::complex<float>> kspace;  // coils x nz x ny x nx
  // Voxel (i, j, k) inside the outer ellipsoid scaled by `scale`.
  bool Inside(int64_t i, int64_t j, int64_t k, double scale) const;
};

// nz = 1 makes a 2-D problem (the z position of every pixel 0).
Espirit3dProblem MakeEspirit3dProblem(std::array<int64_t, 3> dims, int coils);

}  // namespace mri
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_MRI_ESPIRIT3D_TEST_DATA_H_
