// Per-voxel sub-voxel jitter of a sampler's output grid (issue 17): voxel v
// is sampled at x + d(v) with d(v) in [-1/2, 1/2) output voxels per axis, a
// SplitMix64 hash of (key, v, axis), as elastix's random coordinates. The
// same function runs on the host and the device so both backends sample the
// same points. key 0 means no jitter.
#ifndef TESSERA_KERNELS_REGISTRATION_VOXEL_JITTER_H_
#define TESSERA_KERNELS_REGISTRATION_VOXEL_JITTER_H_

#include <cstdint>

#include "kernels/registration/types.h"

namespace tessera {
namespace registration {

TESSERA_HD inline uint64_t SplitMix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The offset of voxel v along `axis`, in output voxels, in [-1/2, 1/2).
template <typename T>
TESSERA_HD inline T VoxelJitter(uint64_t key, int64_t v, int axis) {
  const uint64_t h = SplitMix64(key ^ SplitMix64(static_cast<uint64_t>(v) * 3u + static_cast<uint64_t>(axis)));
  return static_cast<T>(static_cast<float>(h >> 40) * 0x1.0p-24f - 0.5f);
}

}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_VOXEL_JITTER_H_
