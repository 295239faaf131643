#include "kernels/reconstruction/mri/sense_stack.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "common/status.h"

namespace tessera {
namespace recon {
namespace mri {
namespace {

using Complex = std::complex<float>;

// One slice's reconstruction on an operator already pointed at its maps.
using SliceFn = std::function<absl::Status(SenseOperator& op, int64_t slice)>;

// Runs `fn` for every slice: on the CPU over workers with an operator each,
// on CUDA in order on one operator; slice_done after each, serialised.
absl::Status ForEachSlice(const Stream& stream, const SenseStack& stack, const SenseOperatorOptions& op_options,
                          const SliceFn& fn, const SliceDone& slice_done) {
  if (stack.slices < 1) {
    return absl::InvalidArgumentError(absl::StrCat("SENSE stack: slices = ", stack.slices, " < 1"));
  }
  if (stack.slices_per_map_set < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("SENSE stack: slices_per_map_set = ", stack.slices_per_map_set, " < 0"));
  }
  const SenseGeometry& g = stack.geometry;
  const int64_t set_size = static_cast<int64_t>(g.coils) * g.nx * g.ny;
  auto maps_of = [&](int64_t s) {
    return stack.slices_per_map_set == 0 ? g.maps : g.maps + (s / stack.slices_per_map_set) * set_size;
  };
  std::mutex mu;  // guards first_error, finished and slice_done
  absl::Status first_error;
  int64_t finished = 0;
  std::atomic<bool> failed{false};
  auto run_slice = [&](SenseOperator& op, int64_t s) {
    if (failed.load()) return;
    op.SetMaps(maps_of(s));
    absl::Status status = fn(op, s);
    std::lock_guard<std::mutex> lock(mu);
    if (status.ok() && !failed.load()) {
      ++finished;
      if (slice_done) status = slice_done(s, finished, stack.slices);
    }
    if (!status.ok() && first_error.ok()) {
      first_error = status;
      failed.store(true);
    }
  };

  if (stream.backend() != Backend::kCpu) {
    TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<SenseOperator> op, SenseOperator::Create(stream, g, op_options));
    for (int64_t s = 0; s < stack.slices && !failed.load(); ++s) run_slice(*op, s);
    return first_error;
  }
  const int workers = static_cast<int>(std::min<int64_t>(CpuThreads(), stack.slices));
  std::vector<std::unique_ptr<SenseOperator>> ops(workers);
  ParallelForDynamic(stack.slices, 1, [&](int64_t begin, int64_t end, int worker) {
    if (ops[worker] == nullptr && !failed.load()) {
      absl::StatusOr<std::unique_ptr<SenseOperator>> op = SenseOperator::Create(stream, g, op_options);
      if (!op.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (first_error.ok()) first_error = op.status();
        failed.store(true);
        return;
      }
      ops[worker] = *std::move(op);
    }
    for (int64_t s = begin; s < end; ++s) run_slice(*ops[worker], s);
  });
  return first_error;
}

}  // namespace

absl::StatusOr<std::vector<CgSenseResult>> CgSenseStack(const Stream& stream, const SenseStack& stack,
                                                        const Complex* kspace, const CgSenseOptions& options,
                                                        Complex* images, const SliceDone& slice_done) {
  if (kspace == nullptr || images == nullptr) return absl::InvalidArgumentError("CG-SENSE stack: kspace or images is null");
  const SenseGeometry& g = stack.geometry;
  const int64_t kspace_stride = static_cast<int64_t>(g.coils) * g.points, npix = g.nx * g.ny;
  std::vector<CgSenseResult> results(std::max<int64_t>(stack.slices, 0));
  SenseOperatorOptions op_options = options.nufft;
  op_options.use_toeplitz = options.use_toeplitz;
  TESSERA_RETURN_IF_ERROR(ForEachSlice(
      stream, stack, op_options,
      [&](SenseOperator& op, int64_t s) -> absl::Status {
        TESSERA_ASSIGN_OR_RETURN(results[s], CgSense(stream, op, kspace + s * kspace_stride, options, images + s * npix));
        return absl::OkStatus();
      },
      slice_done));
  return results;
}

absl::Status AdjointSenseStack(const Stream& stream, const SenseStack& stack, const Complex* kspace,
                               const SenseOperatorOptions& options, Complex* images, const SliceDone& slice_done) {
  if (kspace == nullptr || images == nullptr) return absl::InvalidArgumentError("adjoint SENSE stack: kspace or images is null");
  const SenseGeometry& g = stack.geometry;
  const int64_t kspace_stride = static_cast<int64_t>(g.coils) * g.points, npix = g.nx * g.ny;
  return ForEachSlice(
      stream, stack, options,
      [&](SenseOperator& op, int64_t s) {
        return AdjointSense(stream, op, kspace + s * kspace_stride, images + s * npix);
      },
      slice_done);
}

}  // namespace mri
}  // namespace recon
}  // namespace tessera
