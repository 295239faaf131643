// The greedy and B-spline steps' normaliser: the largest finite |value| of a
// float array, i.e. max(|min|, |max|) of ComputeArrayStats (common/
// array_stats.h), the same double. On the CPU one parallel vector pass
// (issue 38: the statistics' two serial double passes over the 3-component
// gradient were 5 % of a 1 mm CPU registration's time); on CUDA the
// statistics as before.
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_LARGEST_MAGNITUDE_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_LARGEST_MAGNITUDE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "common/ndarray.h"

namespace tessera::registration {

// max |x[i]| over the finite x[i] (0 when none is finite), host memory.
float LargestFiniteMagnitudeCpu(const float* x, int64_t n);

// The same for a float32 array on `stream`'s backend (CPU: host memory).
absl::StatusOr<double> LargestFiniteMagnitude(const NDArray& a, const Stream& stream);

}  // namespace tessera::registration

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_LARGEST_MAGNITUDE_H_
