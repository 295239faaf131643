// CUDA ComputeArrayStats: one fused pass over the array. Each thread keeps a
// Welford accumulator (count, mean, M2) plus min/max/non-finite count; blocks
// merge with Chan's formula through cub::BlockReduce, and a single block merges
// the per-block partials. The grid size is fixed by the device, so results are
// deterministic run to run.
#include <cub/block/block_reduce.cuh>

#include <cmath>
#include <vector>

#include "common/array_stats.h"
#include "common/cuda_check.h"
#include "common/status.h"

namespace tessera {
namespace {

struct Partial {
  double n;  // finite count (as double: merged by weights)
  double mean;
  double m2;
  double lo;
  double hi;
  unsigned long long nonfinite;
};

__host__ __device__ inline Partial EmptyPartial() {
  return Partial{0.0, 0.0, 0.0, INFINITY, -INFINITY, 0ull};
}

struct MergePartials {
  __host__ __device__ Partial operator()(const Partial& a, const Partial& b) const {
    if (a.n == 0) return Partial{b.n, b.mean, b.m2, b.lo, b.hi, a.nonfinite + b.nonfinite};
    if (b.n == 0) return Partial{a.n, a.mean, a.m2, a.lo, a.hi, a.nonfinite + b.nonfinite};
    Partial r;
    r.n = a.n + b.n;
    const double delta = b.mean - a.mean;
    r.mean = a.mean + delta * (b.n / r.n);
    r.m2 = a.m2 + b.m2 + delta * delta * (a.n * b.n / r.n);
    r.lo = fmin(a.lo, b.lo);
    r.hi = fmax(a.hi, b.hi);
    r.nonfinite = a.nonfinite + b.nonfinite;
    return r;
  }
};

constexpr int kThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kThreads) PartialStatsKernel(const T* __restrict__ data, int64_t n,
                                                               Partial* __restrict__ partials) {
  Partial acc = EmptyPartial();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < n; i += stride) {
    const double v = static_cast<double>(data[i]);
    if (!isfinite(v)) {
      ++acc.nonfinite;
      continue;
    }
    acc.n += 1.0;
    const double delta = v - acc.mean;
    acc.mean += delta / acc.n;
    acc.m2 += delta * (v - acc.mean);
    acc.lo = fmin(acc.lo, v);
    acc.hi = fmax(acc.hi, v);
  }
  using BlockReduce = cub::BlockReduce<Partial, kThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  Partial block = BlockReduce(temp).Reduce(acc, MergePartials());
  if (threadIdx.x == 0) partials[blockIdx.x] = block;
}

__global__ void __launch_bounds__(kThreads) MergeKernel(const Partial* __restrict__ partials, int count,
                                                        Partial* __restrict__ out) {
  Partial acc = EmptyPartial();
  // Fixed order per thread, fixed tree across threads: deterministic.
  for (int i = threadIdx.x; i < count; i += kThreads) acc = MergePartials()(acc, partials[i]);
  using BlockReduce = cub::BlockReduce<Partial, kThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  Partial total = BlockReduce(temp).Reduce(acc, MergePartials());
  if (threadIdx.x == 0) *out = total;
}

template <typename T>
absl::Status Launch(const void* data, int64_t n, int blocks, Partial* partials, Partial* total, cudaStream_t s) {
  PartialStatsKernel<T><<<blocks, kThreads, 0, s>>>(static_cast<const T*>(data), n, partials);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("PartialStatsKernel");
  MergeKernel<<<1, kThreads, 0, s>>>(partials, blocks, total);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("MergeKernel");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ArrayStats> ComputeArrayStatsCuda(const NDArray& device_array, const Stream& stream) {
  const int64_t n = device_array.num_elements();
  const int ordinal = device_array.ordinal();
  int sms = 0;
  TESSERA_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ordinal));
  // Enough blocks to fill the GPU a few times over, never more than the data needs.
  const int64_t wanted = (n + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(wanted, int64_t{sms} * 8)));
  TESSERA_ASSIGN_OR_RETURN(auto scratch,
                           Buffer::Allocate(MemoryKind::kDevice, sizeof(Partial) * (blocks + 1), ordinal));
  Partial* partials = static_cast<Partial*>(scratch->data());
  Partial* total = partials + blocks;
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  absl::Status launched = absl::InvalidArgumentError("unsupported dtype");
  VisitDType(device_array.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launched = Launch<T>(device_array.raw_data(), n, blocks, partials, total, s);
  });
  TESSERA_RETURN_IF_ERROR(launched);
  Partial host;
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(&host, total, sizeof(Partial), cudaMemcpyDeviceToHost, s));
  TESSERA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
  ArrayStats out;
  out.count = n;
  out.nonfinite_count = static_cast<int64_t>(host.nonfinite);
  if (host.n > 0) {
    out.min = host.lo;
    out.max = host.hi;
    out.mean = host.mean;
    out.stddev = std::sqrt(host.m2 / host.n);
  }
  return out;
}

}  // namespace tessera
