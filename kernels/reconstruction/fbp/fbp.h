// Filtered back projection: FBP for 2-D parallel and fan beams, FDK for cone
// beams, on the CPU (FFTW) and CUDA (cuFFT).
//
//   auto plan = FbpPlan::Create(geometry, stream, {FilterKind::kHann, 0.8});
//   TESSERA_RETURN_IF_ERROR((*plan)->Run(sinogram, volume));
//
// Run works through the views in batches: pre-weight (FDK cosine weights,
// the view's scale, fbp_setup.h, and a short scan's Parker or an offset
// detector's weights, redundancy_weights.h) and ramp-filter each detector row
// (filter.h) -- or, with FbpOptions::short_scan kDerivative, differentiate
// along the orbit, Hilbert-filter and weight after the filter
// (short_scan_derivative.h) -- then back-project the batch voxel by voxel, accumulating into
// the volume (in units of attenuation per mm when the sinogram holds line
// integrals in attenuation x mm). The plan owns the FFT plans, the per-view
// constants and all scratch, so Run allocates nothing; create one per
// geometry and reuse it. Pointers live in the stream's backend memory
// (host for CPU streams, device for CUDA streams); the stream must outlive
// the plan. A plan is not thread-safe (one Run at a time).
//
// Determinism: both backends give bit-identical volumes run to run in both
// execution modes. The back projection is a gather (each voxel sums its
// views in order, one thread per voxel, no atomics) and the FFTs are fixed
// plans, so kDeterministic costs nothing here; the mode is accepted for
// uniformity with the iterative methods.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_FBP_FBP_H_
#define TESSERA_KERNELS_RECONSTRUCTION_FBP_FBP_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/device.h"
#include "kernels/reconstruction/execution_mode.h"
#include "kernels/reconstruction/fbp/fdk_chunking.h"
#include "kernels/reconstruction/fbp/filter.h"
#include "kernels/reconstruction/geometry.h"

namespace tessera {
namespace recon {
namespace fbp {

// How the CUDA back projection reads the filtered projections (the CPU
// always interpolates exactly).
enum class FbpInterpolation {
  // Layered texture with hardware bilinear filtering: fastest, but the
  // hardware blends with 8-bit fractional weights (errors ~1/512 of the
  // local difference between neighbouring pixels).
  kTexture,
  // Bilinear interpolation in float from global memory (L1/L2 cached), the
  // same expressions as the CPU reference.
  kExact,
};

const char* FbpInterpolationName(FbpInterpolation interpolation);

// How fan and cone beams are filtered (issue 36).
enum class ShortScanMethod {
  // FDK: redundancy weights (Parker's for a short scan) multiplied in before
  // the ramp filter, back projection weighted 1 / D^2.
  kParker,
  // Noo, Defrise, Clackdoyle & Kudo (Phys. Med. Biol. 47:2525, 2002) in the
  // cone-beam form of Noo & Heuscher (Proc. SPIE 4684, 2002) / Yu & Wang
  // (Med. Phys. 31:1357, 2004): the data's derivative along the orbit at a
  // fixed ray direction, a Hilbert filter along detector rows, the
  // redundancy weight after the filter, back projection weighted 1 / D
  // (short_scan_derivative.h). For fan and cone scans on a circular orbit
  // about z, short or full; not with an offset detector or out of core
  // (RunOutOfCore: FAILED_PRECONDITION).
  kDerivative,
};

const char* ShortScanMethodName(ShortScanMethod method);  // "parker", "derivative"

struct FbpOptions {
  FilterKind filter = FilterKind::kRamLak;
  double cutoff = 1.0;  // fraction of Nyquist kept, (0, 1]
  ExecutionMode mode = ExecutionMode::kDefault;
  FbpInterpolation interpolation = FbpInterpolation::kTexture;
  // Views filtered and back-projected per batch; 0 picks ~64k detector rows
  // per batch (at most 1024 views). Scratch grows with it.
  int64_t views_per_batch = 0;
  // Fan and cone: Parker weights for a short scan, Wang's for an offset
  // detector (redundancy_weights.h); false ("none") applies neither.
  bool redundancy_weights = true;
  // Fan and cone beams; parallel beams ignore it.
  ShortScanMethod short_scan = ShortScanMethod::kParker;
  // kDerivative: the width (degrees) over which Noo's weight c(lambda) rises
  // from 0 at each end of a short scan's arc (short_scan_derivative.h).
  double short_scan_smoothing_deg = 10.0;
  // > 0: the plan is sized for RunOutOfCore within this many bytes of the
  // backend's memory (fdk_chunking.h: chunks of views, z-slabs with their
  // detector row windows); views_per_batch, when set, caps the chunk. 0:
  // sized for the resident Run (RunOutOfCore then uses one slab).
  int64_t device_memory_bytes = 0;
};

// Called after each batch with the views done so far; an error (e.g.
// CANCELLED) stops Run, which returns it (the volume is then incomplete).
using FbpProgress = std::function<absl::Status(int64_t views_done, int64_t views_total)>;

// Where Run's time went (wall clock; on CUDA the stream is synchronised
// around each stage when timings are requested).
struct FbpTimings {
  double filter_ms = 0;       // pre-weighting + ramp filter (+ copies into the projection store)
  double backproject_ms = 0;
  double total_ms = 0;
};

class FbpBackend;

class FbpPlan {
 public:
  // INVALID_ARGUMENT for a bad geometry or option (naming it),
  // FAILED_PRECONDITION for a CUDA stream without CUDA, RESOURCE_EXHAUSTED
  // (naming the sizes) when device_memory_bytes cannot hold one slab and
  // one view.
  static absl::StatusOr<std::unique_ptr<FbpPlan>> Create(const CtGeometry& geometry, const Stream& stream,
                                                         const FbpOptions& options = {});
  ~FbpPlan();
  FbpPlan(const FbpPlan&) = delete;
  FbpPlan& operator=(const FbpPlan&) = delete;

  // sinogram: det_cols x det_rows x views (geometry.h layout); volume:
  // nx x ny x nz, overwritten.
  // FAILED_PRECONDITION for a plan whose row windows are shorter than the
  // detector (RunOutOfCore only).
  absl::Status Run(const float* sinogram, float* volume, const FbpProgress& progress = nullptr,
                   FbpTimings* timings = nullptr);

  // The same reconstruction with `sinogram` and `volume` in host memory
  // whatever the stream: per slab (chunking()), its views are staged chunk
  // by chunk (CUDA: pinned uploads on a second stream overlapping the
  // filtering and back projection) and the slab copied back. The same sums
  // as Run with views_per_batch = chunking().views_per_chunk (slab
  // boundaries are multiples of 8 planes, the row windows cover every
  // sample and b - row0 is exact): bit for bit on the CPU; on CUDA within
  // 1e-6 of the peak (cuFFT plans of another batch count may round
  // differently). Progress counts views over all slabs.
  absl::Status RunOutOfCore(const float* sinogram, float* volume, const FbpProgress& progress = nullptr,
                            FbpTimings* timings = nullptr);

  // The out-of-core layout (one slab of every row when device_memory_bytes is 0).
  const FdkChunking& chunking() const { return chunking_; }

  // Only the pre-weighting and filtering: `filtered` gets the sinogram's
  // layout. (Back-projecting it with unit weights is what Run does.)
  // FAILED_PRECONDITION as Run's. With short_scan kDerivative: the filtered
  // rows after the weights (what the 1 / D back projection sums).
  absl::Status Filter(const float* sinogram, float* filtered);

  const CtGeometry& geometry() const { return geometry_; }
  const FbpOptions& options() const { return options_; }
  int64_t views_per_batch() const { return batch_; }
  // Which redundancy weights the geometry got, e.g. "short scan 220 deg
  // (...): Parker weights" (RedundancyWeights::description).
  const std::string& redundancy() const { return redundancy_; }

 private:
  FbpPlan(const CtGeometry& geometry, const FbpOptions& options, int64_t batch, std::string redundancy,
          FdkChunking chunking, std::unique_ptr<FbpBackend> backend);

  // FAILED_PRECONDITION unless batches hold whole detector rows (Run, Filter).
  absl::Status CheckWholeRows() const;

  CtGeometry geometry_;
  FdkChunking chunking_;
  FbpOptions options_;
  int64_t batch_;
  std::string redundancy_;
  std::unique_ptr<FbpBackend> backend_;
  bool derivative_ = false;  // ShortScanMethod::kDerivative on a fan or cone beam
};

// Bytes of `backend` memory the resident Run needs (sinogram, volume and the
// plan's scratch, fdk_chunking.h's model): a caller compares it with a budget
// before choosing RunOutOfCore. Errors as Create's.
absl::StatusOr<int64_t> FbpResidentBytes(const CtGeometry& geometry, const FbpOptions& options, Backend backend);

// One-shot convenience: creates a plan and runs it.
absl::Status Fbp(const CtGeometry& geometry, const FbpOptions& options, const Stream& stream, const float* sinogram,
                 float* volume);

}  // namespace fbp
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_FBP_FBP_H_
