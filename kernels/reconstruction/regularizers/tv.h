// Isotropic total variation on 2-D/3-D images whose voxels hold `channels`
// interleaved components (1: a real CT volume; 2: a complex MRI image as
// (re, im) pairs), CPU and CUDA (the stream picks):
//
//   TV(x) = sum_v sqrt( sum_{axis d, channel c} (D_d x_c)(v)^2 )
//
// D_d is the forward difference along axis d with Neumann boundaries (0 on
// the last plane of the axis), as in Beck & Teboulle and TIGRE. The norm
// couples the channels and the axes, so a complex image's TV does not depend
// on its global phase. Axes of extent 1 contribute nothing.
//
// TvProx is the proximal map of weight * TV,
//   prox(b) = argmin_x 0.5 ||x - b||^2 + weight * TV(x),
// by Beck & Teboulle's fast gradient projection (FGP, IEEE TIP 2009) on the
// dual field p (|p(v)| <= 1 per voxel): x(p) = b - weight D^T p, step
// 1 / (4 ndim weight) for ndim axes of extent > 1, FISTA momentum. With
// non_negative (channels == 1) x(p) is clamped at 0 inside the iteration,
// which is their constrained FGP: the exact prox of weight TV + the indicator
// of x >= 0 (not a clamp after an unconstrained prox). A fixed iteration count
// (no tolerance): the same input gives the same output, bit for bit, on one
// backend; every step is element-wise (no atomics, no reductions).
//
//   TvShape shape{nx, ny, nz, /*channels=*/2};
//   TESSERA_ASSIGN_OR_RETURN(TvProxPlan plan, TvProxPlan::Create(stream, shape));
//   TESSERA_RETURN_IF_ERROR(plan.Apply({step * lambda, 20}, x));   // many calls, one scratch
//
// TvNorm and TvGradient serve steepest descent on TV (ASD-POCS): the gradient
// is of the smoothed TV_eps(x) = sum_v sqrt(|D x(v)|^2 + epsilon^2), which is
// differentiable everywhere; epsilon is in the image's units (TIGRE uses
// a fixed 1e-8 under its square root, i.e. epsilon = 1e-4, for attenuation
// images of order 0.01-1 per mm; scale it with the image).
//
// All pointers are in the stream's memory (host for a CPU stream, the GPU for
// a CUDA one). Errors: INVALID_ARGUMENT naming the field (tv shape nx/ny/nz/
// channels, weight, iterations, epsilon, non_negative with channels != 1, a
// null pointer), FAILED_PRECONDITION for a CUDA stream without CUDA.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_REGULARIZERS_TV_H_
#define TESSERA_KERNELS_RECONSTRUCTION_REGULARIZERS_TV_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "common/buffer.h"
#include "common/device.h"

namespace tessera {
namespace recon {
namespace regularizers {

struct TvShape {
  int64_t nx = 0;
  int64_t ny = 0;
  int64_t nz = 1;    // 1 for a 2-D image
  int channels = 1;  // interleaved components per voxel (x fastest after the channel)
  int64_t voxels() const { return nx * ny * nz; }
  int64_t size() const { return voxels() * channels; }  // floats in an image
  // Axes of extent > 1 (the FGP step is 1 / (4 ndim weight)).
  int ndim() const { return (nx > 1) + (ny > 1) + (nz > 1); }
};

// INVALID_ARGUMENT naming the field: nx, ny, nz >= 1, channels in [1, 64].
absl::Status CheckTvShape(const TvShape& shape);

struct TvProxOptions {
  double weight = 0;          // >= 0 and finite; 0 leaves x unchanged
  int iterations = 20;        // FGP iterations, >= 0 (0 leaves x unchanged)
  bool non_negative = false;  // channels == 1 only: the prox of weight TV + [x >= 0]
  // Start FGP from the dual field the plan's last Apply ended with (0 on the
  // first call) instead of 0. The dual (|p| <= 1 per voxel) does not depend
  // on the weight, and an outer solver's successive prox inputs are close,
  // so its iterations add up over the solve instead of restarting from 0
  // each call (FISTA-TV, CsSense TV). The result then depends on the calls
  // before it (still deterministic for the same sequence).
  bool warm_start = false;
};

// Scratch for TvProx on one shape and stream, reused across calls (FISTA
// calls the prox every iteration): the dual field and its momentum point
// (2 x ndim x size floats) and a copy of the input (size floats).
// Movable, not copyable; the stream must outlive the plan.
class TvProxPlan {
 public:
  static absl::StatusOr<TvProxPlan> Create(const Stream& stream, const TvShape& shape);
  // The plan keeps a pointer to the stream: a temporary (Stream::Cpu()) would
  // dangle, so it does not compile.
  static absl::StatusOr<TvProxPlan> Create(const Stream&& stream, const TvShape& shape) = delete;

  // x = prox_{weight TV}(x), in place.
  absl::Status Apply(const TvProxOptions& options, float* x);

  const TvShape& shape() const { return shape_; }

 private:
  TvProxPlan(const Stream& stream, const TvShape& shape) : stream_(&stream), shape_(shape) {}
  const Stream* stream_;
  TvShape shape_;
  std::shared_ptr<Buffer> dual_;       // p_k
  std::shared_ptr<Buffer> momentum_;   // r_k (the point the next gradient step is taken at)
  std::shared_ptr<Buffer> input_;      // b
  bool has_dual_ = false;              // dual_ holds a finished Apply's field
};

// One-shot TvProx (allocates a plan's scratch for the call).
absl::Status TvProx(const Stream& stream, const TvShape& shape, double weight, int iterations, float* x);

// TV(x), exact (no smoothing), summed in double in a fixed order on either
// backend (deterministic).
absl::StatusOr<double> TvNorm(const Stream& stream, const TvShape& shape, const float* x);

// g = grad TV_eps(x) (same layout as x); epsilon > 0. g must not alias x.
absl::Status TvGradient(const Stream& stream, const TvShape& shape, double epsilon, const float* x, float* g);

}  // namespace regularizers
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_REGULARIZERS_TV_H_
