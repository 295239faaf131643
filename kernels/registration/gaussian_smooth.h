// Separable Gaussian smoothing of scalar volumes and planar vector fields, and
// the two resampling helpers of a multi-scale registration: image downsampling
// (blur, then trilinear) and displacement-field resampling between scales.
// CPU reference in gaussian_smooth_cpu.cc (also the CPU backend, threaded over
// slabs); CUDA in gaussian_smooth.cu.
//
// Layout: a volume is float32 (nx, ny, nz); a vector field is float32
// (nx, ny, nz, C), planar (component c is the contiguous volume at offset
// c * nx * ny * nz; see types.h), usually C = 3. Components are filtered
// independently.
//
// Gaussian kernel per axis (sigma in voxels): taps w_d = exp(-d^2 / (2 sigma^2))
// for |d| <= r, r = ceil(kGaussianTruncate * sigma) (truncation at 3 sigma),
// normalised to sum 1. sigma <= 0 (or < 1e-6) leaves that axis unfiltered.
// Borders: CLAMP (replicate the edge voxel), so a constant stays constant and
// the filter preserves the mean of slowly varying fields near borders.
//
// Tolerance CUDA vs CPU (gaussian_smooth_test.cc): max-abs difference
// <= 1e-5 * max |input| (float sums of <= 129 taps in a different order).
// Measured on an H200: 5.0 ms for a 512^3 x 3 field at sigma 1.5, in place
// (~1.9 TB/s effective; 3 reads + 3 writes per component, floor 2.3 ms).
#ifndef TESSERA_KERNELS_REGISTRATION_GAUSSIAN_SMOOTH_H_
#define TESSERA_KERNELS_REGISTRATION_GAUSSIAN_SMOOTH_H_

#include <array>
#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/buffer.h"
#include "common/device.h"
#include "common/ndarray.h"
#include "kernels/registration/displacement_units.h"

namespace tessera {
namespace registration {

inline constexpr double kGaussianTruncate = 3.0;  // kernel radius = ceil(3 sigma)
inline constexpr int kGaussianMaxRadius = 64;     // taps are kernel parameters; sigma <= ~21 voxels

// GaussianTaps() returns the 2r + 1 normalised taps for `sigma` (voxels);
// {1} for sigma <= 1e-6.
std::vector<float> GaussianTaps(double sigma);

// GaussianSmoothScratchBytes() is the device scratch GaussianSmooth() needs on
// CUDA: one scalar volume, nx * ny * nz * 4 bytes (0 when every sigma is 0).
size_t GaussianSmoothScratchBytes(const Shape& shape, const std::array<double, 3>& sigma_voxels);

// GaussianSmooth() filters `in` along x, then y, then z into *out.
//   in, out: float32, same shape, rank 3 (volume) or 4 (planar field);
//     out may be the same array as in (in-place).
//   sigma_voxels: per-axis sigma in voxels, each radius <= kGaussianMaxRadius.
//   scratch: CUDA only, optional device buffer >= GaussianSmoothScratchBytes()
//     (null: allocated per call, tracked).
// CUDA passes per component: x (each row staged in shared memory by one warp,
// or one block for rows longer than ~1000; safe in place), y into the scratch
// volume, z back into out (rows longer than 8192 go through the scratch too). Runs asynchronously on
// the stream when `scratch` is given, else synchronises before freeing it.
// Errors: INVALID_ARGUMENT (shape, dtype, residency, radius), FAILED_PRECONDITION
// (CUDA stream without CUDA), CUDA errors.
absl::Status GaussianSmooth(const NDArray& in, NDArray* out, const std::array<double, 3>& sigma_voxels,
                            const Stream& stream, Buffer* scratch = nullptr);

// DownsampledShape() is the grid DownsampleVolume() produces: each spatial
// extent n becomes max(1, round(n / factor)); a trailing component axis is kept.
Shape DownsampledShape(const Shape& shape, double factor);

// DownsampleVolume() blurs `in` with sigma_a = 0.5 * n_in / n_out per axis
// (none where the extent does not shrink; FireANTs' rule) and samples it
// trilinearly on out's grid (any smaller or equal shape; usually
// DownsampledShape(in.shape(), factor)). Grid convention: ALIGNED CORNERS,
// out voxel i sits at input coordinate i * (n_in - 1) / (n_out - 1) (the centre
// (n_in - 1) / 2 when n_out = 1), as PyTorch's align_corners=True.
// in/out: rank 3 or 4 (planar, same C), float32. Device scratch on CUDA: one
// blurred copy of `in` plus GaussianSmoothScratchBytes(), allocated per call.
absl::Status DownsampleVolume(const NDArray& in, NDArray* out, const Stream& stream);

// UpsampleDisplacement() resamples a planar (nx, ny, nz, 3) displacement onto
// out's grid (nx', ny', nz', 3) by trilinear interpolation with aligned
// corners (as DownsampleVolume), scaling the vectors per `units`. Used between
// scales (coarse -> fine), but any target size works. Vectors: kVoxels
// components are multiplied by (n_out_c - 1) / (n_in_c - 1) (1 where either
// extent is 1); kNormalized ones are unchanged. out must not alias in.
// Asynchronous on a CUDA stream.
absl::Status UpsampleDisplacement(const NDArray& in, NDArray* out, DisplacementUnits units, const Stream& stream);

}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_GAUSSIAN_SMOOTH_H_
