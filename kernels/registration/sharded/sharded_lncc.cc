// Sharded LNCC (lncc.h's definition).
//
// CPU: the reference itself on the local slab (lncc.h LnccSlab: own slices
// plus window - 1 halo slices per inner side; zero padding only at the
// volume's own ends, exactly as the unsharded kernel; z window sums taken
// directly, so they do not depend on where the slab starts): cc summed per
// own slice, the per-slice sums all-reduced as a vector of nz doubles
// (AllReduceSliceSums), and dL/dW on the own slices: the unsharded bits.
//
// CUDA: the same on the device (lncc.h cuda::LnccSlab: the fused kernel on the
// local slab with per-slice cc sums and z window sums taken directly), the
// own slices' sums all-reduced the same way: the unsharded CUDA bits.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/status.h"
#include "kernels/registration/sharded/sharded_internal.h"
#include "kernels/registration/sharded/sharded_ops.h"
#include "kernels/registration/lncc.h"
#include "kernels/registration/lncc_math.h"

namespace tessera {
namespace parallel {
namespace {

absl::StatusOr<double> ShardedLnccCuda(Communicator& comm, const SlabLayout& layout, const NDArray& fixed,
                                       const NDArray& warped, const registration::LnccOptions& options,
                                       NDArray* grad_warped, const Stream& stream,
                                       registration::Workspace* workspace) {
#if TESSERA_WITH_CUDA
  if (options.window > registration::kLnccMaxCudaWindow) {
    return absl::InvalidArgumentError(absl::StrCat("sharded LNCC (CUDA): window ", options.window,
                                                   " exceeds the maximum of ", registration::kLnccMaxCudaWindow));
  }
  const Dims3 d = layout.local_dims();
  const float* F = fixed.data<float>();
  const float* W = warped.data<float>();
  float* G = grad_warped != nullptr ? grad_warped->data<float>() : nullptr;
  const size_t bytes = sizeof(double) * static_cast<size_t>(d.nz);
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> sums, Buffer::Allocate(MemoryKind::kDevice, bytes, stream.ordinal()));
  // a, b, c in the workspace (or allocated and freed by the call).
  TESSERA_RETURN_IF_ERROR(registration::cuda::LnccSlab(stream, F, W, d, options, layout.global.size(),
                                                       static_cast<double*>(sums->data()), G, workspace));
  std::vector<double> own(static_cast<size_t>(layout.own_nz()), 0.0);
  TESSERA_RETURN_IF_ERROR(CopyBytes(own.data(), MemoryKind::kHost, static_cast<double*>(sums->data()) + layout.halo_lo,
                                    MemoryKind::kDevice, own.size() * sizeof(double), stream));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  TESSERA_ASSIGN_OR_RETURN(const double total, AllReduceSliceSums(comm, layout, own.data(), stream));
  return -total / static_cast<double>(layout.global.size());
#else
  (void)comm, (void)layout, (void)fixed, (void)warped, (void)options, (void)grad_warped, (void)stream,
      (void)workspace;
  return absl::FailedPreconditionError("sharded LNCC on a CUDA stream in a build without CUDA");
#endif
}

}  // namespace

absl::StatusOr<double> ShardedLncc(Communicator& comm, const SlabLayout& layout, const NDArray& fixed,
                                   NDArray& warped, const registration::LnccOptions& options, NDArray* grad_warped,
                                   const Stream& stream, registration::Workspace* workspace) {
  TESSERA_RETURN_IF_ERROR(sharded_internal::CheckLocal(fixed, layout, 1, stream, "fixed"));
  TESSERA_RETURN_IF_ERROR(sharded_internal::CheckLocal(warped, layout, 1, stream, "warped"));
  if (grad_warped != nullptr) {
    TESSERA_RETURN_IF_ERROR(sharded_internal::CheckLocal(*grad_warped, layout, 1, stream, "grad_warped"));
  }
  if (options.window < 1 || options.window % 2 == 0) {
    return absl::InvalidArgumentError(absl::StrCat("LNCC window must be odd and >= 1, got ", options.window));
  }
  TESSERA_RETURN_IF_ERROR(sharded_internal::CheckHalo(layout, LnccHalo(options.window), "LNCC"));
  TESSERA_RETURN_IF_ERROR(HaloExchange(comm, layout, warped, stream));
  if (stream.backend() == Backend::kCuda) {
    return ShardedLnccCuda(comm, layout, fixed, warped, options, grad_warped, stream, workspace);
  }

  // The reference on the local slab (lncc.h LnccSlab): per-slice cc sums of
  // the own slices and dL/dW there, the unsharded bits (the halos, >= window
  // - 1, hold every window of windows of an own slice).
  const int64_t own_lo = layout.halo_lo;
  std::vector<double> own(static_cast<size_t>(layout.own_nz()), 0.0);
  registration::cpu::LnccSlab(fixed.data<float>(), warped.data<float>(), layout.local_dims(), own_lo,
                              own_lo + layout.own_nz(), options, layout.global.size(), own.data(),
                              grad_warped != nullptr ? grad_warped->data<float>() : nullptr);
  TESSERA_ASSIGN_OR_RETURN(const double total, AllReduceSliceSums(comm, layout, own.data(), stream));
  return -total / static_cast<double>(layout.global.size());
}

}  // namespace parallel
}  // namespace tessera
