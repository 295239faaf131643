// CUDA JacobianDeterminant: one pass computing det per voxel (float) with a
// per-block (count, min, max) reduction, then one block merging the partials
// in a fixed order. See jacobian.h.
#include <cub/block/block_reduce.cuh>

#include <algorithm>
#include <cfloat>
#include <memory>

#include "common/buffer.h"
#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/registration/jacobian_internal.h"

namespace tessera {
namespace registration {
namespace jac_internal {
namespace {

struct JacPolicySm90 {
  static constexpr int kThreads = 256;
  static constexpr int kBlocksPerSm = 4;
};
using Policy = JacPolicySm90;

struct Partial {
  unsigned long long nonpositive;
  float lo;
  float hi;
};

struct Merge {
  __device__ Partial operator()(const Partial& a, const Partial& b) const {
    return Partial{a.nonpositive + b.nonpositive, fminf(a.lo, b.lo), fmaxf(a.hi, b.hi)};
  }
};

__global__ void __launch_bounds__(Policy::kThreads)
    DetKernel(Field f, float* __restrict__ det, Partial* __restrict__ partials) {
  const int64_t nx = f.n[0], ny = f.n[1];
  const int64_t V = nx * ny * f.n[2];
  Partial acc{0ull, FLT_MAX, -FLT_MAX};
  for (int64_t v = blockIdx.x * int64_t(Policy::kThreads) + threadIdx.x; v < V;
       v += int64_t(gridDim.x) * Policy::kThreads) {
    const int64_t i = v % nx, j = (v / nx) % ny, k = v / (nx * ny);
    const float d = DetAt<float>(f, i, j, k);
    if (det != nullptr) det[v] = d;
    acc.nonpositive += d <= 0.f;
    acc.lo = fminf(acc.lo, d);
    acc.hi = fmaxf(acc.hi, d);
  }
  using BlockReduce = cub::BlockReduce<Partial, Policy::kThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  const Partial block = BlockReduce(temp).Reduce(acc, Merge());
  if (threadIdx.x == 0) partials[blockIdx.x] = block;
}

__global__ void __launch_bounds__(Policy::kThreads) MergeKernel(Partial* partials, int count) {
  Partial acc{0ull, FLT_MAX, -FLT_MAX};
  for (int i = threadIdx.x; i < count; i += Policy::kThreads) acc = Merge()(acc, partials[i]);
  using BlockReduce = cub::BlockReduce<Partial, Policy::kThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  const Partial total = BlockReduce(temp).Reduce(acc, Merge());
  if (threadIdx.x == 0) partials[count] = total;
}

}  // namespace

absl::StatusOr<JacobianSummary> JacobianCuda(const Field& f, float* det, const Stream& stream) {
  const int ordinal = stream.ordinal();
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal));
  int sms = 0;
  TESSERA_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ordinal));
  const int64_t V = f.n[0] * f.n[1] * f.n[2];
  const int blocks = int(std::max<int64_t>(
      1, std::min<int64_t>((V + Policy::kThreads - 1) / Policy::kThreads, int64_t{sms} * Policy::kBlocksPerSm)));
  TESSERA_ASSIGN_OR_RETURN(auto scratch,
                           Buffer::Allocate(MemoryKind::kDevice, sizeof(Partial) * (blocks + 1), ordinal));
  Partial* partials = static_cast<Partial*>(scratch->data());
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  DetKernel<<<blocks, Policy::kThreads, 0, s>>>(f, det, partials);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("DetKernel");
  MergeKernel<<<1, Policy::kThreads, 0, s>>>(partials, blocks);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("MergeKernel");
  Partial host;
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(&host, partials + blocks, sizeof(host), cudaMemcpyDeviceToHost, s));
  TESSERA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
  JacobianSummary out;
  out.voxels = V;
  out.nonpositive = static_cast<int64_t>(host.nonpositive);
  out.min_det = host.lo;
  out.max_det = host.hi;
  return out;
}

}  // namespace jac_internal
}  // namespace registration
}  // namespace tessera
