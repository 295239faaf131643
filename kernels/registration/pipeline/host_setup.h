// The registrar's O(N) host passes over whole volumes, parallel (issue 13:
// at 1024^3 the single-threaded versions cost ~20-30 s of set-up and output):
// intensity normalisation and the intensity centre of mass. (The conversion of
// the normalised displacement to RAS mm runs in place on the stream's device:
// field_ops.h MixComponents.) Each result equals the sequential definition's
// (normalisation bit for bit; the centre of mass up to the order of its
// double sums).
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_HOST_SETUP_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_HOST_SETUP_H_

#include <array>

#include "absl/status/statusor.h"
#include "common/ndarray.h"
#include "common/volume.h"
#include "kernels/registration/pipeline/space.h"

namespace tessera::registration {

// Host float32 copy of v's intensities mapped to [0, 1] by its 0.5th and
// 99.5th percentiles (ComputeWindow's sampled percentiles; min..max when they
// coincide), clamped. INVALID_ARGUMENT for NaN/Inf voxels or a constant image,
// naming `which`. `kind`: kHost, or kPinned (a bounded run's images, uploaded
// slab by slab; CUDA builds only).
// `map` (optional) receives the map applied before the clamp, so that a
// bounded run can normalise slab by slab from v itself (out_of_core_stage.h
// SlabImage): clamp((float(x) - low) * scale, 0, 1), the same bits.
struct IntensityMap {
  float low = 0, scale = 1;
};
absl::StatusOr<NDArray> NormalizedIntensitiesParallel(const Volume& v, const char* which,
                                                      MemoryKind kind = MemoryKind::kHost,
                                                      IntensityMap* map = nullptr);

// Intensity-weighted centre of mass of a host float32 (nx, ny, nz) array, RAS mm.
std::array<double, 3> CentreOfMassParallel(const NDArray& intensities, const Geometry& geometry);

}  // namespace tessera::registration

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_HOST_SETUP_H_
