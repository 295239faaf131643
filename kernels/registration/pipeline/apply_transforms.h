// Applying saved transforms (issue 34), as ANTs' antsApplyTransforms: an image
// or label map resampled onto a reference grid, or a point set mapped,
// through a chain of affines and displacement fields.
//
// Chain order (ANTs'): the transforms are listed as on antsApplyTransforms'
// command line, and a reference point goes through the FIRST one first:
//   input_point = Tn(...T2(T1(p)))
// so `-t 0Warp.nii.gz -t 0GenericAffine.mat` is A(p + d(p)): the
// registration's own model (space.h), whose warped image it reproduces. (ANTs
// says "the last transform is applied first" about the image: the input is
// moved by the affine first.) An affine may be inverted ([file,1]); a field
// may not (pass its inverse file, e.g. 0InverseWarp.nii.gz). To map points of
// the moving image into the fixed image, pass the inverse chain, as with
// antsApplyTransformsToPoints: -t [0GenericAffine.mat,1] -t 0InverseWarp.nii.gz.
//
// Resampling: every output voxel's point p (reference RAS mm) goes through
// the chain; the input is sampled there. A displacement field is sampled
// trilinearly in physical space on its own grid (ITK's
// DisplacementFieldTransform: zero displacement outside the field's buffer).
// Three routes, one result:
//   - the registration's form, [field on the reference grid, affines...] or
//     affines alone: the grid sampler kernels with [A | t] from the composed
//     affine and u = L v (MixComponents), exactly as the registration samples
//     warped.nii.gz and warped_labels (bit for bit on the same backend);
//   - any other chain: the mapping composed on the CPU into a dense field on
//     the reference grid (double, stored as float mm relative to p), then the
//     same sampler (linear and nearest on either backend);
//     Bit for bit needs: the same backend; the reference grid as the
//     registration had the fixed image (its file read again); an in-core run
//     (an out-of-core one warps with L (L^-1 u) and exports L^-1 of that,
//     which L v gives back to float rounding only); and the .mat read back
//     (ITK's centre algebra rounds the translation by an ulp or so, far below
//     the float32 [A | t] the sampler takes: itk_affine_text_test).
//   - bspline: positions on the CPU, the B-spline evaluated on the stream's
//     backend (kernels/registration/bspline_interpolation.h); label and
//     generic-label run on the CPU whatever the device (the log says so).
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_APPLY_TRANSFORMS_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_APPLY_TRANSFORMS_H_

#include <array>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/volume.h"
#include "kernels/registration/grid_sampler.h"
#include "kernels/registration/pipeline/space.h"

namespace tessera::registration {

enum class ApplyInterpolation { kLinear, kNearest, kBspline, kLabel, kGenericLabel };

// "" or "linear", "nearest", "bspline", "label", "generic-label" (ANTs'
// Linear, NearestNeighbor, BSpline, MultiLabel, GenericLabel names are
// accepted too, case-insensitive). INVALID_ARGUMENT naming the value.
absl::StatusOr<ApplyInterpolation> ParseApplyInterpolation(absl::string_view name);
const char* ApplyInterpolationName(ApplyInterpolation interpolation);

// One transform of a chain: an affine (RAS, reference side -> input side) or
// a displacement field (RAS mm vectors, planar (nx, ny, nz, 3) float32 on its
// own grid: p -> p + d(p)).
struct ChainTransform {
  std::string name;  // for logs and errors
  Mat4 affine{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
  Volume field;      // empty data for an affine
  bool is_field() const { return !field.data.empty(); }
};
using TransformChain = std::vector<ChainTransform>;

// A transform file: .nii/.nii.gz is a displacement field (ANTs warp; `inverse`
// is INVALID_ARGUMENT), anything else an affine file (ParseItkAffine), inverted
// when asked. NOT_FOUND when it cannot be read.
absl::StatusOr<ChainTransform> LoadTransformFile(const std::string& path, bool inverse);
// An affine file's bytes (.mat or ITK text), inverted when asked.
absl::StatusOr<ChainTransform> AffineTransformFromBytes(absl::string_view bytes, absl::string_view name, bool inverse);
// ANTs' "[file,1]" / "[file,0]" / "file" -> (file, inverse).
absl::StatusOr<std::pair<std::string, bool>> ParseAntsTransformArg(absl::string_view arg);

// RAS point -> RAS point through the chain (reference side -> input side).
std::array<double, 3> MapPoint(const TransformChain& chain, std::array<double, 3> p);

struct ApplyTransformsOptions {
  ApplyInterpolation interpolation = ApplyInterpolation::kLinear;
  double label_sigma_mm = 0;   // label: Gaussian sigma; <= 0: the input's mean spacing
  double default_value = 0;    // outside the input
  std::string device = "auto"; // auto, cpu or cuda
  GridSamplerTuning sampler;
};

struct AppliedVolume {
  // On the reference grid: float32 for linear and bspline (and nearest of a
  // float image); int32 for label, generic-label and nearest of an integer
  // image.
  Volume volume;
  std::string backend;             // "cpu" or "cuda"
  std::vector<std::string> log;    // the route taken
};

// Resamples `input` (3-D, host) onto `reference`'s grid through `chain`.
// INVALID_ARGUMENT for an empty chain, a non-3-D input, a singular affine,
// label interpolations of non-integer values; FAILED_PRECONDITION for cuda
// without a GPU.
absl::StatusOr<AppliedVolume> ApplyTransformsToVolume(const Volume& input, const GridSpace& reference,
                                                      const TransformChain& chain,
                                                      const ApplyTransformsOptions& options);

struct AppliedPoints {
  std::string csv;
  int64_t points = 0;
};
// Maps a point-set CSV (point_set_csv.h) through the chain.
absl::StatusOr<AppliedPoints> ApplyTransformsToPoints(absl::string_view csv, absl::string_view name,
                                                      const TransformChain& chain);

}  // namespace tessera::registration

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_APPLY_TRANSFORMS_H_
