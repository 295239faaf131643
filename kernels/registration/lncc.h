// Local normalized cross-correlation (LNCC) loss between a fixed image F and
// a warped moving image W, with its exact gradient dL/dW, fused.
//
// Definition (the sum form of VoxelMorph/FireANTs): with a cubic window of
// w^3 voxels (w odd), zero padding outside the volume and n = w^3 fixed,
//   S_F, S_W, S_FF, S_WW, S_FW = box sums of F, W, F^2, W^2, F*W
//   cross = S_FW - S_F S_W / n
//   var_F = S_FF - S_F^2 / n,  var_W = S_WW - S_W^2 / n   (clamped at >= 0)
//   cc    = cross^2 / (var_F var_W + eps)
//   loss  = -(1/N) sum_x cc(x)                            (N = voxel count)
// Gradient: with a = dcc/dS_FW = 2 cross / D, b = dcc/dS_WW = -cross^2 var_F / D^2,
// c = dcc/dS_W = -(a S_F + 2 b S_W) / n (D = var_F var_W + eps), and the box
// being symmetric,
//   dL/dW(y) = -(1/N) [F(y) Box(a)(y) + 2 W(y) Box(b)(y) + Box(c)(y)].
// Box sums are separable sums accumulated in double (CPU: running sums along
// x and y, direct window sums along z so that a z-slab gives the same bits:
// lncc_cpu.cc); the per-voxel cc/a/b/c algebra is done in double too. The
// CPU loss sums cc per z-slice, then over slices (slice_sums.h).
//
// Memory (volume-sized float intermediates):
// - CUDA: 3 (a, b, c) when the gradient is requested, 0 for the loss alone.
//   The forward kernel marches along z over column tiles, computing the xy
//   box sums of the five products per slice through shared memory and the z
//   window sums from a w-slice ring, so the five box-sum volumes never exist;
//   the backward kernel box-filters a, b, c the same way and writes dL/dW.
//   Plus reduction partials (one double per xy tile, warp and z-slice, and
//   nz slice sums). Issue 39: the z window sums are taken directly and the
//   loss summed per slice (a fixed tree per slice and tile, tiles and slices
//   in order), so a z-slab (LnccSlab, the sharded LNCC) gives the unsharded
//   CUDA bits. Two kernels (LnccOptions::cuda_kernel, issue 37): the column
//   march (the default for windows 3, 5, 7, 9: each thread's z ring in
//   registers, direct float window sums) and the box march (32x8 tiles,
//   running x/y sums in shared memory, any window up to 25: the fallback).
//   Their values differ by float rounding only (bench/lncc_variants_bench).
//   Column march options (issue 37, bench/lncc_variants_bench times them side
//   by side): 16-byte aligned halo rows (cuda_aligned_rows: 16-byte cp.async
//   and float4 x taps, the same bits), 16-bit halos by 16-byte cp.async
//   (cuda_stage16: with its z sums from shared pair and quad sums, other
//   float rounding than the direct sums, the same slab bit-identity). Fixed
//   choices of the column march: 16-bit storage (LnccHalfFixed) moves two
//   16-bit values per 32-bit load or store where nx is even (the same bits);
//   the float epilogue takes 1 / D by the approximate reciprocal (lncc.cu:
//   ComputeLnccTermsF).
// - CPU reference: 5 (the box-sum volumes, reused for a, b, c), any window.
//
// Masked (issue 34, VoxelMask in types.h; ANTs' masked CC): only window
// centres x inside the mask contribute, loss = -(1/N) sum_{x in mask} cc(x)
// with N = mask.count; the local sums still read every voxel of x's window.
// The gradient is the same adjoint with a, b, c set to 0 at centres outside
// the mask, so dL/dW(y) is nonzero wherever y lies in the window of a centre
// inside the mask. No mask: the unmasked path, bit for bit.
#ifndef TESSERA_KERNELS_REGISTRATION_LNCC_H_
#define TESSERA_KERNELS_REGISTRATION_LNCC_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/device.h"
#include "kernels/registration/storage16.h"
#include "kernels/registration/types.h"
#include "kernels/registration/workspace.h"

namespace tessera {
namespace registration {

// The CUDA kernel (issue 37; benchmarks and tests pick one to compare them,
// the CPU backend ignores it). kBoxMarch: 32x8 tiles with the x and y running
// sums in shared memory and a shared-memory z ring (any window <= 25).
// kColumnMarch: each thread owns x0 + lane in two rows of a 32 x 16 tile
// and keeps their z ring in registers; direct x, y and z window sums in float,
// one barrier per slice (windows 3, 5, 7, 9; others fall back to
// kBoxMarch). Both keep issue 39's slab bit-identity. kDefault: kColumnMarch
// (1.8x the box march's speed at 512^3 on an H100) where it applies.
enum class LnccCudaKernel { kDefault, kBoxMarch, kColumnMarch };

// The cuda_* defaults are the fastest set measured side by side on an H100
// (issue 37, bench/lncc_variants_bench, w7 fwd+bwd at 512^3; float storage
// 5.21 -> 4.27 -> 3.14 ms, mixed 6.67 -> 4.53 -> 3.46 ms in the rounds up to
// 5; round 6, 2026-12-07: float 3.10 -> 2.85 ms with the approximate
// reciprocal, mixed 3.47 -> 3.18 ms with it and 2.99 ms with z pairs as well,
// against the box march's 9.86 / 11.11 ms in the same run). The float
// epilogue moves the loss by ~3.5e-6 relative, cuda_stage16's z pairs the
// mixed gradient's distance to the CPU reference from 1.82e-4 to 1.95e-4
// relative L2; the other options give the same bits. Options that never won
// there are gone (one row per thread, x pairs, the one-column x pass and the
// unshared y pass, 2 or 3 cp.async stages, a, b, c two slices ahead, a fixed
// block count, padded 16-bit rows: 3.46 vs 3.47 ms) or became fixed choices
// (above: the approximate reciprocal; z pairs with cuda_stage16 only, float
// storage 2.85 -> 2.90 / 3.43 ms with them; paired 16-bit accesses). The
// column march is two rows per thread, x quads, shared y terms and a 4-stage
// cp.async pipeline. Tests name every option.
struct LnccOptions {
  int window = 7;     // odd, >= 1 (CUDA: <= 25)
  double eps = 1e-5;  // added to var_F * var_W
  LnccCudaKernel cuda_kernel = LnccCudaKernel::kDefault;  // kColumnMarch where it supports the window
  // kColumnMarch: cc, a, b, c in float instead of double (with eps >=
  // FLT_MIN, the approximate reciprocal's need; below it the double one).
  bool cuda_float_epilogue = true;
  // kColumnMarch, window 7: halo tiles by cp.async (float storage; the mixed
  // forward without cuda_stage16: its float W, F in register words).
  bool cuda_async_copy = true;
  // kColumnMarch, window 7 (issue 37): halo rows in shared memory start at a
  // 16-byte boundary (x0 - 4, 40 floats), so float channels move by 16-byte
  // cp.async (a quarter of the copy instructions; needs nx % 4 == 0 and
  // 16-byte aligned volumes, else 4-byte copies) and the x pass reads its
  // taps as float4. The same bits.
  bool cuda_aligned_rows = true;
  // kColumnMarch, window 7, 16-bit storage with cuda_async_copy: the fp16 F
  // and bf16 a, b, c halos by 16-byte cp.async as well (into 16-bit tiles,
  // widened as the x pass reads them; with cuda_aligned_rows' layout for the
  // float W) instead of 32-bit words through registers, and the z window
  // sums from pair and quad sums shared by consecutive windows (4 adds per
  // quantity instead of 6: other float rounding, measured faster only on
  // this path; lncc.cu). Needs nx % 8 == 0 and 16-byte aligned volumes (else
  // the paths above, direct z sums).
  bool cuda_stage16 = true;
};

constexpr int kLnccMaxCudaWindow = 25;

class LnccWorkspace;  // below: the scratch a repeated caller keeps, for either backend

// `loss` (1 float) and `grad_warped` (dims voxels) may each be null (not
// computed); both live in the stream's backend memory. grad_warped is
// overwritten. The loss is reduced per block and then in a fixed order, so it
// is deterministic for a given size; on the CPU it is the reference's double
// rounded to float here. `workspace` (may be null: each call allocates and
// frees its own) is what a caller evaluating many times keeps between calls:
// a CUDA stream uses its reduction partials, a CPU stream its kept box-sum
// volumes (the same bits as without).
absl::Status Lncc(const Stream& stream, const float* fixed, const float* warped, Dims3 dims,
                  const LnccOptions& options, float* loss, float* grad_warped, LnccWorkspace* workspace = nullptr,
                  VoxelMask mask = {});

// As Lncc, with the three coefficient volumes a, b, c in caller memory
// `coefficients` (3 * dims.size() floats, stream memory: e.g. a vector field
// that is dead at this point of an iteration), so the call itself allocates
// only its reduction partials; grad_warped may be `warped` (each voxel's W is
// read before its gradient is written). The lean registration pipeline's
// entry point (issue 13).
absl::Status LnccWithCoefficients(const Stream& stream, const float* fixed, const float* warped, Dims3 dims,
                                  const LnccOptions& options, float* loss, float* grad_warped, float* coefficients,
                                  LnccWorkspace* workspace = nullptr, VoxelMask mask = {});

// Mixed precision (issue 13's lean stage, storage16.h): as
// LnccWithCoefficients with the fixed image stored in fp16 and a, b, c stored
// in bf16 (`coefficients`: 3 * dims.size() BFloat16, needed for the
// gradient on CUDA streams; the CPU reference ignores it); box sums and per-voxel algebra in double as above. bf16, not
// fp16, for a, b, c: b reaches ~1e7 where a window of W is nearly flat.
absl::Status LnccHalfFixed(const Stream& stream, const Half* fixed, const float* warped, Dims3 dims,
                           const LnccOptions& options, float* loss, float* grad_warped, BFloat16* coefficients,
                           LnccWorkspace* workspace = nullptr, VoxelMask mask = {});

absl::Status ValidateLnccArgs(const float* fixed, const float* warped, Dims3 dims, const LnccOptions& options);

namespace cpu {
// Reference (host pointers, threaded). Returns the loss; grad_warped may be null.
template <typename T>
double Lncc(const T* fixed, const T* warped, Dims3 dims, const LnccOptions& options, T* grad_warped,
            VoxelMask mask = {});
// The mixed-precision reference: a, b, c rounded to bf16 as the CUDA kernel
// stores them; grad_warped may be warped.
double LnccHalfFixed(const Half* fixed, const float* warped, Dims3 dims, const LnccOptions& options,
                     float* grad_warped, VoxelMask mask = {});
// The reference on a z-slab (issue 39, slice_sums.h): `dims` is the slab
// (own slices [own_lo, own_hi) with neighbours' slices around them), the
// window truncated (zero padding) at the slab's ends. slice_cc[k - own_lo]
// receives the sum of cc over own slice k; grad_warped (may be null) dL/dW on
// the own slices with N = total_voxels (the whole volume's count). Values on
// an own slice whose windows of windows (2 * (window / 2) slices each way)
// lie inside the slab are the whole-volume reference's bit for bit: Lncc is
// this with the whole volume as the slab, loss = -SumOfSlices / N.
void LnccSlab(const float* fixed, const float* warped, Dims3 dims, int64_t own_lo, int64_t own_hi,
              const LnccOptions& options, int64_t total_voxels, double* slice_cc, float* grad_warped);

// Lncc<float> and LnccHalfFixed (whole volumes) for a caller that evaluates
// many times (the registration stages' iterations; issue 38): the five
// box-sum volumes live here between calls instead of being allocated, zeroed
// and faulted in per call (~40 % of a 4.4-Mvoxel call), and the box sums of
// F and F^2, which depend on the fixed image alone, are kept and reused
// while the fixed pointer, dims and window stay the same. Same bits as the
// functions above. A caller that changes a fixed image's values in place
// calls ForgetFixed. Holds Bytes(dims) of host memory (tracked) after a call
// on `dims` until Release; growing allocates anew (and forgets the sums).
class LnccScratch {
 public:
  // Five float volumes of dims.size(), each 256-byte aligned.
  static int64_t Bytes(Dims3 dims);
  absl::StatusOr<double> Lncc(const float* fixed, const float* warped, Dims3 dims, const LnccOptions& options,
                              float* grad_warped, VoxelMask mask = {});
  // grad_warped may be warped, as in LnccHalfFixed.
  absl::StatusOr<double> LnccHalfFixed(const Half* fixed, const float* warped, Dims3 dims, const LnccOptions& options,
                                       float* grad_warped, VoxelMask mask = {});
  void ForgetFixed() { fixed_ready_ = false; }
  size_t capacity() const { return memory_.capacity(); }
  void Release();

 private:
  // The memory for `dims`; clears fixed_ready_ unless it holds this fixed image's sums.
  absl::StatusOr<void*> Prepare(const void* fixed, const float* warped, Dims3 dims, const LnccOptions& options,
                                VoxelMask mask);
  void Kept(const void* fixed, Dims3 dims, const LnccOptions& options);
  // Lncc (float F, float a, b, c) and LnccHalfFixed (fp16 F, bf16 a, b, c):
  // Prepare, the fused pass on the carved volumes, Kept.
  template <typename FixedT, typename CoefT>
  absl::StatusOr<double> Run(const FixedT* fixed, const float* warped, Dims3 dims, const LnccOptions& options,
                             float* grad_warped, VoxelMask mask);

  Workspace memory_;
  bool fixed_ready_ = false;
  const void* fixed_ = nullptr;
  Dims3 dims_{};
  int window_ = 0;
};
}  // namespace cpu

// What a caller that evaluates LNCC many times (the registration stages'
// metrics) keeps between the dispatchers' calls, one object for both
// backends so that callers do not branch on the stream: a call on a CUDA
// stream uses `device`, one on a CPU stream `host`, and leaves the other
// untouched (so it holds no memory).
class LnccWorkspace {
 public:
  Workspace device;       // CUDA: the reduction partials
  cpu::LnccScratch host;  // CPU: the five volumes and the fixed sums (cpu::LnccScratch::Bytes)

  // A new fixed image at an address that held another (the next pyramid
  // level): the CPU's kept fixed sums are stale.
  void ForgetFixed() { host.ForgetFixed(); }
  void Release() {
    device.Release();
    host.Release();
  }
};

namespace cuda {
absl::Status Lncc(const Stream& stream, const float* fixed, const float* warped, Dims3 dims,
                  const LnccOptions& options, float* loss, float* grad_warped, Workspace* workspace,
                  float* coefficients = nullptr, VoxelMask mask = {});
absl::Status LnccHalfFixed(const Stream& stream, const Half* fixed, const float* warped, Dims3 dims,
                           const LnccOptions& options, float* loss, float* grad_warped, BFloat16* coefficients,
                           Workspace* workspace, VoxelMask mask = {});
// cpu::LnccSlab on CUDA (issue 39): the fused kernel on a z-slab `dims`;
// slice_cc (device memory, dims.nz doubles, may be null) receives every slab
// slice's cc sum (the caller takes its own slices'), grad_warped (may be
// null) dL/dW with N = total_voxels. Every value of an own slice whose
// windows of windows lie inside the slab is the whole-volume kernel's bit for
// bit (cc summed per slice and xy tile in a fixed tree, z window sums taken
// directly); cuda::Lncc is this on the whole volume, loss = -SumOfSlices / N.
absl::Status LnccSlab(const Stream& stream, const float* fixed, const float* warped, Dims3 dims,
                      const LnccOptions& options, int64_t total_voxels, double* slice_cc, float* grad_warped,
                      Workspace* workspace);
}  // namespace cuda

}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_LNCC_H_
