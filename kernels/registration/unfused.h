// UNFUSED baselines of the grid sampler and LNCC, for benchmarks only
// (bench/registration_kernels_bench.cc). They compute the same math the way
// a tensor library does it step by step, so the fused kernels' speed and
// memory can be compared in one binary on one GPU:
//
// UnfusedSampler (PyTorch affine_grid + add + grid_sample, align_corners=True):
//   base grid  [N, 4] homogeneous (x, y, z, 1), materialized once and kept;
//   grid       [N, 3] = base . theta^T by a cuBLAS GEMM, then += u (planar u);
//   out        = grid_sample(I, grid);
//   backward:  grad_grid [N, 3] (= dL/du, interleaved), then
//              dL/dtheta = grad_grid^T . base by a cuBLAS GEMM.
//   Device memory: 4N + 3N floats (+ 3N for the backward).
// UnfusedLncc (separable-convolution LNCC as in VoxelMorph/FastLNCC):
//   F^2, W^2, FW as separate volumes; each of the five inputs box-filtered by
//   three separate 1-D direct convolutions (w taps, out of place, two
//   temporaries); a cc volume and a reduction; backward: a, b, c volumes,
//   each box-filtered the same way, and a final combine.
//   Device memory: 17 volumes with the backward, 11 without.
// All memory goes through Buffer, so GetDeviceMemoryStats sees it. CUDA only:
// without CUDA, Create returns FAILED_PRECONDITION.
#ifndef TESSERA_KERNELS_REGISTRATION_UNFUSED_H_
#define TESSERA_KERNELS_REGISTRATION_UNFUSED_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/device.h"
#include "kernels/registration/grid_sampler.h"
#include "kernels/registration/types.h"

namespace tessera {
namespace registration {
namespace unfused {

class UnfusedSampler {
 public:
  static absl::StatusOr<std::unique_ptr<UnfusedSampler>> Create(const Stream& stream, Dims3 out_dims,
                                                                bool with_backward);
  ~UnfusedSampler();

  // Materializes the grid for args (affine required) and samples.
  absl::Status Forward(const GridSampleArgs& args, float* out);
  // Uses the grid of the last Forward. grad_grid() then holds dL/du
  // (interleaved [N, 3]); grad_affine (12 floats, device) receives dL/dtheta.
  absl::Status Backward(const GridSampleArgs& args, const float* grad_out, float* grad_affine);
  const float* grad_grid() const;
  size_t device_bytes() const;

  struct Impl;

 private:
  explicit UnfusedSampler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class UnfusedLncc {
 public:
  static absl::StatusOr<std::unique_ptr<UnfusedLncc>> Create(const Stream& stream, Dims3 dims, int window,
                                                             bool with_backward);
  ~UnfusedLncc();

  // loss: 1 float (device); grad may be null (then no backward).
  absl::Status Run(const float* fixed, const float* warped, double eps, float* loss, float* grad);
  size_t device_bytes() const;

  struct Impl;

 private:
  explicit UnfusedLncc(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Fills n floats of device memory with a hash-based uniform [lo, hi) pattern
// (for benchmark inputs; never zeros).
absl::Status FillUniform(const Stream& stream, float* data, int64_t n, uint32_t seed, float lo, float hi);

}  // namespace unfused
}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_UNFUSED_H_
