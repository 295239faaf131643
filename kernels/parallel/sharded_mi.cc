// Sharded Mattes MI on the CPU: mutual_info.h's definition with the joint
// histogram as the one quantity that crosses ranks (FFDP's weighted
// all-reduce: P = sum_h (N_h / N) H_h / N_h = sum_h H_h / N). The histogram,
// finalize and gradient are the CPU reference's own steps
// (mutual_info_cpu_steps.h), run on this rank's slab and the global histogram.
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
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
  if (stream.backend() != Backend::kCpu) {
    return absl::UnimplementedError("sharded MI runs on CPU streams only (no device version yet)");
  }
  const int64_t off = layout.own_offset(), n = layout.own_voxels();
  const float* F = fixed.data<float>() + off;
  const float* W = warped.data<float>() + off;
  const uint8_t* M = mask != nullptr ? mask->data<uint8_t>() + off : nullptr;
  // This rank's joint histogram, then the only data that crosses ranks: B^2
  // values, independent of N. Finalize and the gradient are the reference's.
  std::vector<double> H = registration::mi_cpu::JointHistogram(F, W, M, n, options);
  TESSERA_RETURN_IF_ERROR(comm.AllReduce(H.data(), H.size(), ReduceOp::kSum, stream));
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
