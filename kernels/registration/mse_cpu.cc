// CPU reference of the MSE loss and gradient, threaded over voxel ranges.
#include <vector>

#include "kernels/registration/mse.h"
#include "kernels/registration/parallel.h"

namespace tessera {
namespace registration {
namespace cpu {

template <typename T>
double Mse(const T* fixed, const T* warped, Dims3 dims, T* grad_warped) {
  const int64_t n = dims.size();
  const double grad_scale = 2.0 / static_cast<double>(n);
  std::vector<double> partial(ParallelChunks(n), 0.0);
  ParallelFor(n, [&](int64_t v0, int64_t v1, int chunk) {
    double sum = 0.0;
    for (int64_t v = v0; v < v1; ++v) {
      const double diff = static_cast<double>(warped[v]) - static_cast<double>(fixed[v]);
      sum += diff * diff;
      if (grad_warped != nullptr) grad_warped[v] = static_cast<T>(grad_scale * diff);
    }
    partial[chunk] = sum;
  });
  double total = 0.0;
  for (double p : partial) total += p;
  return total / static_cast<double>(n);
}

template double Mse<float>(const float*, const float*, Dims3, float*);
template double Mse<double>(const double*, const double*, Dims3, double*);

}  // namespace cpu
}  // namespace registration
}  // namespace tessera
