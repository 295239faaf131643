// How a displacement field's vectors are measured. Decides how they scale
// when the field is resampled (gaussian_smooth.h) and how they enter the
// Jacobian (jacobian.h).
#ifndef TESSERA_KERNELS_REGISTRATION_DISPLACEMENT_UNITS_H_
#define TESSERA_KERNELS_REGISTRATION_DISPLACEMENT_UNITS_H_

namespace tessera {
namespace registration {

enum class DisplacementUnits {
  kVoxels,      // component c in voxels of axis c (one voxel = one grid step)
  kNormalized,  // component c in [-1, 1] coordinates of axis c with aligned corners
                // (grid_sampler.h): one voxel = 2 / (n_c - 1)
};

}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_DISPLACEMENT_UNITS_H_
