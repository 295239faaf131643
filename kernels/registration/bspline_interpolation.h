// Cubic B-spline interpolation of a scalar image, as ITK's
// BSplineInterpolateImageFunction (spline order 3) with its
// BSplineDecompositionImageFilter prefilter: the image is first turned into
// B-spline coefficients (exact interpolation: the spline passes through every
// voxel value), then evaluated at continuous voxel indices with mirror
// boundary conditions. antsApplyTransforms --interpolation BSpline uses it.
//
// The prefilter runs on the CPU (separable recursive filters, one line at a
// time); the evaluation has a CPU reference and a CUDA version (*.cu) that
// take the same float positions.
#ifndef TESSERA_KERNELS_REGISTRATION_BSPLINE_INTERPOLATION_H_
#define TESSERA_KERNELS_REGISTRATION_BSPLINE_INTERPOLATION_H_

#include <math.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/device.h"
#include "common/ndarray.h"
#include "kernels/registration/types.h"

namespace tessera {
namespace registration {

// The cubic B-spline coefficients of a float32 (nx, ny, nz) host image (ITK's
// BSplineDecompositionImageFilter: pole sqrt(3) - 2, mirror boundary, causal
// initialisation to 1e-10). Axes of length 1 are left as they are.
absl::StatusOr<NDArray> BsplineCoefficients(const NDArray& image);

// Where to evaluate: `positions` planar (count, 3): all x indices, then y,
// then z (continuous voxel indices of the image). A position outside
// [-0.5, n - 0.5) on some axis gives `default_value` (ITK's IsInsideBuffer in
// the resampler); inside, the spline with mirrored coefficients.
struct BsplineSampleArgs {
  const float* coefficients = nullptr;  // image_dims
  Dims3 image_dims;
  const float* positions = nullptr;
  int64_t count = 0;
  float default_value = 0;
};

// out[i] = spline at position i. Pointers in the stream's backend memory.
absl::Status BsplineSample(const Stream& stream, const BsplineSampleArgs& args, float* out);

// The B-spline weights and mirrored support of one axis: shared by both
// backends so that they pick the same taps.
struct BsplineTaps {
  int64_t index[4];
  double weight[4];
};
TESSERA_HD inline BsplineTaps BsplineAxisTaps(double x, int64_t n) {
  BsplineTaps taps;
  // Order 3 (odd): support starts at floor(x) - 1.
  const double fl = floor(x);
  const int64_t start = static_cast<int64_t>(fl) - 1;
  const double t = x - fl;
  const double t2 = t * t, t3 = t2 * t, s = 1.0 - t;
  taps.weight[0] = s * s * s / 6.0;
  taps.weight[1] = (4.0 - 6.0 * t2 + 3.0 * t3) / 6.0;
  taps.weight[2] = (1.0 + 3.0 * t + 3.0 * t2 - 3.0 * t3) / 6.0;
  taps.weight[3] = t3 / 6.0;
  const int64_t period = 2 * (n - 1);
  for (int k = 0; k < 4; ++k) {
    int64_t q = start + k;
    if (n == 1) {
      q = 0;
    } else {
      q = q < 0 ? -q - period * ((-q) / period) : q - period * (q / period);
      if (q >= n) q = period - q;
    }
    taps.index[k] = q;
  }
  return taps;
}

// ITK's resampler: is the continuous index inside the image's buffer?
TESSERA_HD inline bool InsideBuffer(double x, int64_t n) { return x >= -0.5 && x < static_cast<double>(n) - 0.5; }

namespace cpu {
// The spline at one continuous index (double): the CPU reference.
double BsplineValue(const float* coefficients, Dims3 dims, double x, double y, double z);
void BsplineSample(const BsplineSampleArgs& args, float* out);
}  // namespace cpu

namespace cuda {
absl::Status BsplineSample(const Stream& stream, const BsplineSampleArgs& args, float* out);
}  // namespace cuda

}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_BSPLINE_INTERPOLATION_H_
