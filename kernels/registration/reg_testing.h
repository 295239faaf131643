// Test helpers for the registration kernels' tests (mutual_info_test,
// gaussian_smooth_test, adam_test, jacobian_test): host/device copies, NaN
// poisoning and random volumes. Test-only.
#ifndef TESSERA_KERNELS_REGISTRATION_REG_TESTING_H_
#define TESSERA_KERNELS_REGISTRATION_REG_TESTING_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "common/device.h"
#include "common/ndarray.h"

namespace tessera {
namespace reg_testing {

inline NDArray HostFloat(const Shape& shape, float value = 0.f) {
  NDArray a = NDArray::Allocate(shape, DType::kFloat32).value();
  std::fill(a.data<float>(), a.data<float>() + a.num_elements(), value);
  return a;
}

inline NDArray RandomUniform(const Shape& shape, std::mt19937& rng, float lo, float hi) {
  NDArray a = HostFloat(shape);
  std::uniform_real_distribution<float> d(lo, hi);
  for (int64_t i = 0; i < a.num_elements(); ++i) a.data<float>()[i] = d(rng);
  return a;
}

inline NDArray ToDevice(const NDArray& host, const Stream& stream) {
  NDArray d = host.CopyTo(MemoryKind::kDevice, stream, stream.ordinal()).value();
  EXPECT_TRUE(stream.Synchronize().ok());
  return d;
}

inline NDArray ToHost(const NDArray& device, const Stream& stream) {
  NDArray h = device.CopyTo(MemoryKind::kHost, stream).value();
  EXPECT_TRUE(stream.Synchronize().ok());
  return h;
}

// A device float array of `shape` filled with NaN, so elements a kernel fails
// to write show up in comparisons.
inline NDArray PoisonedDevice(const Shape& shape, const Stream& stream) {
  return ToDevice(HostFloat(shape, std::numeric_limits<float>::quiet_NaN()), stream);
}

struct Diff {
  double max_abs = 0;    // max |a - b| (inf if any NaN)
  double max_ref = 0;    // max |b|
  int64_t nonfinite = 0; // elements of a that are NaN/Inf
};

inline Diff Compare(const NDArray& a, const NDArray& b) {
  Diff d;
  const float* x = a.data<float>();
  const float* y = b.data<float>();
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    if (!std::isfinite(x[i])) {
      ++d.nonfinite;
      d.max_abs = std::numeric_limits<double>::infinity();
      continue;
    }
    d.max_abs = std::max(d.max_abs, std::abs(double(x[i]) - double(y[i])));
    d.max_ref = std::max(d.max_ref, std::abs(double(y[i])));
  }
  return d;
}

}  // namespace reg_testing
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_REG_TESTING_H_
