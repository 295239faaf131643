// The 3-D MRI jobs' test problem as BART files (issue 36): exact k-space of
// the 3-D Shepp-Logan phantom (kernels/reconstruction/mri/ellipsoid_phantom.h)
// seen by kMri3dCoils smooth coils on a kMri3dSize^3 grid, and the rasterised
// phantom to score against. Shared by mri3d_run_test and
// mri3d_espirit_run_test.
#ifndef TESSERA_SERVICES_RECONSTRUCTION_TESTING_MRI3D_PROBLEM_H_
#define TESSERA_SERVICES_RECONSTRUCTION_TESTING_MRI3D_PROBLEM_H_

#include <complex>
#include <cstdint>
#include <string>
#include <vector>

#include "common/ndarray.h"
#include "kernels/reconstruction/mri/trajectory.h"

namespace tessera::reconstruction::testing {

constexpr int64_t kMri3dSize = 16;
constexpr int kMri3dCoils = 4;

struct Mri3dFiles {
  std::string dir;            // holds coils, kspace (and traj) .cfl/.hdr
  std::vector<float> truth;   // the phantom, kMri3dSize^3
};

// In a fresh test directory `name`: the true maps ("coils") and k-space.
// traj null: Cartesian k-space with every other ky line zeroed outside a fully
// sampled centre of |ky - n/2| <= centre_half_width lines; otherwise the
// trajectory ("traj", 3 x samples x spokes*partitions) and its k-space.
// Failures are reported through GoogleTest (ADD_FAILURE).
Mri3dFiles WriteMri3dProblem(const std::string& name, const recon::mri::Trajectory3D* traj, int centre_half_width);

// A complex .cfl/.hdr pair (BART dims); failures through ADD_FAILURE.
void WriteComplexCfl(const std::string& path, const std::vector<int64_t>& dims,
                     const std::vector<std::complex<float>>& data);

// ||image - truth|| / ||truth|| over a float volume.
double VolumeNrmse(const NDArray& image, const std::vector<float>& truth);

}  // namespace tessera::reconstruction::testing

#endif  // TESSERA_SERVICES_RECONSTRUCTION_TESTING_MRI3D_PROBLEM_H_
