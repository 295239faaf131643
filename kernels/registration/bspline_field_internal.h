// One separable pass of bspline_field.h, shared by the CPU reference and the
// CUDA kernels so both evaluate the same taps and weights in the same order.
//
// A pass maps an array (inner, n_in, outer) to (inner, n_out, outer) along
// its middle axis: inner = the product of the extents before the axis,
// outer = those after it times the components (planar layout). Output o
// gathers inputs lo..hi (inclusive) with weights Weight(o, i).
#ifndef TESSERA_KERNELS_REGISTRATION_BSPLINE_FIELD_INTERNAL_H_
#define TESSERA_KERNELS_REGISTRATION_BSPLINE_FIELD_INTERNAL_H_

#include <cmath>
#include <cstdint>

#include "absl/status/status.h"
#include "common/device.h"

#if defined(__CUDACC__)
#define TESSERA_BSPLINE_HD __host__ __device__ inline
#else
#define TESSERA_BSPLINE_HD inline
#endif

namespace tessera {
namespace registration {
namespace bspline_internal {

enum class PassKind : int {
  kEvaluate = 0,  // controls -> voxels (B)
  kAdjoint = 1,   // voxels -> controls (B^T)
  kRefine = 2,    // coarse controls -> fine controls (subdivision)
};

struct Pass {
  PassKind kind = PassKind::kEvaluate;
  int64_t inner = 1, n_in = 1, n_out = 1, outer = 1;
  double s = 1, inv_s = 1;  // voxels per control interval (evaluate, adjoint)
};

// The cubic B-spline: (4 - 6x^2 + 3|x|^3) / 6 on |x| < 1, (2 - |x|)^3 / 6 on
// 1 <= |x| < 2, 0 beyond.
TESSERA_BSPLINE_HD double Beta3(double x) {
  const double a = x < 0 ? -x : x;
  if (a < 1) return (4.0 - 6.0 * a * a + 3.0 * a * a * a) / 6.0;
  if (a < 2) {
    const double b = 2.0 - a;
    return b * b * b / 6.0;
  }
  return 0.0;
}

// Voxel i in control-index units: i / S + 1 (rounded explicitly on the
// device so CPU and CUDA agree).
TESSERA_BSPLINE_HD double ControlCoordinate(int64_t i, double inv_s) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(__dmul_rn(static_cast<double>(i), inv_s), 1.0);
#else
  return static_cast<double>(i) * inv_s + 1.0;
#endif
}

// The weight of voxel i for control k: evaluate and adjoint both call this.
TESSERA_BSPLINE_HD float SplineWeight(int64_t voxel, int64_t control, double inv_s) {
  return static_cast<float>(Beta3(ControlCoordinate(voxel, inv_s) - static_cast<double>(control)));
}

TESSERA_BSPLINE_HD int64_t MaxI(int64_t a, int64_t b) { return a > b ? a : b; }
TESSERA_BSPLINE_HD int64_t MinI(int64_t a, int64_t b) { return a < b ? a : b; }

// Inputs of output o, clipped to [0, n_in - 1]; empty when lo > hi.
TESSERA_BSPLINE_HD void TapRange(const Pass& p, int64_t o, int64_t* lo, int64_t* hi) {
  int64_t a = 0, b = -1;
  if (p.kind == PassKind::kEvaluate) {
    const int64_t j = static_cast<int64_t>(floor(ControlCoordinate(o, p.inv_s)));
    a = j - 1;
    b = j + 2;
  } else if (p.kind == PassKind::kAdjoint) {
    // beta3(i / S + 1 - o) != 0 needs (o - 3) S < i < (o + 1) S; one voxel of
    // margin each side (Beta3 is exactly 0 there) absorbs rounding.
    a = static_cast<int64_t>(floor((o - 3) * p.s)) - 1;
    b = static_cast<int64_t>(ceil((o + 1) * p.s)) + 1;
  } else if (o % 2 == 1) {  // refine, fine o on coarse point (o - 1) / 2 + 1
    a = (o - 1) / 2;
    b = a + 2;
  } else {  // refine, fine o halfway between coarse o / 2 and o / 2 + 1
    a = o / 2;
    b = a + 1;
  }
  *lo = MaxI(a, 0);
  *hi = MinI(b, p.n_in - 1);
}

TESSERA_BSPLINE_HD float TapWeight(const Pass& p, int64_t o, int64_t i) {
  switch (p.kind) {
    case PassKind::kEvaluate:
      return SplineWeight(o, i, p.inv_s);
    case PassKind::kAdjoint:
      return SplineWeight(i, o, p.inv_s);
    default:
      if (o % 2 == 1) return i == (o - 1) / 2 + 1 ? 0.75f : 0.125f;
      return 0.5f;
  }
}

}  // namespace bspline_internal

namespace cpu {
void BsplinePass(const bspline_internal::Pass& pass, const float* in, float* out);
}  // namespace cpu

namespace cuda {
// Defined only in CUDA builds; device pointers, asynchronous on the stream.
absl::Status BsplinePass(const bspline_internal::Pass& pass, const float* in, float* out, const Stream& stream);
}  // namespace cuda

}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_BSPLINE_FIELD_INTERNAL_H_
