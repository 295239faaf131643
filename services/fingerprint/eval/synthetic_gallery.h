// Synthetic fingerprint galleries of any size (10^6 templates and more) made
// from real minutiae templates, deterministic from a seed, with ground-truth
// identities so searches can be scored.
//
// Template i (0 <= i < size) is generated on its own from (seed, i), so any
// range can be produced on the fly, in parallel, in any order:
//   * i < mated_templates: an impression of real base b = i % bases (its
//     identity is the base's): the base moved by a rigid motion (rotation up
//     to max_rotation about its centroid, shift up to max_shift), a smooth
//     non-linear distortion (a sum of Gaussian radial-basis displacement
//     bumps, minutia directions turned with the local Jacobian), position and
//     angle jitter, dropped minutiae and spurious ones;
//   * otherwise an impression (same perturbation) of synthetic identity
//     s = (i - mated_templates) / impressions_per_identity, a new finger made
//     from two real bases: a chimera (one base's minutiae on one side of a
//     random line through its centroid, the other's, rotated onto it, on the
//     other side), mirrored (a mirror image is not a rigid motion, so its
//     local structures do not match the originals'), warped by strong
//     displacement bumps and angle noise. Its identity is
//     kSyntheticIdentityBase + s: a non-mate of every real finger.
// Coordinates are rounded to whole pixels (as in ISO records), clamped to be
// non-negative, and at most kMccMaxMinutiae minutiae are kept.
#ifndef TESSERA_SERVICES_FINGERPRINT_EVAL_SYNTHETIC_GALLERY_H_
#define TESSERA_SERVICES_FINGERPRINT_EVAL_SYNTHETIC_GALLERY_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "kernels/fingerprint/mcc.h"

namespace tessera {
namespace fingerprint {

inline constexpr int64_t kSyntheticIdentityBase = int64_t{1} << 40;

struct BaseTemplate {
  std::vector<MinutiaPoint> points;
  int64_t identity = 0;  // e.g. db * 1000 + finger
};

// A small deterministic generator (SplitMix64): the same numbers on every
// platform and standard library.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  double Uniform();                        // [0, 1)
  double Uniform(double lo, double hi);    // [lo, hi)
  int UniformInt(int lo, int hi);          // [lo, hi]
 private:
  uint64_t state_;
};

struct ImpressionParams {
  double max_rotation = 0.349066;  // radians (20 degrees)
  double max_shift = 30;           // pixels
  int bumps = 3;                   // Gaussian displacement bumps
  double bump_amplitude = 8;       // pixels, largest displacement of one bump
  double bump_sigma = 60;          // pixels
  double jitter = 3;               // pixels (uniform in +-jitter per axis)
  double angle_jitter = 0.0872665;  // radians (5 degrees)
  double drop_probability = 0.1;
  int max_spurious = 3;            // 0..max_spurious added uniformly in the bounding box
};

struct SyntheticGalleryOptions {
  uint64_t seed = 1;
  int64_t size = 0;                 // templates
  int64_t mated_templates = -1;     // impressions of the real bases; -1: one per base (min(size, bases))
  int impressions_per_identity = 1;  // of each synthetic identity
  ImpressionParams impression;
  // Synthetic identities: warp and angle noise applied once to the chimera.
  int identity_bumps = 6;
  double identity_bump_amplitude = 20;
  double identity_angle_noise = 0.2618;  // radians (15 degrees)
};

class SyntheticGallery {
 public:
  // INVALID_ARGUMENT without bases, with a base of no minutiae, non-finite
  // values or negative sizes / probabilities outside [0, 1].
  static absl::StatusOr<SyntheticGallery> Create(std::vector<BaseTemplate> bases,
                                                 const SyntheticGalleryOptions& options);

  int64_t size() const { return options_.size; }
  int64_t mated_templates() const { return mated_; }
  const std::vector<BaseTemplate>& bases() const { return bases_; }
  const SyntheticGalleryOptions& options() const { return options_; }

  // Template i's ground-truth identity (cheap: nothing is generated).
  int64_t Identity(int64_t i) const;
  // Template i's minutiae (deterministic).
  std::vector<MinutiaPoint> Minutiae(int64_t i) const;
  // The master minutiae of synthetic identity s (before the impression).
  std::vector<MinutiaPoint> SyntheticIdentity(int64_t s) const;

  // Appends templates [begin, end) to `gallery` (descriptors on `stream`'s
  // backend; CPU: all cores) and their identities to `identities` (may be
  // null). Generation runs in chunks, so memory beyond the gallery stays small.
  absl::Status AppendTo(const Stream& stream, int64_t begin, int64_t end, MccGallery* gallery,
                        std::vector<int64_t>* identities, const MccParams& mcc = {}) const;

 private:
  SyntheticGallery() = default;
  std::vector<BaseTemplate> bases_;
  SyntheticGalleryOptions options_;
  int64_t mated_ = 0;
};

// An impression of `points` under `params` drawn from `rng` (exposed for
// tests and the latent evaluation).
std::vector<MinutiaPoint> PerturbImpression(const std::vector<MinutiaPoint>& points, const ImpressionParams& params,
                                            SplitMix64& rng);

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_EVAL_SYNTHETIC_GALLERY_H_
