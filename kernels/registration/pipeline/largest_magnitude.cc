#include "kernels/registration/pipeline/largest_magnitude.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/array_stats.h"
#include "common/parallel.h"
#include "common/status.h"
#include "kernels/registration/cpu_clones.h"

namespace tessera::registration {
namespace {

// On the bits: |x| is x's bits without the sign, and non-negative floats
// order as their bits do, +inf (0x7f800000) and NaN above every finite one.
// So the largest finite |x| is the largest such integer below 0x7f800000,
// a plain unsigned max that the compiler vectorises (a max is exact in any
// order). Cloned per ISA level, picked at load time.
TESSERA_REGISTRATION_CLONES
uint32_t LargestFiniteBits(const float* x, int64_t n) {
  uint32_t m = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, x + i, sizeof(b));
    b &= 0x7fffffffu;
    b &= 0u - static_cast<uint32_t>(b < 0x7f800000u);  // non-finite -> 0
    m = std::max(m, b);
  }
  return m;
}

float LargestOfRange(const float* x, int64_t n) {
  const uint32_t bits = LargestFiniteBits(x, n);
  float v;
  std::memcpy(&v, &bits, sizeof(v));
  return v;
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
