// Sharded Mattes MI: mutual_info.h's definition with the joint histogram as
// the one quantity that crosses ranks (FFDP's weighted all-reduce: P = sum_h
// (N_h / N) H_h / N_h = sum_h H_h / N; the marginals are its row and column
// sums, so B^2 values travel, independent of N). Each rank takes its own
// slices' histogram in its backend's exact fixed point (the CPU's with the
// whole volume's bits), the ranks add the integers (exact in any order), and
// every rank finalizes that global histogram and takes the gradient of its own
// slices with the unsharded code of its backend: the CPU reference's steps
// (mutual_info_cpu_steps.h) or the CUDA kernels' (mutual_info_cuda_steps.h).
// So a sharded MI is the unsharded one bit for bit on either backend (issue 39).
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/status.h"
#include "kernels/registration/sharded/sharded_internal.h"
#include "kernels/registration/sharded/sharded_ops.h"
#include "kernels/registration/mutual_info_cpu_steps.h"
#include "kernels/registration/mutual_info_cuda_steps.h"

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

// The global fixed-point histogram from this rank's: each int64 bin as two
// doubles holding integers below 2^31 (high and low 31 bits), whose sums over
// up to 2^22 ranks are exact: 2 B^2 values, independent of N.
absl::StatusOr<std::vector<int64_t>> AllReduceFixedHistogram(Communicator& comm, const std::vector<int64_t>& local,
                                                             const Stream& stream) {
  const size_t bb = local.size();
  std::vector<double> parts(2 * bb);
  constexpr int64_t kLow = (int64_t{1} << 31) - 1;
  for (size_t e = 0; e < bb; ++e) {
    parts[e] = static_cast<double>(local[e] >> 31);
    parts[bb + e] = static_cast<double>(local[e] & kLow);
  }
  TESSERA_RETURN_IF_ERROR(AllReduceHostVector(comm, parts.data(), parts.size(), ReduceOp::kSum, stream));
  std::vector<int64_t> global(bb);
  for (size_t e = 0; e < bb; ++e) {
    global[e] = static_cast<int64_t>(parts[e]) * (int64_t{1} << 31) + static_cast<int64_t>(parts[bb + e]);
  }
  return global;
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
  // Device scratch: the histogram, the table and Finalize's {mi, total}.
  const size_t table_at = bb * sizeof(uint64_t), result_at = table_at + bb * sizeof(float);
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> scratch,
                           Buffer::Allocate(MemoryKind::kDevice, result_at + 2 * sizeof(double), stream.ordinal()));
  char* base = static_cast<char*>(scratch->data());
  uint64_t* histogram = reinterpret_cast<uint64_t*>(base);
  std::vector<int64_t> local(bb, 0);
  TESSERA_RETURN_IF_ERROR(CopyBytes(histogram, MemoryKind::kDevice, local.data(), MemoryKind::kHost,
                                    bb * sizeof(uint64_t), stream));
  TESSERA_RETURN_IF_ERROR(registration::mi_cuda::AddJointHistogram(stream, F, W, M, n, options, histogram));
  TESSERA_RETURN_IF_ERROR(CopyBytes(local.data(), MemoryKind::kHost, histogram, MemoryKind::kDevice,
                                    bb * sizeof(uint64_t), stream));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  TESSERA_ASSIGN_OR_RETURN(const std::vector<int64_t> global, AllReduceFixedHistogram(comm, local, stream));
  TESSERA_RETURN_IF_ERROR(CopyBytes(histogram, MemoryKind::kDevice, global.data(), MemoryKind::kHost,
                                    bb * sizeof(uint64_t), stream));
  float* table = reinterpret_cast<float*>(base + table_at);
  double* result = reinterpret_cast<double*>(base + result_at);
  TESSERA_RETURN_IF_ERROR(registration::mi_cuda::Finalize(stream, histogram, options, table, result));
  if (grad != nullptr) {
    TESSERA_RETURN_IF_ERROR(
        registration::mi_cuda::Gradient(stream, F, W, M, n, options, table, grad->data<float>() + off));
  }
  return registration::mi_cuda::ReadResult(stream, result);  // synchronizes: the scratch is freed on return
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
  // This rank's fixed-point joint histogram (with the whole volume's bits);
  // the summed integers are the unsharded reference's, so are Finalize and
  // the gradient.
  const int bits = registration::mi_cpu::HistogramFixedPointBits(layout.global.size());
  const std::vector<int64_t> local = registration::mi_cpu::JointHistogramFixed(F, W, M, n, options, bits);
  TESSERA_ASSIGN_OR_RETURN(const std::vector<int64_t> global, AllReduceFixedHistogram(comm, local, stream));
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
