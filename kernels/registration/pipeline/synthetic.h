// Synthetic registration problems made from a real volume: the volume (and
// its labels) warped by a known small affine plus a smooth random
// deformation, with an intensity change. Used by tests, the demo and benches,
// so "register it back" can be scored by label overlap.
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_SYNTHETIC_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_SYNTHETIC_H_

#include <cstdint>
#include <array>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/volume.h"

namespace tessera::registration {

// Intensity maps of x = v / max(v) in [0, 1] (the result is scaled back by max).
enum class IntensityChange {
  kGamma,           // monotonic: x -> x^0.8 (same modality, different contrast)
  kNonMonotonic,    // x -> 4x(1 - x): grey matter brightest, white matter as dark as air
  kInverted,        // x -> 1 - x: anti-correlated, the background turns bright
  kT2Like,          // x -> (1 - x) min(1, x / 0.1): air dark, fluid bright, white matter dark
};

// Parses "gamma", "nonmonotonic", "inverted" or "t2like"; INVALID_ARGUMENT
// naming the accepted values otherwise.
absl::StatusOr<IntensityChange> ParseIntensityChange(absl::string_view name);

struct SyntheticOptions {
  uint64_t seed = 1;
  double rotation_deg = 4;        // about a random axis
  double translation_mm = 4;      // in a random direction
  double deformation_mm = 4;      // peak amplitude of the smooth random field
  int control_points = 5;         // per axis, of the random field before smoothing upsampling
  IntensityChange intensity = IntensityChange::kGamma;
  // Acquisition effects, applied after the intensity map (0 = none). The
  // noise and bias draws come from their own generator, so turning them on
  // leaves the motion and deformation of a seed unchanged.
  double bias_fraction = 0;       // multiplicative smooth field exp(b), max |b| over the grid
  double noise_fraction = 0;      // Gaussian noise, sigma as a fraction of the image maximum
  // Partial field of view: the fraction of each input axis cut away from its
  // low and high ends (the moving grid shrinks; the header keeps the anatomy in place).
  std::array<double, 3> crop_low = {0, 0, 0};
  std::array<double, 3> crop_high = {0, 0, 0};
  // Stored orientation of the moving voxels: stored axis d is input axis
  // axis_order[d], reversed where flip[d]. The header's direction and origin
  // follow, so the anatomy stays where it was in world space: only the voxel
  // layout (and what a header-blind tool would see) changes.
  std::array<int, 3> axis_order = {0, 1, 2};
  std::array<bool, 3> flip = {false, false, false};
};

struct SyntheticPair {
  Volume moving;                  // the input's grid, cropped and reoriented as asked
  std::optional<Volume> moving_labels;  // on the moving image's grid
};

// Builds the moving image (float32) and, when labels are given, the moving
// label map (int32). INVALID_ARGUMENT for a crop that leaves nothing, an
// axis_order that is not a permutation, or negative noise/bias.
absl::StatusOr<SyntheticPair> MakeSyntheticPair(const Volume& image, const Volume* labels,
                                                const SyntheticOptions& options);

// The same anatomy with its voxels stored in another order (see
// SyntheticOptions::axis_order / flip): any dtype, 3-D.
absl::StatusOr<Volume> Reorient(const Volume& volume, const std::array<int, 3>& axis_order,
                                const std::array<bool, 3>& flip);

// The sub-box [lo, hi) of index ranges per axis, with its origin moved so the
// voxels stay where they were in world space. Any dtype, 3-D.
absl::StatusOr<Volume> Crop(const Volume& volume, const std::array<int64_t, 3>& lo, const std::array<int64_t, 3>& hi);

// A small labelled phantom for tests that must not depend on installed data:
// a bright ellipsoidal "head" holding a few ellipsoids of other intensities,
// smoothly edged (labels 1..4: head, then the inner ellipsoids), on an
// (n, n, n) grid of `spacing_mm` voxels centred on the origin. Deterministic.
struct Phantom {
  Volume image;   // float32 in [0, 1]
  Volume labels;  // int32
};
absl::StatusOr<Phantom> MakePhantom(int64_t n, double spacing_mm = 2.0);

// 2x downsampled copies for quick tests: image by blur + trilinear, labels by
// taking every other voxel. Geometry follows (aligned corners).
absl::StatusOr<Volume> DownsampleImage(const Volume& image, int factor);
absl::StatusOr<Volume> DownsampleLabels(const Volume& labels, int factor);

}  // namespace tessera::registration

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_SYNTHETIC_H_
