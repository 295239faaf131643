// Transforms in the files ANTs and ITK users already use.
//
// - `0GenericAffine.mat`: ITK's MATLAB v4 transform file holding
//   "AffineTransform_double_3_3" (9 matrix entries row-major, then 3
//   translation entries) and "fixed" (the centre). ITK's affine maps a point
//   of the fixed image to the moving image in LPS mm:
//     T(p) = M (p - c) + c + t.
// - `0Warp.nii.gz`: a displacement field on the fixed grid, a 5-D NIfTI
//   (nx, ny, nz, 1, 3) float32 with intent NIFTI_INTENT_VECTOR whose vectors
//   are LPS millimetres, as ITK writes them.
// ANTs composes `-t 0Warp.nii.gz -t 0GenericAffine.mat` as
//   moving_point = T_affine(p + d(p)),
// which is the model in space.h. Our API takes and returns RAS transforms
// and fields; the LPS conversion happens here.
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_ANTS_TRANSFORM_IO_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_ANTS_TRANSFORM_IO_H_

#include <array>
#include <string>

#include "absl/status/statusor.h"
#include "common/volume.h"

namespace tessera::registration {

// Writes the RAS affine `physical_ras` (fixed RAS -> moving RAS) as an ITK
// MATLAB transform with centre `center_ras` (any point; ITK folds it into the
// offset, so it only affects how the parameters read).
absl::Status WriteItkAffine(const std::string& path, const Mat4& physical_ras,
                            const std::array<double, 3>& center_ras = {0, 0, 0});

// The bytes WriteItkAffine writes (for sending the file over an API).
std::string ItkAffineBytes(const Mat4& physical_ras, const std::array<double, 3>& center_ras = {0, 0, 0});

// Reads an ITK MATLAB affine (double or float, little or big endian,
// AffineTransform_* or MatrixOffsetTransformBase_* 3-D) into a RAS affine.
absl::StatusOr<Mat4> ReadItkAffine(const std::string& path);

// Writes a displacement field given as RAS mm vectors, shape (nx, ny, nz, 3)
// planar float32 on `fixed_geometry`, as an ANTs warp (LPS vectors).
absl::Status WriteAntsWarp(const std::string& path, const NDArray& displacement_ras, const Geometry& fixed_geometry);

// Reads an ANTs/ITK warp into RAS mm vectors, planar (nx, ny, nz, 3) float32.
absl::StatusOr<Volume> ReadAntsWarp(const std::string& path);

}  // namespace tessera::registration

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_ANTS_TRANSFORM_IO_H_
