// CPU reference for ComputeArrayStats: two passes in double (mean, then the
// centred sum of squares), the textbook-stable way. Also the CPU backend.
#include <cmath>
#include <limits>

#include "common/array_stats.h"

namespace tessera {
namespace {

template <typename T>
ArrayStats StatsOf(const T* data, int64_t n) {
  ArrayStats s;
  s.count = n;
  double sum = 0;
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  int64_t finite = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = static_cast<double>(data[i]);
    if (!std::isfinite(v)) continue;
    ++finite;
    sum += v;
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
  }
  s.nonfinite_count = n - finite;
  if (finite == 0) return s;
  s.min = lo;
  s.max = hi;
  s.mean = sum / finite;
  double m2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = static_cast<double>(data[i]);
    if (std::isfinite(v)) m2 += (v - s.mean) * (v - s.mean);
  }
  s.stddev = std::sqrt(m2 / finite);
  return s;
}

}  // namespace

ArrayStats ComputeArrayStatsCpu(const NDArray& host_array) {
  ArrayStats result;
  VisitDType(host_array.dtype(), [&](auto tag) {
    using T = decltype(tag);
    result = StatsOf(host_array.data<T>(), host_array.num_elements());
  });
  return result;
}

}  // namespace tessera
