// Internal: the two backends behind FbpPlan, and the CPU reference pieces
// the tests call directly.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_FBP_FBP_BACKEND_H_
#define TESSERA_KERNELS_RECONSTRUCTION_FBP_FBP_BACKEND_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/device.h"
#include "kernels/reconstruction/fbp/fbp.h"
#include "kernels/reconstruction/fbp/fbp_math.h"
#include "kernels/reconstruction/fbp/fbp_setup.h"
#include "kernels/reconstruction/geometry.h"

namespace tessera {
namespace recon {
namespace fbp {

struct FbpBackendConfig {
  // setup.geometry: for an offset detector wider than the sinogram, whose
  // rows have setup.input_cols columns placed at column setup.col0.
  CtGeometry geometry;
  const Stream* stream = nullptr;
  FbpOptions options;
  FbpSetup setup;
  std::vector<float> spectrum;  // FilterSpectrum(...), padded / 2 + 1 entries
  std::vector<float> hilbert;   // derivative method: HilbertSpectrum(...); else empty
  int64_t padded = 0;           // FFT length
  int64_t batch = 0;            // views per batch
  // Detector rows per view in a batch: the detector's, or the height of an
  // out-of-core row window (fdk_chunking.h).
  int64_t window_rows = 0;
  // Out of core (FbpPlan::RunOutOfCore): planes of the largest volume slab
  // kept on the backend; > 0 allocates the slab and the upload slots at once
  // (else on the first RunOutOfCore).
  int64_t slab_planes = 0;
};

// Which part of the problem a batch covers: volume planes [k0, k0 + nz)
// (nz < 0: all) and detector rows [row0, row0 + window_rows).
struct FbpWindow {
  int64_t k0 = 0;
  int64_t nz = -1;
  int64_t row0 = 0;
};

// A batch of filtered views lives in the backend's store between FilterBatch
// and BackprojectBatch.
class FbpBackend {
 public:
  virtual ~FbpBackend() = default;
  // Pre-weights and filters views [v0, v0 + n) (n <= batch) into the store:
  // row r < window_rows of the t-th (detector row row0 + r) is at
  // views[t * view_stride + r * input_cols].
  virtual absl::Status FilterBatch(const float* views, int64_t view_stride, int64_t v0, int64_t n,
                                   int64_t row0) = 0;
  // Copies the stored batch to views [v0, v0 + n) of `filtered` (sinogram
  // layout; whole detector rows only).
  virtual absl::Status ExportBatch(int64_t v0, int64_t n, float* filtered) = 0;
  // volume = (accumulate ? volume : 0) + back projection of the stored batch
  // (views v0 .., its rows starting at window.row0) into planes
  // [window.k0, window.k0 + window.nz); `volume` points at plane window.k0.
  virtual absl::Status BackprojectBatch(int64_t v0, int64_t n, const FbpWindow& window, bool accumulate,
                                        float* volume) = 0;
  // Waits for queued work (no-op on the CPU).
  virtual absl::Status Synchronize() = 0;

  // Out of core. The views [v0, v0 + n), rows [row0, row0 + window_rows) of
  // the host `sinogram` where FilterBatch reads them (CUDA: uploaded through
  // pinned memory on a copy stream, two slots in flight, the compute stream
  // waiting for the copy); *view_stride gets their view stride.
  virtual absl::StatusOr<const float*> StageViews(const float* sinogram, int64_t v0, int64_t n, int64_t row0,
                                                  int64_t* view_stride) = 0;
  // Where a slab of `planes` planes whose host copy is `host_slab` is
  // accumulated (CUDA: the device slab), and its copy back to the host.
  virtual absl::StatusOr<float*> SlabVolume(float* host_slab, int64_t planes) = 0;
  virtual absl::Status FinishSlab(float* host_slab, int64_t planes) = 0;
};

absl::StatusOr<std::unique_ptr<FbpBackend>> MakeCpuBackend(FbpBackendConfig config);

namespace cuda {
absl::StatusOr<std::unique_ptr<FbpBackend>> MakeBackend(FbpBackendConfig config);
}  // namespace cuda

namespace cpu {

// Ramp-filters `num_rows` rows of `cols` samples (row-major) with FFTW for
// tau = 1 (multiply by 1 / tau for pixel width tau). `out` may equal `in`.
absl::Status FilterRows(FilterKind kind, double cutoff, const float* in, float* out, int64_t num_rows, int64_t cols);

// The back projection reference: volume = (accumulate ? volume : 0) +
// sum_t Q_t(a, b) / D^2 over the `num_views` views of `padded` (each
// PaddedViewSize(cols, rows) floats, fbp_math.h, holding detector rows
// window.row0 ..), into planes [window.k0, window.k0 + window.nz) (`volume`
// points at plane window.k0), threaded over voxel lines. linear_weight: Q / D
// instead (the derivative short-scan method, short_scan_derivative.h).
void Backproject(const VolumeGeometry& volume_geometry, int64_t cols, int64_t rows, const BackprojectView* views,
                 int64_t num_views, const float* padded, bool accumulate, float* volume,
                 const FbpWindow& window = {}, bool linear_weight = false);

}  // namespace cpu

}  // namespace fbp
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_FBP_FBP_BACKEND_H_
