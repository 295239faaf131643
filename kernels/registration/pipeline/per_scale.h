// Per-level settings given as one value per scale (iterations, sigmas): the
// value of scale `scale_index`, the last one repeating for further scales.
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_PER_SCALE_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_PER_SCALE_H_

#include <algorithm>
#include <cstddef>
#include <vector>

namespace tessera::registration {

// 0 for an empty list.
inline int PerScale(const std::vector<int>& values, size_t scale_index) {
  if (values.empty()) return 0;
  return values[std::min(scale_index, values.size() - 1)];
}

}  // namespace tessera::registration

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_PER_SCALE_H_
