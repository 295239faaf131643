// CUDA CombineMasks (voxel_mask.h): a grid-stride pass writing the combined
// mask; per-block counts (integer, exact in any order) added by one atomic
// each into a 64-bit counter that is copied to the host.
#include <cuda_runtime.h>

#include <cstdint>

#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/registration/voxel_mask.h"

namespace tessera {
namespace registration {
namespace cuda {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    CombineMasksKernel(const uint8_t* __restrict__ fixed, const int32_t* __restrict__ moving, int64_t n,
                       uint8_t* __restrict__ out, unsigned long long* __restrict__ count) {
  __shared__ unsigned long long block_count;
  if (threadIdx.x == 0) block_count = 0;
  __syncthreads();
  unsigned long long mine = 0;
  for (int64_t v = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; v < n;
       v += static_cast<int64_t>(gridDim.x) * kThreads) {
    const bool in = (fixed == nullptr || fixed[v] != 0) && (moving == nullptr || moving[v] != 0);
    out[v] = in ? 1 : 0;
    mine += in ? 1 : 0;
  }
  if (mine != 0) atomicAdd(&block_count, mine);
  __syncthreads();
  if (threadIdx.x == 0 && block_count != 0) atomicAdd(count, block_count);
}

}  // namespace

absl::StatusOr<int64_t> CombineMasks(const Stream& stream, const uint8_t* fixed, const int32_t* moving, int64_t n,
                                     uint8_t* out, Workspace* workspace) {
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  Workspace local;
  TESSERA_ASSIGN_OR_RETURN(void* scratch, ReserveScratch(stream, sizeof(unsigned long long), workspace, local));
  auto* count = static_cast<unsigned long long*>(scratch);
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(count, 0, sizeof(unsigned long long), s));
  int64_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks > 65536) blocks = 65536;
  CombineMasksKernel<<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(fixed, moving, n, out, count);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("combine masks");
  unsigned long long host = 0;
  TESSERA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(&host, count, sizeof(host), cudaMemcpyDeviceToHost, s));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return static_cast<int64_t>(host);
}

}  // namespace cuda
}  // namespace registration
}  // namespace tessera
