// Mattes mutual information between a fixed image F and a warped (moving)
// image W, with Parzen windowing, and its gradient dLoss/dW per voxel.
// Loss = -MI. CPU reference in mutual_info_cpu.cc (also the CPU backend);
// CUDA in mutual_info.cu (IO-aware: O(1) extra device memory in N).
//
// Definition (B = options.bins, bin centres at integer positions 0..B-1):
//   x = clamp((v - min) / (max - min), 0, 1)      per image, its own min/max
//   t = 1 + x * (B - 4)                            continuous bin coordinate in [1, B-3]
//   warped Parzen weight   w_W(b; t) = beta3(b - t)   (cubic B-spline, support |b - t| < 2)
//   fixed Parzen weight    w_F(a; t) = beta3(a - t)   (kCubicBSpline, the default)
//                                   or [a == round(t)] (kBox, ITK v4 Mattes' choice for the fixed image)
//   H(a, b)  = sum_{k in mask} w_F(a; tF_k) w_W(b; tW_k)     joint histogram (B x B)
//   P        = H / sum H,  pF(a) = sum_b P(a, b),  pW(b) = sum_a P(a, b)
//   MI       = sum_{P(a,b) > 0} P(a, b) log(P(a, b) / (pF(a) pW(b)))     (nats)
// Both kernels are partitions of unity, so sum H = number of voxels in the
// mask and the marginals equal the 1-D Parzen histograms.
//
// Gradient (with G(a, b) = log(P(a, b) / (pF(a) pW(b))), 0 where P = 0):
//   dLoss/dW_k = -(1 / sum H) * dt/dW * sum_{a,b} G(a, b) w_F(a; tF_k) d/dt w_W(b; tW_k)
// with dt/dW = (B - 4) / (max_W - min_W) for min_W < W_k < max_W and 0 when
// W_k is clamped (outside or on the window). Voxels outside the mask get 0.
// The terms of dP that do not depend on G's (a, b) shape cancel exactly
// because sum_b d/dt w_W(b; t) = 0.
//
// CUDA implementation (mutual_info.cu), three launches, one host sync; the
// steps are exposed in mutual_info_cuda_steps.h (the sharded MI all-reduces
// the histogram between 1 and 2):
//   1. histogram: a fixed-point histogram (each voxel's Parzen products
//      rounded to integer multiples of 2^-24, mi_cuda::kHistogramBits; the
//      CPU reference's is finer, 2^-42 at 1M voxels), accumulated per block
//      in SHARED memory as 64-bit integers (per-warp copies, runs of equal
//      window position merged in 32-bit registers, warp-uniform windows
//      reduced by 32-bit shuffles first) and added into one global B x B
//      histogram by integer atomics; 2. finalize (one block): P from the integers, the marginals
//      as P's row/column sums (exactly the 1-D Parzen histograms, so they are
//      not accumulated separately), MI, and the table T(a, b) = -G(a, b) dt/dW
//      / sum H (B x B floats); 3. gradient (only when `grad` is given):
//      recomputes each voxel's Parzen weights and their derivatives on the fly
//      and contracts them with T held in shared memory.
//   Device scratch is exactly MattesMiScratchBytes(bins, ordinal):
//      (B^2 64-bit bins, 256-byte aligned) + (B^2 floats of T, 256-byte
//   aligned) + 256 bytes for the result: 12.5 KiB at B = 32, independent of N
//   and of the GPU. Nothing else is allocated; the gradient is written into
//   the caller's `grad`.
//
// Tolerance CUDA vs CPU (mutual_info_test.cc): MI within 1e-4 * max(1, MI);
// gradient per voxel within 2e-3 * max|grad| + 1e-5 * (B - 4) / ((max_W -
// min_W) * sum H); with kBox, voxels whose fixed bin coordinate is within 1e-4
// of a bin edge may land in the neighbouring bin (float vs double) and differ.
// Determinism (issue 39): integer sums are exact in any order, so the
// histogram, MI and gradient are the same bits from run to run and however
// the voxels are split over blocks or shards.
//
// Measured on an H100 (2026-12-06, bench/registration_mi_bench, 32 bins, fwd
// + bwd): 0.45 ms at 181x217x181, 1.9 ms at 301x370x316, 7.6 ms at 512^3
// (forward alone 6.9 ms), 12.5 KiB extra; the float-atomic histogram it
// replaced (not deterministic) took 0.39 / 1.6 / 6.5 ms; the unfused baseline
// (mutual_info_unfused.h) takes 4.7 / 18.7 / 70.6 ms and 3.4 / 16.8 / 64 GiB.
#ifndef TESSERA_KERNELS_REGISTRATION_MUTUAL_INFO_H_
#define TESSERA_KERNELS_REGISTRATION_MUTUAL_INFO_H_

#include <cstddef>

#include "absl/status/statusor.h"
#include "common/buffer.h"
#include "common/device.h"
#include "common/ndarray.h"

namespace tessera {
namespace registration {

// Parzen window used for the fixed image (the warped image always uses the
// cubic B-spline, which the gradient needs).
enum class ParzenKernel { kCubicBSpline, kBox };

inline constexpr int kMattesMiMinBins = 8;   // the cubic window needs B >= 5; fewer bins are useless
inline constexpr int kMattesMiMaxBins = 64;  // B x B per-warp histogram copies must fit in shared memory

struct MattesMiOptions {
  int bins = 32;                                          // B, in [kMattesMiMinBins, kMattesMiMaxBins]
  float fixed_min = 0.f;                                  // F intensity mapped to x = 0 (lower values clamp)
  float fixed_max = 1.f;                                  // F intensity mapped to x = 1; must exceed fixed_min
  float warped_min = 0.f;                                 // same for W
  float warped_max = 1.f;
  ParzenKernel fixed_kernel = ParzenKernel::kCubicBSpline;  // fixed image's Parzen window
};

struct MattesMiResult {
  double mutual_information = 0;  // MI in nats (>= 0); 0 when the mask is empty
  double loss = 0;                // -mutual_information
  double total_weight = 0;        // sum H: voxels in the mask (CUDA: up to float rounding)
};

// MattesMiScratchBytes() is the exact device scratch a CUDA call needs on GPU
// `ordinal` (see the file comment); 0 bytes is never returned. FAILED_PRECONDITION
// without CUDA, INVALID_ARGUMENT for bins out of range.
absl::StatusOr<size_t> MattesMiScratchBytes(int bins, int ordinal = 0);

// MattesMutualInformation() computes MI(F, W) and, when `grad` is not null,
// dLoss/dW (loss = -MI) into *grad.
//   fixed, warped: float32, same shape (any rank; treated as flat arrays).
//   mask: null, or uint8 of the same shape (nonzero = voxel used).
//   grad: null, or a preallocated float32 array of the same shape; every
//     element is written (0 outside the mask). Must not alias the inputs.
//   stream: CPU stream with host/pinned arrays (multi-threaded CPU reference),
//     or CUDA stream with device arrays on its GPU. The call returns after the
//     stream has finished the work (the MI value is copied to the host).
//   scratch: optional device buffer of >= MattesMiScratchBytes() bytes on the
//     stream's GPU (reuse it across iterations); null allocates one per call.
//     Ignored on the CPU stream.
// Inputs are assumed finite. Errors: INVALID_ARGUMENT (shapes, dtypes,
// residency, options), FAILED_PRECONDITION (CUDA stream without CUDA),
// RESOURCE_EXHAUSTED / INTERNAL from CUDA.
absl::StatusOr<MattesMiResult> MattesMutualInformation(const NDArray& fixed, const NDArray& warped,
                                                       const NDArray* mask, const MattesMiOptions& options,
                                                       NDArray* grad, const Stream& stream,
                                                       Buffer* scratch = nullptr);

// The CPU reference itself (host arrays, already validated by the caller of
// MattesMutualInformation, or by tests).
MattesMiResult MattesMutualInformationCpu(const NDArray& fixed, const NDArray& warped, const NDArray* mask,
                                          const MattesMiOptions& options, NDArray* grad);

}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_MUTUAL_INFO_H_
