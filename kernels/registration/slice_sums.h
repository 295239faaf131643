// Fixed blocking of the registration metrics' global sums (issue 39): a sum
// over a volume is taken per z-slice (each slice's voxels in index order,
// one double accumulator), then over the slices' sums in ascending z. The
// blocking depends on nothing but the volume, so a z-sharded evaluation
// (kernels/parallel: each rank sums its own slices, the per-slice sums are
// all-reduced as a vector of nz doubles that is zero off each rank's slices,
// which any reduction order adds exactly) gives the same bits as the
// unsharded CPU kernels, whatever the shard count, thread count or rank
// order.
#ifndef TESSERA_KERNELS_REGISTRATION_SLICE_SUMS_H_
#define TESSERA_KERNELS_REGISTRATION_SLICE_SUMS_H_

#include <cstdint>

namespace tessera {
namespace registration {

// The slices' sums added in ascending z.
inline double SumOfSlices(const double* slice_sums, int64_t nz) {
  double total = 0.0;
  for (int64_t k = 0; k < nz; ++k) total += slice_sums[k];
  return total;
}

}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_SLICE_SUMS_H_
