// TV: argument checks, backend dispatch, and FGP (Beck & Teboulle 2009) on
// top of the per-voxel passes of tv_kernels.h.
#include "kernels/reconstruction/regularizers/tv.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/memory_kind_for.h"
#include "common/status.h"
#include "kernels/reconstruction/regularizers/tv_kernels.h"
#include "kernels/reconstruction/vector_ops.h"

namespace tessera {
namespace recon {
namespace regularizers {
namespace {

using internal::TvGrid;

constexpr int kMaxChannels = 64;

#if TESSERA_WITH_CUDA
#define TESSERA_TV_DISPATCH(op, ...) \
  return stream.backend() == Backend::kCuda ? internal::cuda::op(__VA_ARGS__) : internal::cpu::op(__VA_ARGS__)
#else
#define TESSERA_TV_DISPATCH(op, ...)                                                                 \
  if (stream.backend() == Backend::kCuda) {                                                          \
    return absl::FailedPreconditionError(                                                            \
        absl::StrCat("tv: CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason())); \
  }                                                                                                  \
  return internal::cpu::op(__VA_ARGS__)
#endif

absl::Status PrimalFromDual(const Stream& stream, const TvGrid& grid, float weight, bool non_negative, const float* b,
                            const float* q, float* x) {
  TESSERA_TV_DISPATCH(PrimalFromDual, stream, grid, weight, non_negative, b, q, x);
}

absl::Status DualStep(const Stream& stream, const TvGrid& grid, float tau, float beta, const float* x, float* p,
                      float* r) {
  TESSERA_TV_DISPATCH(DualStep, stream, grid, tau, beta, x, p, r);
}

absl::Status SmoothedMagnitude(const Stream& stream, const TvGrid& grid, float epsilon, const float* x, float* out) {
  TESSERA_TV_DISPATCH(SmoothedMagnitude, stream, grid, epsilon, x, out);
}

absl::Status SmoothedGradient(const Stream& stream, const TvGrid& grid, float epsilon, const float* x, float* g) {
  TESSERA_TV_DISPATCH(SmoothedGradient, stream, grid, epsilon, x, g);
}

absl::StatusOr<std::shared_ptr<Buffer>> AllocateFloats(const Stream& stream, int64_t n) {
  return Buffer::Allocate(MemoryKindFor(stream), static_cast<size_t>(n) * sizeof(float), stream.ordinal());
}

float* Floats(const std::shared_ptr<Buffer>& buffer) { return static_cast<float*>(buffer->data()); }

}  // namespace

absl::Status CheckTvShape(const TvShape& shape) {
  if (shape.nx < 1) return absl::InvalidArgumentError(absl::StrCat("tv shape: nx must be >= 1, got ", shape.nx));
  if (shape.ny < 1) return absl::InvalidArgumentError(absl::StrCat("tv shape: ny must be >= 1, got ", shape.ny));
  if (shape.nz < 1) return absl::InvalidArgumentError(absl::StrCat("tv shape: nz must be >= 1, got ", shape.nz));
  if (shape.channels < 1 || shape.channels > kMaxChannels) {
    return absl::InvalidArgumentError(
        absl::StrCat("tv shape: channels must be in [1, ", kMaxChannels, "], got ", shape.channels));
  }
  return absl::OkStatus();
}

absl::StatusOr<TvProxPlan> TvProxPlan::Create(const Stream& stream, const TvShape& shape) {
  TESSERA_RETURN_IF_ERROR(CheckTvShape(shape));
  TvProxPlan plan(stream, shape);
  const int64_t dual = static_cast<int64_t>(shape.ndim()) * shape.size();
  TESSERA_ASSIGN_OR_RETURN(plan.dual_, AllocateFloats(stream, dual));
  TESSERA_ASSIGN_OR_RETURN(plan.momentum_, AllocateFloats(stream, dual));
  TESSERA_ASSIGN_OR_RETURN(plan.input_, AllocateFloats(stream, shape.size()));
  return plan;
}

absl::Status TvProxPlan::Apply(const TvProxOptions& options, float* x) {
  if (!(options.weight >= 0) || !std::isfinite(options.weight)) {
    return absl::InvalidArgumentError(absl::StrCat("tv prox: weight must be >= 0 and finite, got ", options.weight));
  }
  if (options.iterations < 0) {
    return absl::InvalidArgumentError(absl::StrCat("tv prox: iterations must be >= 0, got ", options.iterations));
  }
  if (options.non_negative && shape_.channels != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("tv prox: non_negative needs channels == 1, got ", shape_.channels));
  }
  if (x == nullptr) return absl::InvalidArgumentError("tv prox: x is null");
  const Stream& stream = *stream_;
  const TvGrid grid = internal::MakeTvGrid(shape_);
  const bool trivial = options.weight == 0 || options.iterations == 0 || grid.ndim == 0;
  if (trivial) {
    // prox of 0 (or of TV on one voxel) is the identity, or the projection.
    if (options.non_negative) return ClampMin(stream, 0.0f, x, shape_.size());
    return absl::OkStatus();
  }
  const int64_t dual_size = static_cast<int64_t>(grid.ndim) * shape_.size();
  float* b = Floats(input_);
  float* p = Floats(dual_);
  float* r = Floats(momentum_);
  TESSERA_RETURN_IF_ERROR(CopyBytes(b, MemoryKindFor(stream), x, MemoryKindFor(stream),
                                    static_cast<size_t>(shape_.size()) * sizeof(float), stream));
  if (options.warm_start && has_dual_) {
    TESSERA_RETURN_IF_ERROR(CopyBytes(r, MemoryKindFor(stream), p, MemoryKindFor(stream),
                                      static_cast<size_t>(dual_size) * sizeof(float), stream));
  } else {
    TESSERA_RETURN_IF_ERROR(Fill(stream, p, dual_size, 0.0f));
    TESSERA_RETURN_IF_ERROR(Fill(stream, r, dual_size, 0.0f));
  }
  has_dual_ = true;
  const float weight = static_cast<float>(options.weight);
  // Step 1 / L of the dual's gradient, L = weight^2 ||D||^2 <= weight^2 4 ndim;
  // the gradient is -weight D x(r), so the step on r is D x / (4 ndim weight).
  const float tau = static_cast<float>(1.0 / (4.0 * grid.ndim * options.weight));
  double t = 1;
  for (int it = 0; it < options.iterations; ++it) {
    TESSERA_RETURN_IF_ERROR(PrimalFromDual(stream, grid, weight, options.non_negative, b, r, x));
    const double t_next = 0.5 * (1 + std::sqrt(1 + 4 * t * t));
    const float beta = static_cast<float>((t - 1) / t_next);
    t = t_next;
    TESSERA_RETURN_IF_ERROR(DualStep(stream, grid, tau, beta, x, p, r));
  }
  return PrimalFromDual(stream, grid, weight, options.non_negative, b, p, x);
}

absl::Status TvProx(const Stream& stream, const TvShape& shape, double weight, int iterations, float* x) {
  TESSERA_ASSIGN_OR_RETURN(TvProxPlan plan, TvProxPlan::Create(stream, shape));
  TESSERA_RETURN_IF_ERROR(plan.Apply({weight, iterations, false}, x));
  return stream.Synchronize();  // the plan's scratch is freed on return
}

absl::StatusOr<double> TvNorm(const Stream& stream, const TvShape& shape, const float* x) {
  TESSERA_RETURN_IF_ERROR(CheckTvShape(shape));
  if (x == nullptr) return absl::InvalidArgumentError("tv norm: x is null");
  const TvGrid grid = internal::MakeTvGrid(shape);
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> magnitudes, AllocateFloats(stream, grid.voxels));
  TESSERA_RETURN_IF_ERROR(SmoothedMagnitude(stream, grid, 0.0f, x, Floats(magnitudes)));
  return Sum(stream, Floats(magnitudes), grid.voxels);  // synchronises
}

absl::Status TvGradient(const Stream& stream, const TvShape& shape, double epsilon, const float* x, float* g) {
  TESSERA_RETURN_IF_ERROR(CheckTvShape(shape));
  if (!(epsilon > 0) || !std::isfinite(epsilon)) {
    return absl::InvalidArgumentError(absl::StrCat("tv gradient: epsilon must be > 0 and finite, got ", epsilon));
  }
  if (x == nullptr || g == nullptr) return absl::InvalidArgumentError("tv gradient: x and g must not be null");
  if (x == g) return absl::InvalidArgumentError("tv gradient: g must not alias x");
  return SmoothedGradient(stream, internal::MakeTvGrid(shape), static_cast<float>(epsilon), x, g);
}

}  // namespace regularizers
}  // namespace recon
}  // namespace tessera
