// Sharded Mattes MI: mutual_info.h's definition with the joint histogram as
// the one quantity that crosses ranks (FFDP's weighted all-reduce: P = sum_h
// (N_h / N) H_h / N_h = sum_h H_h / N; the marginals are its row and column
// sums, so B^2 values travel, independent of N). Every rank finalizes the
// global histogram with the CPU reference's own step (mi_cpu::Finalize: B^2
// work, on the host) and takes the gradient of its own slices from the table.
// CPU streams: the reference's histogram and gradient steps
// (mutual_info_cpu_steps.h), the histogram in exact fixed point so the
// result is the unsharded one bit for bit (issue 39). CUDA streams: their device counterparts
// (sharded_mi.cu); the histogram is all-reduced in device memory (NCCL reads
// it there; the in-process communicator stages it through the host).
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/status.h"
#include "kernels/parallel/sharded_internal.h"
#include "kernels/parallel/sharded_ops.h"
#include "kernels/registration/mutual_info_cpu_steps.h"

namespace tessera {
namespace parallel {
namespace {

using registration::MattesMiOptions;
using registration::MattesMiResult;

absl::Status CheckOptions(const MattesMiOptions& o) {
  if (o.bins < registration::kMattesMiMinBins || o.bins > registration::kMattesMiMaxBins) {
    return absl::InvalidArgumentError(absl::StrCat("bins must be in [", registration::kMattesMiMinBins, ", ",
                                                   registration::kMattesMiMaxBins, "], got ", o.bins));
  }
  if (!(o.fixed_max > o.fixed_min)) return absl::InvalidArgumentError("fixed_max must exceed fixed_min");
  if (!(o.warped_max > o.warped_min)) return absl::InvalidArgumentError("warped_max must exceed warped_min");
  return absl::OkStatus();
}

absl::StatusOr<MattesMiResult> ShardedMattesMiCuda(Communicator& comm, const SlabLayout& layout, const NDArray& fixed,
                                                   const NDArray& warped, const NDArray* mask,
                                                   const MattesMiOptions& options, NDArray* grad, const Stream& stream) {
#if TESSERA_WITH_CUDA
  if (mask != nullptr && mask->memory_kind() != MemoryKind::kDevice) {
    return absl::InvalidArgumentError("mask must be in device memory on a CUDA stream");
  }
  const int64_t off = layout.own_offset(), n = layout.own_voxels();
  const float* F = fixed.data<float>() + off;
  const float* W = warped.data<float>() + off;
  const uint8_t* M = mask != nullptr ? mask->data<uint8_t>() + off : nullptr;
  const size_t bb = static_cast<size_t>(options.bins) * options.bins;
  sharded_internal::MiMapping mapping;
  mapping.bins = options.bins;
  mapping.fixed_min = options.fixed_min;
  mapping.fixed_max = options.fixed_max;
  mapping.warped_min = options.warped_min;
  mapping.warped_max = options.warped_max;
  mapping.fixed_box = options.fixed_kernel == registration::ParzenKernel::kBox;
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> histogram,
                           Buffer::Allocate(MemoryKind::kDevice, bb * sizeof(double), stream.ordinal()));
  double* H_device = static_cast<double*>(histogram->data());
  TESSERA_RETURN_IF_ERROR(sharded_internal::MiJointHistogramCuda(stream, F, W, M, n, mapping, H_device));
  TESSERA_RETURN_IF_ERROR(comm.AllReduce(H_device, bb, ReduceOp::kSum, stream));
  std::vector<double> H(bb);
  TESSERA_RETURN_IF_ERROR(CopyBytes(H.data(), MemoryKind::kHost, H_device, MemoryKind::kDevice, bb * sizeof(double), stream));
  std::vector<double> table;
  MattesMiResult result = registration::mi_cpu::Finalize(H, options, grad != nullptr ? &table : nullptr);
  if (grad == nullptr) return result;
  // The device gradient contracts a float table, as the single-GPU kernel does.
  const std::vector<float> table_f(table.begin(), table.end());
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> table_device,
                           Buffer::Allocate(MemoryKind::kDevice, bb * sizeof(float), stream.ordinal()));
  TESSERA_RETURN_IF_ERROR(CopyBytes(table_device->data(), MemoryKind::kDevice, table_f.data(), MemoryKind::kHost,
                                    bb * sizeof(float), stream));
  TESSERA_RETURN_IF_ERROR(sharded_internal::MiGradientCuda(stream, F, W, M, n, mapping,
                                                           static_cast<const float*>(table_device->data()),
                                                           grad->data<float>() + off));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());  // the table buffer is freed on return
  return result;
#else
  (void)comm, (void)layout, (void)fixed, (void)warped, (void)mask, (void)options, (void)grad, (void)stream;
  return absl::FailedPreconditionError("sharded MI on a CUDA stream in a build without CUDA");
#endif
}

}  // namespace

absl::StatusOr<MattesMiResult> ShardedMattesMi(Communicator& comm, const SlabLayout& layout, const NDArray& fixed,
                                               const NDArray& warped, const NDArray* mask,
                                               const MattesMiOptions& options, NDArray* grad, const Stream& stream) {
  TESSERA_RETURN_IF_ERROR(CheckOptions(options));
  TESSERA_RETURN_IF_ERROR(sharded_internal::CheckLocal(fixed, layout, 1, stream, "fixed"));
  TESSERA_RETURN_IF_ERROR(sharded_internal::CheckLocal(warped, layout, 1, stream, "warped"));
  if (grad != nullptr) TESSERA_RETURN_IF_ERROR(sharded_internal::CheckLocal(*grad, layout, 1, stream, "grad"));
  if (mask != nullptr && (mask->dtype() != DType::kUInt8 || mask->shape() != layout.LocalShape(1))) {
    return absl::InvalidArgumentError(absl::StrCat("mask must be uint8 of shape ", ShapeToString(layout.LocalShape(1)),
                                                   ", got ", ShapeToString(mask->shape())));
  }
  if (stream.backend() == Backend::kCuda) {
    return ShardedMattesMiCuda(comm, layout, fixed, warped, mask, options, grad, stream);
  }
  const int64_t off = layout.own_offset(), n = layout.own_voxels();
  const float* F = fixed.data<float>() + off;
  const float* W = warped.data<float>() + off;
  const uint8_t* M = mask != nullptr ? mask->data<uint8_t>() + off : nullptr;
  // This rank's fixed-point joint histogram (with the whole volume's bits),
  // then the only data that crosses ranks: each int64 bin as two doubles
  // holding integers below 2^31 (high and low 31 bits), whose sums over up
  // to 2^22 ranks are exact: 2 B^2 values, independent of N. The summed
  // integers are the unsharded reference's (integer sums are exact in any
  // order), so are Finalize and the gradient.
  const int bits = registration::mi_cpu::HistogramFixedPointBits(layout.global.size());
  const std::vector<int64_t> local = registration::mi_cpu::JointHistogramFixed(F, W, M, n, options, bits);
  const size_t bb = local.size();
  std::vector<double> parts(2 * bb);
  constexpr int64_t kLow = (int64_t{1} << 31) - 1;
  for (size_t e = 0; e < bb; ++e) {
    parts[e] = static_cast<double>(local[e] >> 31);
    parts[bb + e] = static_cast<double>(local[e] & kLow);
  }
  TESSERA_RETURN_IF_ERROR(comm.AllReduce(parts.data(), parts.size(), ReduceOp::kSum, stream));
  std::vector<int64_t> global(bb);
  for (size_t e = 0; e < bb; ++e) {
    global[e] = static_cast<int64_t>(parts[e]) * (int64_t{1} << 31) + static_cast<int64_t>(parts[bb + e]);
  }
  const std::vector<double> H = registration::mi_cpu::HistogramFromFixed(global, bits);
  std::vector<double> table;
  MattesMiResult result = registration::mi_cpu::Finalize(H, options, grad != nullptr ? &table : nullptr);
  if (grad != nullptr) {
    registration::mi_cpu::GradientFromTable(F, W, M, n, options, table, result.total_weight,
                                            grad->data<float>() + off);
  }
  return result;
}

}  // namespace parallel
}  // namespace tessera
