// CUDA MSE: one block per z-slice writes dL/dW and sums the slice's squared
// differences (double, a fixed tree); the slices' sums are then added in
// ascending z (slice_sums.h), so a z-slab (MseSlab) gives the same bits.
#include <cuda_runtime.h>

#include <cstdint>

#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/registration/mse.h"
#include "kernels/registration/reduce.cuh"

namespace tessera {
namespace registration {
namespace cuda {
namespace {

constexpr int kThreads = 256;

// One block per z-slice (issue 39, slice_sums.h): the slice's squared
// differences in a fixed tree (thread t takes voxels t, t + 256, ... of the
// slice, then BlockSum), so slice k's sum is the same on any z-slab holding it.
template <bool kGrad>
__global__ void __launch_bounds__(kThreads)
    MseSliceKernel(const float* __restrict__ fixed, const float* __restrict__ warped, int64_t slice, float grad_scale,
                   float* __restrict__ grad, double* __restrict__ slice_partials, VoxelMask mask) {
  __shared__ double scratch[32];
  double sum = 0.0;
  const int64_t base = static_cast<int64_t>(blockIdx.x) * slice;
  for (int64_t t = threadIdx.x; t < slice; t += kThreads) {
    const int64_t v = base + t;
    if (!mask.has(v)) {  // outside the mask (issue 34): no term, no gradient
      if (kGrad) grad[v] = 0.f;
      continue;
    }
    const float diff = __ldg(warped + v) - __ldg(fixed + v);
    sum += static_cast<double>(diff) * diff;
    if (kGrad) grad[v] = grad_scale * diff;
  }
  double s[1] = {sum};
  cuda_detail::BlockSum<1>(s, scratch);
  if (threadIdx.x == 0) slice_partials[blockIdx.x] = s[0];
}

absl::Status MseImpl(const Stream& stream, const float* fixed, const float* warped, Dims3 dims, int64_t total_voxels,
                     float* loss, double* slice_sums, float* grad_warped, Workspace* workspace,
                     VoxelMask mask = {}) {
  if (loss == nullptr && slice_sums == nullptr && grad_warped == nullptr) return absl::OkStatus();
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  if (dims.nz > 2147483647) return absl::InvalidArgumentError("mse (CUDA): too many slices");
  Workspace local;
  TESSERA_ASSIGN_OR_RETURN(void* scratch, ReserveScratch(stream, 2 * sizeof(double) * dims.nz, workspace, local));
  double* partials = static_cast<double*>(scratch);
  double* slices = slice_sums != nullptr ? slice_sums : partials + dims.nz;
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  const float grad_scale = static_cast<float>(2.0 / static_cast<double>(total_voxels));
  const int64_t slice = dims.nx * dims.ny;
  const unsigned blocks = static_cast<unsigned>(dims.nz);
  if (grad_warped != nullptr) {
    MseSliceKernel<true><<<blocks, kThreads, 0, s>>>(fixed, warped, slice, grad_scale, grad_warped, partials, mask);
  } else {
    MseSliceKernel<false><<<blocks, kThreads, 0, s>>>(fixed, warped, slice, grad_scale, nullptr, partials, mask);
  }
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("mse");
  if (loss != nullptr || slice_sums != nullptr) {
    // loss = SumOfSlices / N, as the CPU reference and the sharded MSE.
    TESSERA_CUDA_RETURN_IF_ERROR(cuda_detail::FinishSlices(partials, dims.nz, 1, slices, 1.0,
                                                           static_cast<double>(total_voxels), loss, s));
  }
  if (workspace == nullptr) TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return absl::OkStatus();
}

}  // namespace

absl::Status Mse(const Stream& stream, const float* fixed, const float* warped, Dims3 dims, float* loss,
                 float* grad_warped, Workspace* workspace, VoxelMask mask) {
  return MseImpl(stream, fixed, warped, dims, mask.mask != nullptr ? mask.count : dims.size(), loss, nullptr,
                 grad_warped, workspace, mask);
}

absl::Status MseSlab(const Stream& stream, const float* fixed, const float* warped, Dims3 own_dims,
                     int64_t total_voxels, double* slice_sums, float* grad_warped, Workspace* workspace) {
  return MseImpl(stream, fixed, warped, own_dims, total_voxels, nullptr, slice_sums, grad_warped, workspace);
}

}  // namespace cuda
}  // namespace registration
}  // namespace tessera
