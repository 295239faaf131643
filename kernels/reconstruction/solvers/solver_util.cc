#include "kernels/reconstruction/solvers/solver_util.h"

#include "absl/strings/str_cat.h"
#include "common/memory_kind_for.h"

namespace tessera {
namespace recon {
namespace solvers {

absl::Status CopyFloats(const Stream& stream, const float* from, float* to, int64_t n) {
  const MemoryKind kind = MemoryKindFor(stream);
  return CopyBytes(to, kind, from, kind, static_cast<size_t>(n) * sizeof(float), stream);
}

absl::StatusOr<FloatArray> FloatArray::Allocate(const Stream& stream, int64_t n) {
  auto buffer = Buffer::Allocate(MemoryKindFor(stream), static_cast<size_t>(n) * sizeof(float), stream.ordinal());
  if (!buffer.ok()) return buffer.status();
  FloatArray a;
  a.buffer_ = *std::move(buffer);
  return a;
}

absl::Status CheckCommon(const char* solver, const LinearOperator& op, const float* y, const float* x,
                         const SolverOptions& options) {
  if (y == nullptr || x == nullptr) return absl::InvalidArgumentError(absl::StrCat(solver, ": x or y is null"));
  if (options.iterations < 0) {
    return absl::InvalidArgumentError(absl::StrCat(solver, ": iterations must be >= 0, got ", options.iterations));
  }
  if (op.domain_size() <= 0 || op.num_views() <= 0 || op.elements_per_view() <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(solver, ": the operator is empty (domain ", op.domain_size(),
                                                   ", ", op.num_views(), " views of ", op.elements_per_view(), ")"));
  }
  return absl::OkStatus();
}

}  // namespace solvers
}  // namespace recon
}  // namespace tessera
