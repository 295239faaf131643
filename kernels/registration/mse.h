// Mean squared error between a fixed image F and a warped image W:
//   loss = (1/N) sum_x (W(x) - F(x))^2,   dL/dW = 2 (W - F) / N.
// One pass: the gradient is written while the loss is reduced per z-slice in
// double (slice_sums.h; CUDA: one block per slice), then over the slices.
// Masked (issue 34, VoxelMask in types.h): the sums run over the voxels in
// the mask only and N = mask.count; dL/dW = 0 outside the mask.
#ifndef TESSERA_KERNELS_REGISTRATION_MSE_H_
#define TESSERA_KERNELS_REGISTRATION_MSE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "common/device.h"
#include "kernels/registration/types.h"
#include "kernels/registration/workspace.h"

namespace tessera {
namespace registration {

// `loss` (1 float) and `grad_warped` (dims voxels) may each be null; both
// live in the stream's backend memory. grad_warped is overwritten.
absl::Status Mse(const Stream& stream, const float* fixed, const float* warped, Dims3 dims, float* loss,
                 float* grad_warped, Workspace* workspace = nullptr, VoxelMask mask = {});

namespace cpu {
// Reference: returns the loss; grad_warped may be null.
template <typename T>
double Mse(const T* fixed, const T* warped, Dims3 dims, T* grad_warped, VoxelMask mask = {});
// The reference on own_dims.nz whole slices of a larger volume of
// total_voxels voxels (issue 39, slice_sums.h): slice_sums[k] = the sum of
// (W - F)^2 over slice k, grad_warped (may be null) = 2 (W - F) / total_voxels.
// Mse is this on the whole volume with loss = SumOfSlices / N, so a z-split
// gives the same bits.
void MseSlab(const float* fixed, const float* warped, Dims3 own_dims, int64_t total_voxels, double* slice_sums,
             float* grad_warped);
}  // namespace cpu

namespace cuda {
absl::Status Mse(const Stream& stream, const float* fixed, const float* warped, Dims3 dims, float* loss,
                 float* grad_warped, Workspace* workspace, VoxelMask mask = {});
// cpu::MseSlab on CUDA: slice_sums in device memory (own_dims.nz doubles, may
// be null). Per-slice sums (one block per slice, a fixed tree) added in
// ascending z by Mse: a z-split gives the unsharded CUDA bits.
absl::Status MseSlab(const Stream& stream, const float* fixed, const float* warped, Dims3 own_dims,
                     int64_t total_voxels, double* slice_sums, float* grad_warped, Workspace* workspace);
}  // namespace cuda

}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_MSE_H_
