// Random sub-voxel jitter of the greedy deformable stage's sampling grid with
// MI (issue 17; elastix's remedy for the interpolation artefact, which it gets
// by sampling random coordinates). Every iteration samples the fixed image
// and the warped moving image at x + d instead of at the voxels x, with one
// random d in [-1/2, 1/2) voxel per axis for the whole grid, drawn anew each
// iteration; u keeps its value of voxel x (u is smooth: sigma 6 voxels), and
// dL/du is the sampler's gradient at the shifted points. Both images are then
// interpolated at a different offset every iteration, so no map is rewarded
// for landing samples on moving voxel centres.
//
// Measured (bench/registration_cases + truth, 7 cases, mi, CPU): Dice up on
// all 7, map rms down on 6 (macaque 0.238 -> 0.210 mm, ch2bet 0.311 ->
// 0.120), with the noise-tolerant rules below
// (bench/results/2026-12-02-cpu-registration-vs-elastix-v5.md).
//
// Each iteration's loss is measured on another grid, so it is noisy: a lucky
// grid sets a best that the next iterations need not beat. The plateau and
// step-halving rules therefore wait longer in a jittered stage
// (kJitteredPatience, kJitteredHalveAfter; with the default 15 / 3 the stage
// stopped early and lost on 4 of 7 cases).
//
// The shifts come from a SplitMix64 sequence of (seed, level) on the host, so
// the CPU and CUDA backends sample the same grids. Host-only, header-only.
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_GRID_JITTER_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_GRID_JITTER_H_

#include <algorithm>
#include <cstdint>

#include "kernels/registration/grid_sampler.h"

namespace tessera::registration {

inline constexpr int kJitteredPatience = 40;
inline constexpr int kJitteredHalveAfter = 8;

class GridJitter {
 public:
  // dims: the level's output grid (voxels per axis); level: its index (coarse = 0).
  GridJitter(uint64_t seed, int level, int64_t nx, int64_t ny, int64_t nz)
      : state_(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(level) + 1) {
    const int64_t n[3] = {nx, ny, nz};
    for (int d = 0; d < 3; ++d) spacing_[d] = n[d] > 1 ? 2.0 / static_cast<double>(n[d] - 1) : 0.0;
  }

  // The next iteration's grid: normalized coordinates of the first and last
  // output voxel (GridSampleArgs::grid_lo / grid_hi), shifted by d voxels.
  void Next(double lo[3], double hi[3]) {
    for (int d = 0; d < 3; ++d) {
      const double shift = (Uniform() - 0.5) * spacing_[d];
      lo[d] = -1.0 + shift;
      hi[d] = 1.0 + shift;
    }
  }

  // Per-voxel mode (MetricOptions::mi_voxel_jitter): the next iteration's
  // GridSampleArgs::voxel_jitter_key (never 0, which means no jitter); the
  // grid bounds stay [-1, 1].
  uint64_t NextVoxelKey() { return NextBits() | 1u; }

  // The fixed image's sampler on a level's own grid (dims), border-padded:
  // what Advance moves together with the moving image's.
  static GridSampleArgs FixedImageArgs(const float* fixed, Dims3 dims) {
    GridSampleArgs a;
    a.image = fixed;
    a.image_dims = dims;
    a.out_dims = dims;
    a.padding = Padding::kBorder;
    return a;
  }

  // One jittered iteration: the moving image's sampler and the fixed
  // image's sampler both move to the next grid (one per-voxel key, or one
  // whole-grid shift), so they sample the same points.
  void Advance(bool per_voxel, GridSampleArgs* moving, GridSampleArgs* fixed) {
    if (per_voxel) {
      moving->voxel_jitter_key = fixed->voxel_jitter_key = NextVoxelKey();
      return;
    }
    Next(moving->grid_lo, moving->grid_hi);
    std::copy(moving->grid_lo, moving->grid_lo + 3, fixed->grid_lo);
    std::copy(moving->grid_hi, moving->grid_hi + 3, fixed->grid_hi);
  }

 private:
  // SplitMix64 (the same on every platform).
  uint64_t NextBits() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // In [0, 1): the top 53 bits.
  double Uniform() { return static_cast<double>(NextBits() >> 11) * 0x1.0p-53; }

  uint64_t state_;
  double spacing_[3] = {0, 0, 0};
};

}  // namespace tessera::registration

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_GRID_JITTER_H_
