// Synthetic registration problems made from a real volume: the volume (and
// its labels) warped by a known small affine plus a smooth random
// deformation, with an intensity change. Used by tests, the demo and benches,
// so "register it back" can be scored by label overlap.
#ifndef TESSERA_SERVICES_REGISTRATION_SYNTHETIC_H_
#define TESSERA_SERVICES_REGISTRATION_SYNTHETIC_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "common/volume.h"

namespace tessera::registration {

enum class IntensityChange {
  kGamma,           // monotonic: x -> x^0.8 (same modality, different contrast)
  kNonMonotonic,    // x -> 4x(1 - x) on [0, 1]: grey matter brightest (another "modality")
};

struct SyntheticOptions {
  uint64_t seed = 1;
  double rotation_deg = 4;        // about a random axis
  double translation_mm = 4;      // in a random direction
  double deformation_mm = 4;      // peak amplitude of the smooth random field
  int control_points = 5;         // per axis, of the random field before smoothing upsampling
  IntensityChange intensity = IntensityChange::kGamma;
};

struct SyntheticPair {
  Volume moving;                  // same grid as the input
  std::optional<Volume> moving_labels;
};

// Builds the moving image (float32) and, when labels are given, the moving
// label map (int32), on the input's grid.
absl::StatusOr<SyntheticPair> MakeSyntheticPair(const Volume& image, const Volume* labels,
                                                const SyntheticOptions& options);

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

#endif  // TESSERA_SERVICES_REGISTRATION_SYNTHETIC_H_
