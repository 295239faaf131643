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
#include "absl/strings/string_view.h"
#include "common/volume.h"

namespace tessera::registration {

// Writes the RAS affine `physical_ras` (fixed RAS -> moving RAS) as an ITK
// MATLAB transform with centre `center_ras` (any point; ITK folds it into the
// offset, so it only affects how the parameters read). A path ending in .txt
// or .tfm gets the ITK text format instead (ItkAffineText).
absl::Status WriteItkAffine(const std::string& path, const Mat4& physical_ras,
                            const std::array<double, 3>& center_ras = {0, 0, 0});

// The bytes WriteItkAffine writes (for sending the file over an API).
std::string ItkAffineBytes(const Mat4& physical_ras, const std::array<double, 3>& center_ras = {0, 0, 0});

// The same transform as an ITK text file ("#Insight Transform File V1.0",
// AffineTransform_double_3_3, parameters with 17 significant digits).
std::string ItkAffineText(const Mat4& physical_ras, const std::array<double, 3>& center_ras = {0, 0, 0});

// Parses an affine file's bytes into a RAS affine (fixed RAS -> moving RAS),
// detecting the format: ITK's MATLAB v4 (.mat: double or float, little or big
// endian) or ITK's text format (.txt/.tfm, "#Insight Transform File V1.0").
// 3-D transforms: AffineTransform_*, MatrixOffsetTransformBase_*,
// Rigid3DTransform_* (12 parameters: matrix, translation), Euler3DTransform_*
// (angles x, y, z in radians, translation; ZXY order unless FixedParameters'
// 4th value is 1: ZYX), VersorRigid3DTransform_* (versor, translation),
// Similarity3DTransform_* (versor, translation, scale), TranslationTransform_*;
// FixedParameters (MATLAB: "fixed") are the centre. A text file with several
// transforms (a CompositeTransform of linear ones) is their composition,
// ITK's order (the last listed is applied first). Errors: INVALID_ARGUMENT
// naming `name_for_errors` and the line or field at fault, DATA_LOSS for a
// truncated MATLAB file.
absl::StatusOr<Mat4> ParseItkAffine(absl::string_view bytes, absl::string_view name_for_errors);

// Reads an affine file (ParseItkAffine) into a RAS affine. NOT_FOUND when it
// cannot be opened.
absl::StatusOr<Mat4> ReadItkAffine(const std::string& path);

// Writes a displacement field given as RAS mm vectors, shape (nx, ny, nz, 3)
// planar float32 on `fixed_geometry`, as an ANTs warp (LPS vectors).
absl::Status WriteAntsWarp(const std::string& path, const NDArray& displacement_ras, const Geometry& fixed_geometry);

// Reads an ANTs/ITK warp into RAS mm vectors, planar (nx, ny, nz, 3) float32.
absl::StatusOr<Volume> ReadAntsWarp(const std::string& path);

}  // namespace tessera::registration

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_ANTS_TRANSFORM_IO_H_
