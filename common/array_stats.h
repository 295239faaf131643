// One-pass statistics of an array: count, finite count, min, max, mean,
// standard deviation. Used to summarize volumes and to reject inputs with
// NaN/Inf before long jobs. CPU reference in array_stats_cpu.cc, CUDA in
// array_stats.cu (a fused single-pass reduction).
#ifndef TESSERA_COMMON_ARRAY_STATS_H_
#define TESSERA_COMMON_ARRAY_STATS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "common/ndarray.h"

namespace tessera {

struct ArrayStats {
  int64_t count = 0;            // all elements
  int64_t nonfinite_count = 0;  // NaN or +-Inf (floating dtypes only)
  double min = 0;               // over finite elements; 0 when there are none
  double max = 0;
  double mean = 0;
  double stddev = 0;            // population standard deviation
};

// Computes the statistics on the backend of `stream`. A host array is copied
// to the GPU for a CUDA stream; a device array needs a CUDA stream.
absl::StatusOr<ArrayStats> ComputeArrayStats(const NDArray& array, const Stream& stream);

// The plain CPU reference (double accumulation), also the CPU backend.
ArrayStats ComputeArrayStatsCpu(const NDArray& host_array);

}  // namespace tessera

#endif  // TESSERA_COMMON_ARRAY_STATS_H_
