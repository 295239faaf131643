// A phantom sampled onto a reconstruction grid: the ground truth that
// reconstructions of analytic sinograms are compared with.
#ifndef TESSERA_SERVICES_RECONSTRUCTION_PHANTOMS_RASTERIZE_H_
#define TESSERA_SERVICES_RECONSTRUCTION_PHANTOMS_RASTERIZE_H_

#include "absl/status/statusor.h"
#include "common/ndarray.h"
#include "kernels/reconstruction/geometry.h"
#include "services/reconstruction/phantoms/phantom.h"

namespace tessera::recon::phantoms {

// Host float32 (nx, ny, nz): each voxel is the mean of the phantom over
// supersample^d points on a regular grid inside it (d = 2 for a 2-D phantom,
// sampled in the z = 0 plane, else 3), so voxels cut by an edge hold the
// fraction covered: a fair ground truth. Values within 1e-6 of 0 are 0 (float
// rounding of cancelling ellipses). A 2-D phantom needs nz == 1.
// supersample in [1, 16]; INVALID_ARGUMENT otherwise or for an invalid grid.
absl::StatusOr<NDArray> Rasterize(const Phantom& phantom, const VolumeGeometry& volume, int supersample = 4);

}  // namespace tessera::recon::phantoms

#endif  // TESSERA_SERVICES_RECONSTRUCTION_PHANTOMS_RASTERIZE_H_
