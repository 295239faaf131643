// CPU reference of CombineMasks (voxel_mask.h), threaded; counts summed per
// thread chunk, then in chunk order.
#include <vector>

#include "kernels/registration/parallel.h"
#include "kernels/registration/voxel_mask.h"

namespace tessera {
namespace registration {
namespace cpu {

int64_t CombineMasks(const uint8_t* fixed, const int32_t* moving, int64_t n, uint8_t* out) {
  std::vector<int64_t> counts(static_cast<size_t>(ParallelChunks(n)), 0);
  ParallelFor(n, [&](int64_t b, int64_t e, int chunk) {
    int64_t count = 0;
    for (int64_t v = b; v < e; ++v) {
      const bool in = (fixed == nullptr || fixed[v] != 0) && (moving == nullptr || moving[v] != 0);
      out[v] = in ? 1 : 0;
      count += in ? 1 : 0;
    }
    counts[chunk] = count;
  });
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  return total;
}

}  // namespace cpu
}  // namespace registration
}  // namespace tessera
