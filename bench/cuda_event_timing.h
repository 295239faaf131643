// The GPU benches' timer: the median of `reps` calls of `fn`, each between its
// own pair of CUDA events on `stream`, after `warmup` untimed calls and a
// synchronisation (so the first timed call does not wait for the warm-ups).
#ifndef TESSERA_BENCH_CUDA_EVENT_TIMING_H_
#define TESSERA_BENCH_CUDA_EVENT_TIMING_H_

#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/device.h"

namespace tessera {
namespace bench {

absl::StatusOr<double> CudaEventMedianMs(const Stream& stream, int warmup, int reps,
                                         const std::function<absl::Status()>& fn);

}  // namespace bench
}  // namespace tessera

#endif  // TESSERA_BENCH_CUDA_EVENT_TIMING_H_
