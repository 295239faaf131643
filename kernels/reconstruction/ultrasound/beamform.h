// Delay-and-sum and minimum-variance (Capon) beamforming of linear-array
// channel data (seed 001 section 2.4): plane-wave compounding and synthetic
// aperture, on the CPU (the reference) and CUDA.
//
// Both start from the transmit-compounded delayed channel vector of a pixel,
//   x_c(r) = sum_t d_{c,t}(T_t(r) + R_c(r))       c = 0..N-1
// (delays, linear interpolation and IQ phase rotation: delay_model.h).
//
// Delay-and-sum:  y(r) = sum_c w_c(r) x_c(r) / sum_c w_c(r)
//   w_c: receive apodisation, a boxcar or Hann window over the aperture
//   |x - x_c| <= max(z / (2 F), pitch) (F-number F), or over the whole array
//   when F = 0. A pixel with no channel in its aperture is 0.
//
// Minimum variance, subarray length L, loading delta, temporal half-window K:
//   x_p = (x_p, ..., x_{p+L-1})                       p = 0..N-L (subarrays)
//   R = sum_{k=-K..K} sum_p x_p(r_k) x_p(r_k)^H        r_k: pixel k rows deeper
//                                                     in the same column (clipped)
//   R <- R + delta trace(R) / L I
//   w = R^-1 a / (a^H R^-1 a),  a = (1, ..., 1)
//   y(r) = w^H xbar(r),  xbar = (1 / (N-L+1)) sum_p x_p(r)
// Weights sum to 1, so y is on DAS's scale (a boxcar DAS is MV with R = I).
// MV uses every channel (no F-number). R is built per diagonal with a
// sliding window (O(L N) per pixel), solved through
// linalg::BatchedCholeskySolve (n = L <= 128) for chunks of whole image
// columns, so the workspace stays bounded. A pixel whose R is not positive
// definite (no signal: trace 0) falls back to w = a / L.
//
// Data: complex channel data (IQ, or analytic RF with f_demod = 0: see
// ToAnalytic in acquisition.h) in the stream's backend memory, layout of
// acquisition.h; the image is complex nx x nz, x fastest, in the same memory.
//
// CUDA vs CPU (random channel data, tests in beamform_cuda_test): relative l2
// error <= 1e-4 for DAS and <= 2e-3 for MV (the CPU solves in double, CUDA in
// float). Deterministic on both (no atomics, fixed-order per-pixel sums): CPU
// images do not depend on the thread count (beamform_determinism_test), two
// CUDA runs are bit-identical (beamform_cuda_test), so ExecutionMode needs no
// separate path here.
//
//   BeamformOptions options;  options.method = BeamformMethod::kMinimumVariance;
//   auto plan = BeamformPlan::Create(stream, acquisition, grid, options);
//   TESSERA_RETURN_IF_ERROR((*plan)->Execute(channel_data, image));
#ifndef TESSERA_KERNELS_RECONSTRUCTION_ULTRASOUND_BEAMFORM_H_
#define TESSERA_KERNELS_RECONSTRUCTION_ULTRASOUND_BEAMFORM_H_

#include <complex>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/buffer.h"
#include "common/device.h"
#include "kernels/reconstruction/ultrasound/acquisition.h"
#include "kernels/reconstruction/ultrasound/delay_model.h"

namespace tessera {
namespace recon {
namespace ultrasound {

enum class BeamformMethod { kDelayAndSum, kMinimumVariance };
enum class Apodization { kBoxcar, kHann };

inline constexpr int kMaxSubarray = 128;      // the batched solve's limit (linalg::kMaxBatchedSolveSize)
inline constexpr int kMaxTemporalHalf = 32;

struct DasOptions {
  Apodization window = Apodization::kHann;
  double f_number = 1.5;  // >= 0; 0: the whole array
};

struct MvOptions {
  int subarray = 32;        // L, 1..min(channels, 128)
  double loading = 1e-2;    // delta >= 0: R += delta trace(R) / L I
  int temporal_half = 1;    // K, 0..32: rows r-K..r+K averaged into R
  int64_t chunk_pixels = 0; // pixels per batched solve (rounded to whole columns); 0: ~256 MiB of covariances
};

struct BeamformOptions {
  BeamformMethod method = BeamformMethod::kDelayAndSum;
  DasOptions das;
  MvOptions mv;
};

// INVALID_ARGUMENT naming the field (subarray > channels, loading < 0 or NaN,
// f_number < 0, ...).
absl::Status ValidateBeamformOptions(const BeamformOptions& options, int channels);

// Plan/execute: Create checks the acquisition's geometry (its data is not
// read), the grid and the options, and puts the element positions, transmit
// table and MV workspace in the stream's memory; Execute beamforms one frame
// and allocates nothing. Not copyable (held by unique_ptr); the stream must
// outlive the plan; one Execute at a time.
class BeamformPlan {
 public:
  static absl::StatusOr<std::unique_ptr<BeamformPlan>> Create(const Stream& stream, const Acquisition& acquisition,
                                                              const ImageGrid& grid, const BeamformOptions& options);
  BeamformPlan(const BeamformPlan&) = delete;
  BeamformPlan& operator=(const BeamformPlan&) = delete;

  // channel_data: samples x channels x transmits complex values; image: nx x
  // nz complex values; both in the stream's memory. Asynchronous on a CUDA
  // stream.
  absl::Status Execute(const std::complex<float>* channel_data, std::complex<float>* image);

  // Device (or host) bytes the plan holds for MV covariances, weights and
  // delayed channels (0 for DAS).
  size_t workspace_bytes() const { return workspace_bytes_; }
  int64_t chunk_pixels() const { return chunk_columns_ * int64_t{params_.nz}; }
  const detail::BeamformParams& params() const { return params_; }

 private:
  BeamformPlan() = default;
  absl::Status ExecuteMv(const detail::CFloat* data, detail::CFloat* image);

  const Stream* stream_ = nullptr;
  BeamformOptions options_;
  detail::BeamformParams params_;            // pointers into geometry_
  std::shared_ptr<Buffer> geometry_;         // element_x then the transmit table (doubles)
  std::shared_ptr<Buffer> workspace_;        // MV: X | R | V (ones, then weights) | info
  size_t workspace_bytes_ = 0;
  int64_t chunk_columns_ = 0;                // MV: image columns per chunk
  std::vector<double> host_geometry_;        // CPU plans point here
};

// Host in, host out: validates, converts RF to analytic data (ToAnalytic),
// uploads to `backend`, beamforms and downloads the nx x nz complex image.
absl::StatusOr<std::vector<std::complex<float>>> Beamform(const Acquisition& acquisition, const ImageGrid& grid,
                                                          const BeamformOptions& options,
                                                          Backend backend = Backend::kCpu);

// A grid under the array: the element span laterally, from `z_min` to the
// deepest depth the samples reach (half the last sample's round trip,
// capped at z_max when > 0), nx x nz pixels.
ImageGrid DefaultImageGrid(const Acquisition& acquisition, int nx, int nz, double z_min = 5e-3, double z_max = 0);

}  // namespace ultrasound
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_ULTRASOUND_BEAMFORM_H_
