// Sinograms and reconstructed volumes as NIfTI files (.nii, .nii.gz), checked
// against the geometry they belong to (kernels/reconstruction/geometry.h).
//
// Sinograms: float32, detector column fastest, then detector row, then
// projection in geometry order, i.e. the NIfTI dims are
//   3-D geometry: (cols, rows, projections)
//   2-D geometry: (cols, projections) -- nx = cols, ny = projections -- or (cols, 1, projections)
//   PET with TOF: (cols, rows, tof_bins, projections), a 4-D NIfTI (2-D: (cols, 1, tof_bins, projections))
// Any stored shape is accepted whose dimensions, once axes of length 1 are
// dropped, are those above with length-1 axes dropped (same memory order), so
// both 2-D spellings read the same. Other NIfTI datatypes and scaled data are
// converted to float32 on reading. Sinograms carry no world affine (qform and
// sform codes 0); pixdim holds the detector pixel size of the first view.
//
// Volumes: float32 (nx, ny, nz), x fastest, whose qform and sform map voxel
// (i, j, k) to its centre VolumeGeometry::VoxelCenter(i, j, k) in mm (identity
// direction: index axes along the geometry's x, y, z).
//
// Errors are INVALID_ARGUMENT (NOT_FOUND for a missing file, DATA_LOSS for a
// damaged one), start with the path and say what was expected:
// "s.nii.gz: sinogram is 384x720 but proj_geom has 384 columns x 360 projections",
// "s.nii.gz: sinogram value at (col 3, projection 17) is NaN".
#ifndef TESSERA_SERVICES_RECONSTRUCTION_FORMATS_RECON_NIFTI_H_
#define TESSERA_SERVICES_RECONSTRUCTION_FORMATS_RECON_NIFTI_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/ndarray.h"
#include "common/volume.h"
#include "kernels/reconstruction/geometry.h"

namespace tessera::recon::formats {

struct SinogramOptions {
  int64_t tof_bins = 0;  // 0: no TOF axis; > 0: (cols, rows, tof_bins, projections)
  bool counts = false;   // PET counts: negative values are rejected too
  std::string what = "sinogram";  // names the data in messages ("prompts", "randoms")
};

// (cols, rows, projections) or (cols, rows, tof_bins, projections).
Shape SinogramShape(const ProjectionGeometry& projection, int64_t tof_bins = 0);

// Checks a host array of any dtype against the geometry (shape and values as
// above) and returns it as float32 of SinogramShape(projection, tof_bins).
// For data that arrives by other means than a file (uploads).
absl::StatusOr<NDArray> CheckSinogram(const NDArray& data, const ProjectionGeometry& projection,
                                      const SinogramOptions& options = {});

absl::StatusOr<NDArray> ReadSinogram(const std::string& path, const ProjectionGeometry& projection,
                                     const SinogramOptions& options = {});

// Stacks of 2-D sinograms (issue 40: one plan, many slices): a NIfTI whose
// axes of length > 1 are (cols, projections, slices) for a 2-D geometry.
// StackedSinogramSlices says how many slices header dims hold (1 for a plain
// sinogram; INVALID_ARGUMENT as CheckSinogram's, "... proj_geom has 384
// columns x 360 projections (x slices)", for anything else, and for a stack
// with a 3-D geometry or TOF); ReadSinogramStack returns float32 (cols, 1,
// projections, slices), each slice checked as CheckSinogram checks one.
absl::StatusOr<int64_t> StackedSinogramSlices(const Shape& dims, const ProjectionGeometry& projection,
                                              const SinogramOptions& options = {});
absl::StatusOr<NDArray> ReadSinogramStack(const std::string& path, const ProjectionGeometry& projection,
                                          const SinogramOptions& options = {});

// `sinogram` must be a host float32 array with SinogramShape(projection,
// tof_bins) elements; 2-D sinograms are stored as (cols, projections).
absl::Status WriteSinogram(const NDArray& sinogram, const ProjectionGeometry& projection, const std::string& path,
                           int64_t tof_bins = 0, const std::string& description = "tessera sinogram");

// The NIfTI geometry of a reconstruction grid: voxel (i, j, k) -> VoxelCenter(i, j, k).
Geometry VolumeNiftiGeometry(const VolumeGeometry& volume);

// `volume`: host float32 array of volume.size() elements.
absl::Status WriteVolume(const NDArray& volume, const VolumeGeometry& geometry, const std::string& path,
                         const std::string& description = "tessera reconstruction");

struct VolumeReadOptions {
  bool nonnegative = false;    // e.g. attenuation maps, activity
  bool check_affine = true;    // false: only the grid size must match (e.g. a map saved with an identity affine)
  double tolerance = 1e-3;     // of a voxel size, for voxel size and voxel centres
  std::string what = "volume";  // "attenuation map" in messages
};

// Checks the grid size, the affine (unless disabled) and the values of a
// volume against vol_geom; returns float32 (nx, ny, nz).
absl::StatusOr<NDArray> CheckVolume(const Volume& volume, const VolumeGeometry& geometry,
                                    const VolumeReadOptions& options = {});

absl::StatusOr<NDArray> ReadVolume(const std::string& path, const VolumeGeometry& geometry,
                                   const VolumeReadOptions& options = {});

}  // namespace tessera::recon::formats

#endif  // TESSERA_SERVICES_RECONSTRUCTION_FORMATS_RECON_NIFTI_H_
