// Test helpers for sharded operations: random whole volumes, and running a
// per-rank body on H in-process ranks with each rank's slab extracted from a
// whole array and its own slices gathered back.
#ifndef TESSERA_KERNELS_PARALLEL_PARALLEL_TEST_UTIL_H_
#define TESSERA_KERNELS_PARALLEL_PARALLEL_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "common/ndarray.h"
#include "common/testing/device_array.h"
#include "kernels/parallel/in_process_communicator.h"
#include "kernels/parallel/slab.h"

namespace tessera {
namespace parallel {
namespace testing {

// A float32 host array of `shape` with uniform values in [lo, hi).
inline NDArray RandomArray(const Shape& shape, double lo, double hi, uint32_t seed) {
  NDArray a = NDArray::Allocate(shape, DType::kFloat32).value();
  const std::vector<float> v = ::tessera::testing::RandomUniform<float>(a.num_elements(), lo, hi, seed);
  std::copy(v.begin(), v.end(), a.data<float>());
  return a;
}

// A smooth random image: a sum of a few random sinusoids plus noise, so that
// sampling and windowed statistics are not dominated by white noise.
inline NDArray SmoothRandomVolume(const Dims3& d, uint32_t seed, double noise = 0.05) {
  NDArray a = NDArray::Allocate({d.nx, d.ny, d.nz}, DType::kFloat32).value();
  const std::vector<double> p = ::tessera::testing::RandomUniform<double>(12, 0.5, 2.5, seed);
  const std::vector<float> n = ::tessera::testing::RandomUniform<float>(d.size(), -noise, noise, seed + 1);
  for (int64_t k = 0; k < d.nz; ++k) {
    for (int64_t j = 0; j < d.ny; ++j) {
      for (int64_t i = 0; i < d.nx; ++i) {
        const double x = double(i) / d.nx, y = double(j) / d.ny, z = double(k) / d.nz;
        const double v = 1.0 + 0.4 * std::sin(6.28 * (p[0] * x + p[1] * y) + p[2]) +
                         0.3 * std::cos(6.28 * (p[3] * y + p[4] * z) + p[5]) + 0.2 * std::sin(6.28 * p[6] * z + p[7] * x);
        a.data<float>()[d.index(i, j, k)] = static_cast<float>(v) + n[d.index(i, j, k)];
      }
    }
  }
  return a;
}

inline std::vector<float> ToVector(const NDArray& a) {
  return std::vector<float>(a.data<float>(), a.data<float>() + a.num_elements());
}

inline Dims3 DimsOf(const NDArray& a) { return {a.dim(0), a.dim(1), a.dim(2)}; }

// max |a - b| / max(max |b|, tiny).
inline double MaxRelError(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double num = 0, den = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num = std::max(num, std::abs(double(a[i]) - double(b[i])));
    den = std::max(den, std::abs(double(b[i])));
  }
  return num / den;
}

}  // namespace testing
}  // namespace parallel
}  // namespace tessera

#endif  // TESSERA_KERNELS_PARALLEL_PARALLEL_TEST_UTIL_H_
