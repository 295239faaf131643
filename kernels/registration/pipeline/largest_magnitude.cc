#include "kernels/registration/pipeline/largest_magnitude.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/array_stats.h"
#include "common/parallel.h"
#include "common/status.h"

namespace tessera::registration {
namespace {

// 16 lanes of floats / their bits as one GCC vector: element-wise compares
// and selects (a max is exact in any order, so the lanes may split the work).
typedef float Floats16 __attribute__((vector_size(64)));
typedef int32_t Ints16 __attribute__((vector_size(64)));
#pragma GCC diagnostic ignored "-Wpsabi"

float LargestOfRange(const float* x, int64_t n) {
  Floats16 m = {};
  const Ints16 abs_bits = Ints16{} + 0x7fffffff;
  const Floats16 finite_max = Floats16{} + FLT_MAX;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    Ints16 bits;
    std::memcpy(&bits, x + i, sizeof(bits));
    Floats16 a;
    const Ints16 abs = bits & abs_bits;
    std::memcpy(&a, &abs, sizeof(a));
    // a <= FLT_MAX: finite (false for NaN and infinities).
    m = ((a <= finite_max) & (a > m)) ? a : m;
  }
  float best = 0.f;
  for (int l = 0; l < 16; ++l) best = std::max(best, m[l]);
  for (; i < n; ++i) {
    const float a = std::fabs(x[i]);
    if (a <= FLT_MAX && a > best) best = a;
  }
  return best;
}

}  // namespace

float LargestFiniteMagnitudeCpu(const float* x, int64_t n) {
  std::vector<float> partial(std::max(1, ParallelChunks(n, int64_t{1} << 16)), 0.f);
  ParallelFor(
      n, [&](int64_t b, int64_t e, int chunk) { partial[chunk] = LargestOfRange(x + b, e - b); },
      int64_t{1} << 16);
  return *std::max_element(partial.begin(), partial.end());
}

absl::StatusOr<double> LargestFiniteMagnitude(const NDArray& a, const Stream& stream) {
  if (a.dtype() != DType::kFloat32) {
    return absl::InvalidArgumentError(absl::StrCat("LargestFiniteMagnitude: float32 array expected, got ",
                                                   DTypeName(a.dtype())));
  }
  if (stream.backend() == Backend::kCpu && a.memory_kind() != MemoryKind::kDevice) {
    return static_cast<double>(LargestFiniteMagnitudeCpu(a.data<float>(), a.num_elements()));
  }
  TESSERA_ASSIGN_OR_RETURN(ArrayStats stats, ComputeArrayStats(a, stream));
  return std::max(std::abs(stats.min), std::abs(stats.max));
}

}  // namespace tessera::registration
