// Codebook helpers that work on either backend without a host copy (maps of
// 10^6 nodes hold tens of GB): reproducible pseudo-random fill in either
// layout, for random initialisation and benchmarks.
#ifndef TESSERA_KERNELS_SOM_CODEBOOK_H_
#define TESSERA_KERNELS_SOM_CODEBOOK_H_

#include <cstdint>

#include "absl/status/status.h"
#include "common/device.h"
#include "kernels/som/types.h"

namespace tessera {
namespace som {

// The value FillRandomCodebook stores for (feature, node) before scaling:
// uniform in [0, 1) with 24 random bits, from a hash of (seed, feature, node).
// Independent of layout, type and backend.
TESSERA_SOM_HD inline float RandomUnit(uint64_t seed, int64_t feature, int64_t node) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (static_cast<uint64_t>(feature) * 0x100000001b3ull +
                                               static_cast<uint64_t>(node) + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
}

// w[v][i] = RandomUnit(seed, v, i) * (feature_scale ? feature_scale[v] : 1),
// rounded to the codebook's type, then sq_norms (bmu.h: ComputeSqNorms).
// feature_scale lives in the stream's backend memory (or is null).
absl::Status FillRandomCodebook(const Stream& stream, const CodebookView& codebook, uint64_t seed,
                                const float* feature_scale = nullptr);

namespace cpu {
void FillRandomCodebook(const CodebookView& codebook, uint64_t seed, const float* feature_scale);
}  // namespace cpu
namespace cuda {
absl::Status FillRandomCodebook(const Stream& stream, const CodebookView& codebook, uint64_t seed,
                                const float* feature_scale);
}  // namespace cuda

}  // namespace som
}  // namespace tessera

#endif  // TESSERA_KERNELS_SOM_CODEBOOK_H_
