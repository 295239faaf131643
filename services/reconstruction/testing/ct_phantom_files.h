// Tests' parallel-beam Shepp-Logan CT case as job inputs: geometry.json (size^2
// voxels of 1 mm), sinogram.nii.gz (exact line integrals averaged over each
// detector cell, 4 rays), stack.nii.gz (a two-slice stack, slice 1 = 2 x
// slice 0) and the truth (the phantom averaged over each pixel), plus a
// request builder and a reader of what a job wrote. Used by the
// ct.voxel_subdivision tests on both backends.
#ifndef TESSERA_SERVICES_RECONSTRUCTION_TESTING_CT_PHANTOM_FILES_H_
#define TESSERA_SERVICES_RECONSTRUCTION_TESTING_CT_PHANTOM_FILES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/reconstruction/geometry.h"
#include "tessera/v1/reconstruction.pb.h"

namespace tessera::reconstruction::testing {

struct CtPhantomFiles {
  std::string dir;
  recon::CtGeometry geometry;
  std::vector<float> truth;
};

// Writes the case into a fresh test directory named `name`; gtest failures on error.
CtPhantomFiles WriteCtPhantomFiles(const std::string& name, int64_t size, int64_t views);

// A CT request on files in dir (geometry and sinogram are file names there).
v1::ReconstructRequest CtRequest(const std::string& dir, const std::string& geometry, const std::string& sinogram,
                                 const std::string& method, int iterations, const std::string& device);

// Runs the request in process and returns reconstruction.nii.gz's voxels
// (empty, with a gtest failure, when it fails); `geometry_text`: the
// result's geometry line.
std::vector<float> ReconstructToVector(const v1::ReconstructRequest& request, std::string* geometry_text = nullptr);

double Nrmse(const std::vector<float>& x, const std::vector<float>& truth);

}  // namespace tessera::reconstruction::testing

#endif  // TESSERA_SERVICES_RECONSTRUCTION_TESTING_CT_PHANTOM_FILES_H_
