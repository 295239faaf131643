// ANTs' label-map interpolations (antsApplyTransforms -n MultiLabel and
// -n GenericLabel), CPU: each label's indicator is interpolated and the label
// with the largest weight wins (ties to the smallest label, as ITK iterates
// its sorted label set with a strict comparison), so the output keeps the
// input's integer labels.
//   - MultiLabel: ITK's LabelImageGaussianInterpolateImageFunction: Gaussian
//     weights integrated over each voxel (erf differences), sigma in mm per
//     axis, support cut at alpha = 4 sigmas.
//   - GenericLabel: ITK's LabelImageGenericInterpolateImageFunction with its
//     linear interpolator: the 8 neighbours' trilinear weights (indices
//     clamped to the image, as ITK's LinearInterpolateImageFunction).
// Positions are continuous voxel indices of the label image; outside
// [-0.5, n - 0.5) on an axis gives `default_label` (the resampler's
// IsInsideBuffer).
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_LABEL_INTERPOLATION_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_LABEL_INTERPOLATION_H_

#include <array>
#include <cstdint>

#include "kernels/registration/types.h"

namespace tessera::registration {

// Gaussian (MultiLabel) vote at continuous index p; sigma_voxels per axis
// (sigma_mm / spacing), > 0.
int32_t GaussianLabelAt(const int32_t* labels, Dims3 dims, const std::array<double, 3>& p,
                        const std::array<double, 3>& sigma_voxels, int32_t default_label);

// Trilinear (GenericLabel) vote at continuous index p.
int32_t LinearLabelAt(const int32_t* labels, Dims3 dims, const std::array<double, 3>& p, int32_t default_label);

}  // namespace tessera::registration

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_LABEL_INTERPOLATION_H_
