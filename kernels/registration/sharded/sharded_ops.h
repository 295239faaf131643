// The registration kernels on a z-sharded volume (slab.h): every rank calls
// the same function with its own layout and local arrays, and gets the result
// the unsharded kernel gives on the whole volume, restricted to its own
// slices (window operations) or combined over ranks (losses, summaries).
//
// Arrays are float32 local arrays (layout.LocalShape(C)) in the memory of
// `stream`'s backend. Window operations exchange the halos of the arrays
// they filter themselves; the fixed image never changes, so its halos are
// filled once by the caller (ExtractSlab, or one HaloExchange). Gradients and
// filtered outputs are defined on the own slices; halo slices of outputs hold
// unspecified values.
//
// Communication per call (H ranks, slice = nx * ny floats, nz = global slices):
//   smoothing      2 * radius slices per component per inner boundary
//   LNCC           window - 1 slices of the warped image per inner boundary;
//                  nz doubles reduced (per-slice sums, both backends)
//   MSE            nz doubles reduced (per-slice sums, both backends)
//   Jacobian       1 slice x 3 components per inner boundary, 4 doubles reduced
//   Mattes MI      CPU: 2 B^2 doubles reduced (the fixed-point joint
//                  histogram, each int64 bin as two exact doubles); CUDA: B^2
//                  doubles. The row and column sums are the marginals, so the
//                  seed's B^2 + 2B values need not travel; independent of N.
//
// Bit-identity (issue 39): on CPU streams the losses, gradients and MI
// histograms are the unsharded CPU kernels' bits for any number of ranks
// (per-z-slice sums, slice_sums.h; LNCC's z window sums taken directly;
// MI's histogram in exact fixed point). CUDA streams: LNCC and MSE are the
// unsharded CUDA kernels' bits for any number of ranks (the same per-slice
// blocking on the device: lncc.h cuda::LnccSlab, mse.h cuda::MseSlab). MI on
// CUDA still forms per-block float histograms with float atomics (not
// associative), so it matches the unsharded CUDA kernel only to the
// tolerances below; its stop decisions are not yet made independent of that.
//
// Backends: every operation runs on CPU and CUDA streams. Smoothing, MSE,
// the Jacobian and LNCC call the single-volume kernels' slab forms on the
// local arrays (per-slice sums of the own slices). MI: the histogram and gradient
// steps on the rank's own slices (sharded_mi.cc; CUDA: sharded_mi.cu), the
// finalize on the host from the all-reduced histogram.
//
// CUDA sharded vs CUDA unsharded (sharded_ops_gpu_test.cc): LNCC and MSE
// bit for bit (loss and gradient); MI within mutual_info.h's CUDA-vs-CPU
// tolerances.
#ifndef TESSERA_KERNELS_REGISTRATION_SHARDED_SHARDED_OPS_H_
#define TESSERA_KERNELS_REGISTRATION_SHARDED_SHARDED_OPS_H_

#include <array>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "common/ndarray.h"
#include "kernels/parallel/communicator.h"
#include "kernels/parallel/slab.h"
#include "kernels/registration/displacement_units.h"
#include "kernels/registration/jacobian.h"
#include "kernels/registration/lncc.h"
#include "kernels/registration/mutual_info.h"
#include "kernels/registration/workspace.h"

namespace tessera {
namespace parallel {

// Halo (slices) each operation needs on every inner side of a slab.
int64_t SmoothingHalo(double sigma_z_voxels);           // the z kernel radius, ceil(3 sigma)
inline int64_t LnccHalo(int window) { return window - 1; }  // windows of windows (gradient)
inline constexpr int64_t kJacobianHalo = 1;             // central differences

// GaussianSmooth (kernels/registration/gaussian_smooth.h) of a local volume or
// planar field in place, after a halo exchange. INVALID_ARGUMENT when the
// layout's halos are narrower than SmoothingHalo(sigma[2]).
absl::Status ShardedGaussianSmooth(Communicator& comm, const SlabLayout& layout, NDArray& local,
                                   const std::array<double, 3>& sigma_voxels, const Stream& stream);

// The whole volume's sum of a quantity summed per z-slice (issue 39,
// kernels/registration/slice_sums.h): own_slice_sums[k] is the sum over own
// slice z_begin + k. All-reduces a vector of layout.global.nz doubles that is
// zero off the own slices (exact in any reduction order: each element has one
// nonzero term) and returns its SumOfSlices, on every rank: the unsharded
// reference's bits for any number of ranks. Collective.
absl::StatusOr<double> AllReduceSliceSums(Communicator& comm, const SlabLayout& layout, const double* own_slice_sums,
                                          const Stream& stream);

// Mse (mse.h) over the whole volume: returns the global loss; grad_warped
// (optional, local shape) receives dL/dW = 2 (W - F) / N on the own slices.
// The unsharded reference's bits on CPU streams, the unsharded CUDA kernel's
// on CUDA streams (per-slice sums, AllReduceSliceSums).
absl::StatusOr<double> ShardedMse(Communicator& comm, const SlabLayout& layout, const NDArray& fixed,
                                  const NDArray& warped, NDArray* grad_warped, const Stream& stream);

// Lncc (lncc.h) over the whole volume: the global loss and, optionally, dL/dW
// on the own slices. Exchanges the warped halos (so `warped` is written);
// `fixed` must have its halos filled. Halos >= LnccHalo(window). workspace
// (CUDA, optional): holds the fused kernel's a, b, c (3 local volumes) across
// calls instead of an allocation per call.
absl::StatusOr<double> ShardedLncc(Communicator& comm, const SlabLayout& layout, const NDArray& fixed,
                                   NDArray& warped, const registration::LnccOptions& options, NDArray* grad_warped,
                                   const Stream& stream, registration::Workspace* workspace = nullptr);

// JacobianDeterminant (jacobian.h) of a local planar displacement (halos >= 1,
// exchanged here): the summary over the whole volume and, optionally, det J
// on the own slices of `det` (local volume shape). kNormalized fields are
// converted with the global extents (a copy of the local field).
absl::StatusOr<registration::JacobianSummary> ShardedJacobian(
    Communicator& comm, const SlabLayout& layout, NDArray& displacement, NDArray* det, const Stream& stream,
    registration::DisplacementUnits units = registration::DisplacementUnits::kVoxels);

// MattesMutualInformation (mutual_info.h) over the whole volume: each rank
// forms the joint Parzen histogram of its own voxels, the histograms are
// summed over ranks (B^2 doubles), and every rank evaluates MI and the
// gradient table from the global histogram, then dLoss/dW on its own slices
// (grad optional). mask: optional uint8 local array (nonzero = used).
absl::StatusOr<registration::MattesMiResult> ShardedMattesMi(Communicator& comm, const SlabLayout& layout,
                                                             const NDArray& fixed, const NDArray& warped,
                                                             const NDArray* mask,
                                                             const registration::MattesMiOptions& options,
                                                             NDArray* grad, const Stream& stream);

}  // namespace parallel
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_SHARDED_SHARDED_OPS_H_
