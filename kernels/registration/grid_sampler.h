// Implicit composite grid sampler (the FFDP/FireANTs fused_grid_sampler):
//
//   out(x) = I(A x + t + u(x))     for every voxel x of an output grid,
//
// with trilinear interpolation (or nearest neighbour for label maps), computed
// in one pass without materializing the identity, affine or composite grids.
//
// Coordinates (PyTorch grid_sample / affine_grid with align_corners=True; see
// sampler_math.h): x is the normalized coordinate of the output voxel, by
// default in [-1, 1] per axis (voxel 0 at -1, voxel n-1 at +1); A x + t + u(x)
// is a normalized coordinate of the input image I, whose own extent (which may
// differ from the output's) maps to [-1, 1] the same way. Component 0 is x
// (the fastest axis), 1 is y, 2 is z: a PyTorch grid's last dimension. The
// affine is 12 floats, the 3x4 row-major [A | t] (types.h); u is a planar
// (nx, ny, nz, 3) field in normalized input units, defined on the output grid.
//
// Backends: Backend::kCpu runs the reference on host pointers (threaded over
// z-slabs); Backend::kCuda launches on the stream with device pointers. All
// pointers, including `affine` and `grad_affine`, live in the stream's
// backend memory, so an optimizer can keep A and t on the device.
#ifndef TESSERA_KERNELS_REGISTRATION_GRID_SAMPLER_H_
#define TESSERA_KERNELS_REGISTRATION_GRID_SAMPLER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "common/device.h"
#include "kernels/registration/sampler_math.h"
#include "kernels/registration/storage16.h"
#include "kernels/registration/types.h"
#include "kernels/registration/workspace.h"

namespace tessera {
namespace registration {

// Launch shape and index width of the CUDA sampler kernels, passed by value
// with every call (no process-wide setting, so concurrent jobs can tune
// differently). Every valid setting computes bit-identical results; the CPU
// reference ignores it. Defaults are the best measured on an H200
// (registration_kernels_bench --tune).
struct GridSamplerTuning {
  int forward_z = 8;        // output z-slices per forward thread: 1, 2, 4 or 8
  int backward_unroll = 2;  // unrolling of the backward z loop (8 slices): 1, 2 or 4
  int block_x = 32;         // threads of a 256-thread block along x: 32, 64, 128 or 256
  // The kernels use 32-bit index arithmetic when every index fits and 64-bit
  // otherwise; true forces the 64-bit path (tests cover it on small inputs).
  bool force_64bit_index = false;
  // Issue 37: each pair of x-adjacent image corners of an interior cell from
  // one aligned vector load (16 bytes of a float image, 8 of an fp16 one) when
  // both lie in it, plus a scalar load otherwise: about 5 instead of 8 gathers
  // per trilinear sample. Needs 32-bit indices and an aligned image pointer
  // (else ignored); same values either way.
  bool vector_loads = false;
};

// INVALID_ARGUMENT naming the field outside its allowed values.
absl::Status ValidateGridSamplerTuning(const GridSamplerTuning& tuning);

// What to sample and where; no outputs. T is float for the public API; the
// CPU reference is also instantiated for double (used by gradient checks).
template <typename T>
struct GridSampleArgsT {
  const T* image = nullptr;   // input I, image_dims, x-fastest
  Dims3 image_dims;
  const T* affine = nullptr;  // 12 values [A | t], row-major 3x4; nullptr = identity
  const T* disp = nullptr;    // planar (out_dims, 3) displacement u; nullptr = none
  Dims3 out_dims;
  Padding padding = Padding::kZeros;
  // Normalized coordinates of the first and last output voxel per axis. The
  // defaults give the whole [-1, 1] domain; a shard of a larger grid (FFDP's
  // x_bounds) passes its own sub-range instead, with no grid in memory.
  double grid_lo[3] = {-1.0, -1.0, -1.0};
  double grid_hi[3] = {1.0, 1.0, 1.0};
  // A z-slab of a larger grid (issue 39: the sharded stage's local slabs):
  // grid_nz > 0 makes out_dims slices [out_z0, out_z0 + out_dims.nz) of a
  // grid of grid_nz slices spanning grid_lo[2]..grid_hi[2], each voxel
  // sampled (and jittered) exactly as in the whole grid, bit for bit.
  int64_t grid_nz = 0;
  int64_t out_z0 = 0;
  // Nonzero: every output voxel is sampled at its own random sub-voxel offset
  // (voxel_jitter.h), the same for every sampler given the same key and grid,
  // on both backends (GridSample*, backward's dL/du and dL/dI; the backward
  // refuses grad_affine with a jitter). The unfused baseline ignores it.
  uint64_t voxel_jitter_key = 0;
};
using GridSampleArgs = GridSampleArgsT<float>;

// Outputs of the backward pass. Each may be null (not computed). Every
// non-null output is overwritten, not accumulated into.
template <typename T>
struct GridSampleGradsT {
  T* grad_disp = nullptr;    // planar (out_dims, 3): dL/du
  T* grad_affine = nullptr;  // 12 values: dL/d[A | t], same layout as affine
  T* grad_image = nullptr;   // image_dims: dL/dI (scatter; atomics on CUDA)
};
using GridSampleGrads = GridSampleGradsT<float>;

// out (out_dims voxels) = trilinear sample of the image at A x + t + u(x).
absl::Status GridSample(const Stream& stream, const GridSampleArgs& args, float* out,
                        GridSamplerTuning tuning = {});

// Given grad_out = dL/dout (out_dims voxels), the gradients selected in
// `grads`. The affine gradient is a sum over all output voxels: on CUDA it is
// reduced per block in double and then across blocks in a fixed order, so it
// is deterministic for a given size. grad_image, when requested, uses float
// atomics on CUDA (not bitwise deterministic). `workspace` (optional) holds
// the reduction partials; see workspace.h.
absl::Status GridSampleBackward(const Stream& stream, const GridSampleArgs& args, const float* grad_out,
                                const GridSampleGrads& grads, Workspace* workspace = nullptr,
                                GridSamplerTuning tuning = {});

// Nearest-neighbour sampling of an integer label map (no gradient). Ties
// round half to even, like PyTorch's mode='nearest'; zeros padding yields
// label 0 outside the input.
absl::Status GridSampleNearest(const Stream& stream, const int32_t* labels, const GridSampleArgs& args,
                               int32_t* out, GridSamplerTuning tuning = {});

// Mixed precision (issue 13's lean stage, storage16.h): the image stored in
// fp16 (`image`; args.image must be null), all arithmetic in float exactly as
// GridSample; float output.
absl::Status GridSampleHalfImage(const Stream& stream, const GridSampleArgs& args, const Half* image, float* out,
                                 GridSamplerTuning tuning = {});
// GridSampleBackward's dL/du alone for an fp16 image, each component rounded
// once to bf16 when stored (grad_disp: planar (out_dims, 3) BFloat16).
absl::Status GridSampleBackwardHalfImage(const Stream& stream, const GridSampleArgs& args, const Half* image,
                                         const float* grad_out, BFloat16* grad_disp, GridSamplerTuning tuning = {});

// Checks dimensions and pointers; the entry points above call it.
absl::Status ValidateGridSampleArgs(const GridSampleArgs& args, bool needs_image);

namespace cpu {

// Plain, multi-threaded reference implementations (host pointers).
template <typename T>
void GridSampleForward(const GridSampleArgsT<T>& args, T* out);
template <typename T>
void GridSampleBackward(const GridSampleArgsT<T>& args, const T* grad_out, const GridSampleGradsT<T>& grads);
void GridSampleNearest(const int32_t* labels, const GridSampleArgs& args, int32_t* out);
void GridSampleForwardHalfImage(const GridSampleArgs& args, const Half* image, float* out);
void GridSampleBackwardHalfImage(const GridSampleArgs& args, const Half* image, const float* grad_out,
                                 BFloat16* grad_disp);

}  // namespace cpu

namespace cuda {

// CUDA implementations (device pointers); defined only in CUDA builds.
// `tuning` has been validated by the caller.
absl::Status GridSampleForward(const Stream& stream, const GridSampleArgs& args, float* out,
                               const GridSamplerTuning& tuning);
absl::Status GridSampleBackward(const Stream& stream, const GridSampleArgs& args, const float* grad_out,
                                const GridSampleGrads& grads, Workspace* workspace, const GridSamplerTuning& tuning);
absl::Status GridSampleNearest(const Stream& stream, const int32_t* labels, const GridSampleArgs& args,
                               int32_t* out, const GridSamplerTuning& tuning);
absl::Status GridSampleForwardHalfImage(const Stream& stream, const GridSampleArgs& args, const Half* image,
                                        float* out, const GridSamplerTuning& tuning);
absl::Status GridSampleBackwardHalfImage(const Stream& stream, const GridSampleArgs& args, const Half* image,
                                         const float* grad_out, BFloat16* grad_disp, const GridSamplerTuning& tuning);

}  // namespace cuda

}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_GRID_SAMPLER_H_
