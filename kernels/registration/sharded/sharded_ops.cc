// Sharded smoothing, MSE and Jacobian: halo exchange, then the existing
// kernels on the local arrays; results restricted to the own slices and
// scalars combined over ranks. (LNCC: sharded_lncc.cc; MI: sharded_mi.cc.)
#include "kernels/registration/sharded/sharded_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/status.h"
#include "kernels/registration/sharded/sharded_internal.h"
#include "kernels/registration/field_ops.h"
#include "kernels/registration/gaussian_smooth.h"
#include "kernels/registration/mse.h"
#include "kernels/registration/slice_sums.h"

namespace tessera {
namespace parallel {

using registration::DisplacementUnits;
using registration::JacobianSummary;

int64_t SmoothingHalo(double sigma_z_voxels) {
  return static_cast<int64_t>(registration::GaussianTaps(sigma_z_voxels).size() / 2);
}

absl::Status ShardedGaussianSmooth(Communicator& comm, const SlabLayout& layout, NDArray& local,
                                   const std::array<double, 3>& sigma_voxels, const Stream& stream) {
  TESSERA_RETURN_IF_ERROR(sharded_internal::CheckHalo(layout, SmoothingHalo(sigma_voxels[2]), "Gaussian smoothing"));
  TESSERA_RETURN_IF_ERROR(HaloExchange(comm, layout, local, stream));
  // x and y passes are slice-local; the z pass of an own slice reads only
  // slices within the radius, all present: the same sums as unsharded.
  return registration::GaussianSmooth(local, &local, sigma_voxels, stream);
}

absl::StatusOr<double> AllReduceSliceSums(Communicator& comm, const SlabLayout& layout, const double* own_slice_sums,
                                          const Stream& stream) {
  std::vector<double> slices(static_cast<size_t>(layout.global.nz), 0.0);
  std::copy(own_slice_sums, own_slice_sums + layout.own_nz(), slices.begin() + layout.z_begin);
  TESSERA_RETURN_IF_ERROR(AllReduceHostVector(comm, slices.data(), slices.size(), ReduceOp::kSum, stream));
  return registration::SumOfSlices(slices.data(), layout.global.nz);
}

absl::StatusOr<double> ShardedMse(Communicator& comm, const SlabLayout& layout, const NDArray& fixed,
                                  const NDArray& warped, NDArray* grad_warped, const Stream& stream) {
  TESSERA_RETURN_IF_ERROR(sharded_internal::CheckLocal(fixed, layout, 1, stream, "fixed"));
  TESSERA_RETURN_IF_ERROR(sharded_internal::CheckLocal(warped, layout, 1, stream, "warped"));
  if (grad_warped != nullptr) {
    TESSERA_RETURN_IF_ERROR(sharded_internal::CheckLocal(*grad_warped, layout, 1, stream, "grad_warped"));
  }
  const int64_t off = layout.own_offset();
  const float* f = fixed.data<float>() + off;
  const float* w = warped.data<float>() + off;
  float* g = grad_warped != nullptr ? grad_warped->data<float>() + off : nullptr;
  const double n = static_cast<double>(layout.global.size());
  if (stream.backend() == Backend::kCpu) {
    // The reference's per-slice sums and gradient (2 (W - F) / N with the
    // whole volume's N): the unsharded bits (slice_sums.h).
    std::vector<double> own(static_cast<size_t>(layout.own_nz()), 0.0);
    registration::cpu::MseSlab(f, w, layout.own_dims(), layout.global.size(), own.data(), g);
    TESSERA_ASSIGN_OR_RETURN(const double total, AllReduceSliceSums(comm, layout, own.data(), stream));
    return total / n;
  }
#if TESSERA_WITH_CUDA
  // The same blocking on the device (mse.cu: one block per slice): the
  // unsharded CUDA kernel's per-slice sums and gradient bits.
  const size_t bytes = sizeof(double) * static_cast<size_t>(layout.own_nz());
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> sums, Buffer::Allocate(MemoryKind::kDevice, bytes, stream.ordinal()));
  registration::Workspace workspace;
  TESSERA_RETURN_IF_ERROR(registration::cuda::MseSlab(stream, f, w, layout.own_dims(), layout.global.size(),
                                                      static_cast<double*>(sums->data()), g, &workspace));
  std::vector<double> own(static_cast<size_t>(layout.own_nz()), 0.0);
  TESSERA_RETURN_IF_ERROR(CopyBytes(own.data(), MemoryKind::kHost, sums->data(), MemoryKind::kDevice, bytes, stream));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  TESSERA_ASSIGN_OR_RETURN(const double total, AllReduceSliceSums(comm, layout, own.data(), stream));
  return total / n;
#else
  return absl::FailedPreconditionError("sharded MSE on a CUDA stream in a build without CUDA");
#endif
}

absl::StatusOr<JacobianSummary> ShardedJacobian(Communicator& comm, const SlabLayout& layout, NDArray& displacement,
                                                NDArray* det, const Stream& stream, DisplacementUnits units) {
  TESSERA_RETURN_IF_ERROR(sharded_internal::CheckLocal(displacement, layout, 3, stream, "displacement"));
  TESSERA_RETURN_IF_ERROR(sharded_internal::CheckHalo(layout, kJacobianHalo, "Jacobian"));
  if (det != nullptr) TESSERA_RETURN_IF_ERROR(sharded_internal::CheckLocal(*det, layout, 1, stream, "det"));
  TESSERA_RETURN_IF_ERROR(HaloExchange(comm, layout, displacement, stream));
  const NDArray* field = &displacement;
  NDArray in_voxels;
  if (units == DisplacementUnits::kNormalized) {
    // The kernel would convert z with the local extent; use the global one.
    const MemoryKind kind = displacement.memory_kind();
    TESSERA_ASSIGN_OR_RETURN(in_voxels, displacement.CopyTo(kind, stream, displacement.ordinal()));
    const Dims3 g = layout.global;
    auto half = [](int64_t n) { return n > 1 ? 0.5f * static_cast<float>(n - 1) : 0.f; };
    TESSERA_RETURN_IF_ERROR(registration::ScaleComponents(in_voxels, {half(g.nx), half(g.ny), half(g.nz)}, stream));
    field = &in_voxels;
  }
  NDArray local_det;
  if (det != nullptr) {
    local_det = *det;
  } else {
    TESSERA_ASSIGN_OR_RETURN(local_det, NDArray::Allocate(layout.LocalShape(1), DType::kFloat32,
                                                          displacement.memory_kind(), displacement.ordinal()));
  }
  TESSERA_RETURN_IF_ERROR(
      registration::JacobianDeterminant(*field, &local_det, stream, DisplacementUnits::kVoxels).status());
  // The kernel's own summary includes the halo slices: summarise the own ones.
  std::vector<float> own(layout.own_voxels());
  TESSERA_RETURN_IF_ERROR(CopyBytes(own.data(), MemoryKind::kHost, local_det.data<float>() + layout.own_offset(),
                                    local_det.memory_kind(), own.size() * sizeof(float), stream));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  double counts[2] = {static_cast<double>(own.size()), 0.0};  // voxels, det <= 0
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (float d : own) {
    if (d <= 0.f) counts[1] += 1;
    lo = std::min(lo, static_cast<double>(d));
    hi = std::max(hi, static_cast<double>(d));
  }
  TESSERA_ASSIGN_OR_RETURN(double voxels, AllReduceHostScalar(comm, counts[0], ReduceOp::kSum, stream));
  TESSERA_ASSIGN_OR_RETURN(double folds, AllReduceHostScalar(comm, counts[1], ReduceOp::kSum, stream));
  TESSERA_ASSIGN_OR_RETURN(double min_det, AllReduceHostScalar(comm, lo, ReduceOp::kMin, stream));
  TESSERA_ASSIGN_OR_RETURN(double max_det, AllReduceHostScalar(comm, hi, ReduceOp::kMax, stream));
  JacobianSummary s;
  s.voxels = static_cast<int64_t>(voxels);
  s.nonpositive = static_cast<int64_t>(folds);
  s.min_det = min_det;
  s.max_det = max_det;
  return s;
}

}  // namespace parallel
}  // namespace tessera
