// CPU reference of the MSE loss and gradient, threaded over z-slices. The sum
// of squares is blocked per slice (slice_sums.h), so a z-slab (MseSlab, the
// sharded MSE) gives the same bits as the whole volume.
#include <vector>

#include "kernels/registration/mse.h"
#include "kernels/registration/parallel.h"
#include "kernels/registration/slice_sums.h"

namespace tessera {
namespace registration {
namespace cpu {
namespace {

template <typename T>
void MseSlices(const T* fixed, const T* warped, Dims3 dims, int64_t total_voxels, double* slice_sums,
               T* grad_warped, VoxelMask mask = {}) {
  const int64_t slice = dims.nx * dims.ny;
  const double grad_scale = 2.0 / static_cast<double>(total_voxels);
  ParallelFor(dims.nz, [&](int64_t k0, int64_t k1, int) {
    for (int64_t k = k0; k < k1; ++k) {
      double sum = 0.0;
      for (int64_t v = k * slice; v < (k + 1) * slice; ++v) {
        if (!mask.has(v)) {  // outside the mask: no term, no gradient
          if (grad_warped != nullptr) grad_warped[v] = T(0);
          continue;
        }
        const double diff = static_cast<double>(warped[v]) - static_cast<double>(fixed[v]);
        sum += diff * diff;
        if (grad_warped != nullptr) grad_warped[v] = static_cast<T>(grad_scale * diff);
      }
      slice_sums[k] = sum;
    }
  });
}

}  // namespace

template <typename T>
double Mse(const T* fixed, const T* warped, Dims3 dims, T* grad_warped, VoxelMask mask) {
  const int64_t n = mask.mask != nullptr ? mask.count : dims.size();
  std::vector<double> slice_sums(dims.nz, 0.0);
  MseSlices(fixed, warped, dims, n, slice_sums.data(), grad_warped, mask);
  return SumOfSlices(slice_sums.data(), dims.nz) / static_cast<double>(n);
}

void MseSlab(const float* fixed, const float* warped, Dims3 own_dims, int64_t total_voxels, double* slice_sums,
             float* grad_warped) {
  MseSlices(fixed, warped, own_dims, total_voxels, slice_sums, grad_warped);
}

template double Mse<float>(const float*, const float*, Dims3, float*, VoxelMask);
template double Mse<double>(const double*, const double*, Dims3, double*, VoxelMask);

}  // namespace cpu
}  // namespace registration
}  // namespace tessera
