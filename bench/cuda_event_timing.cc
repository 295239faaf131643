#include "bench/cuda_event_timing.h"

#include <cuda_runtime.h>

#include <vector>

#include "bench/bench_util.h"
#include "common/cuda_check.h"
#include "common/status.h"

namespace tessera {
namespace bench {

absl::StatusOr<double> CudaEventMedianMs(const Stream& stream, int warmup, int reps,
                                         const std::function<absl::Status()>& fn) {
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  for (int i = 0; i < warmup; ++i) TESSERA_RETURN_IF_ERROR(fn());
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  cudaEvent_t start, stop;
  TESSERA_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
  TESSERA_CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop));
  std::vector<double> ms;
  absl::Status status;
  for (int i = 0; i < reps && status.ok(); ++i) {
    float t = 0;
    status = CudaStatus(cudaEventRecord(start, s), "cudaEventRecord");
    if (status.ok()) status = fn();
    if (status.ok()) status = CudaStatus(cudaEventRecord(stop, s), "cudaEventRecord");
    if (status.ok()) status = CudaStatus(cudaEventSynchronize(stop), "cudaEventSynchronize");
    if (status.ok()) status = CudaStatus(cudaEventElapsedTime(&t, start, stop), "cudaEventElapsedTime");
    ms.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (!status.ok()) return status;
  return Median(std::move(ms));
}

}  // namespace bench
}  // namespace tessera
