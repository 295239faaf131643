// Internal helpers of the solvers: float arrays in the operator's stream
// memory, and the checks every solver shares.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_SOLVERS_SOLVER_UTIL_H_
#define TESSERA_KERNELS_RECONSTRUCTION_SOLVERS_SOLVER_UTIL_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "common/buffer.h"
#include "common/device.h"
#include "kernels/reconstruction/linear_operator.h"
#include "kernels/reconstruction/solvers/solver_options.h"

namespace tessera {
namespace recon {
namespace solvers {

// n floats in host memory (CPU stream) or on the stream's GPU.
class FloatArray {
 public:
  static absl::StatusOr<FloatArray> Allocate(const Stream& stream, int64_t n);
  float* data() const { return buffer_ ? static_cast<float*>(buffer_->data()) : nullptr; }

 private:
  std::shared_ptr<Buffer> buffer_;
};

// to[0, n) = from[0, n), both in the stream's memory (asynchronous on CUDA).
absl::Status CopyFloats(const Stream& stream, const float* from, float* to, int64_t n);

// INVALID_ARGUMENT naming the solver and field: null x or y, negative
// iterations, an empty operator.
absl::Status CheckCommon(const char* solver, const LinearOperator& op, const float* y, const float* x,
                         const SolverOptions& options);

}  // namespace solvers
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_SOLVERS_SOLVER_UTIL_H_
