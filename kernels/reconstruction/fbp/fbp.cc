// FbpPlan: argument checks, batching, progress and timings; the work is in
// the backends (fbp_cpu.cc, fbp.cu).
#include "kernels/reconstruction/fbp/fbp.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/reconstruction/fbp/fbp_backend.h"
#include "kernels/reconstruction/fbp/fbp_setup.h"
#include "kernels/reconstruction/fbp/short_scan_derivative.h"

namespace tessera {
namespace recon {
namespace fbp {
namespace {

constexpr int64_t kRowsPerBatch = 65536;
constexpr int64_t kMaxViewsPerBatch = 1024;  // also under the layered-texture limit (2048)

// fdk_chunking.h's model of a plan on `backend` with batches of `batch` views.
FdkChunkInput ChunkInputOf(const FbpSetup& setup, const FbpOptions& options, Backend backend, int64_t batch) {
  const CtGeometry& wide = setup.geometry;
  FdkChunkInput in;
  in.nx = wide.volume.nx;
  in.ny = wide.volume.ny;
  in.nz = wide.volume.nz;
  in.views = wide.projection.num_views();
  in.cols = wide.projection.det_cols;
  in.input_cols = setup.input_cols;
  in.rows = wide.projection.det_rows;
  in.padded = PaddedLength(in.cols);
  in.column_weights = !setup.column_weights.empty();
  in.texture = backend == Backend::kCuda && options.interpolation == FbpInterpolation::kTexture;
  in.max_views_per_chunk = batch;
  if (backend == Backend::kCpu) in.fixed_allowance_bytes = 0;  // no cuFFT
  return in;
}

int64_t DefaultBatch(const FbpOptions& options, int64_t views, int64_t rows) {
  int64_t batch = options.views_per_batch;
  if (batch == 0) batch = (kRowsPerBatch + rows - 1) / rows;
  return std::max<int64_t>(1, std::min({batch, views, kMaxViewsPerBatch}));
}

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

const char* ShortScanMethodName(ShortScanMethod method) {
  return method == ShortScanMethod::kDerivative ? "derivative" : "parker";
}

const char* FbpInterpolationName(FbpInterpolation interpolation) {
  return interpolation == FbpInterpolation::kTexture ? "texture" : "exact";
}

FbpPlan::FbpPlan(const CtGeometry& geometry, const FbpOptions& options, int64_t batch, std::string redundancy,
                 FdkChunking chunking, std::unique_ptr<FbpBackend> backend)
    : geometry_(geometry),
      chunking_(std::move(chunking)),
      options_(options),
      batch_(batch),
      redundancy_(std::move(redundancy)),
      backend_(std::move(backend)) {}

FbpPlan::~FbpPlan() = default;

absl::StatusOr<std::unique_ptr<FbpPlan>> FbpPlan::Create(const CtGeometry& geometry, const Stream& stream,
                                                         const FbpOptions& options) {
  TESSERA_RETURN_IF_ERROR(ValidateCutoff(options.cutoff));
  if (options.views_per_batch < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("fbp: views_per_batch must be >= 0 (0: automatic), got ", options.views_per_batch));
  }
  if (options.device_memory_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("fbp: device_memory_bytes must be >= 0 (0: resident), got ", options.device_memory_bytes));
  }
  const bool derivative =
      options.short_scan == ShortScanMethod::kDerivative && geometry.projection.beam != BeamKind::kParallel;
  FbpSetup setup;
  if (derivative) {
    if (options.device_memory_bytes > 0) {
      return absl::InvalidArgumentError(
          "fbp: short_scan \"derivative\" runs resident only (device_memory_bytes must be 0; use \"parker\" out of "
          "core)");
    }
    TESSERA_ASSIGN_OR_RETURN(
        setup, MakeDerivativeFbpSetup(geometry, options.redundancy_weights, options.short_scan_smoothing_deg));
  } else {
    TESSERA_ASSIGN_OR_RETURN(setup, MakeFbpSetup(geometry, options.redundancy_weights));
  }
  std::string redundancy = setup.redundancy;
  const int64_t views = geometry.projection.num_views(), rows = geometry.projection.det_rows;
  const CtGeometry wide = setup.geometry;  // an offset detector's widened (fbp_setup.h)
  int64_t batch = DefaultBatch(options, views, rows);

  const VolumeGeometry& vol = wide.volume;
  FdkChunking chunking;
  chunking.views_per_chunk = batch;
  chunking.window_rows = rows;
  chunking.slabs = {FdkSlab{0, vol.nz, 0}};
  chunking.slab_planes = vol.nz;
  if (options.device_memory_bytes > 0) {
    const FdkChunkInput in = ChunkInputOf(setup, options, stream.backend(), batch);
    TESSERA_ASSIGN_OR_RETURN(chunking, PlanFdkChunks(in, setup.back, options.device_memory_bytes));
    batch = chunking.views_per_chunk;
  }

  FbpBackendConfig config;
  config.geometry = wide;
  config.stream = &stream;
  config.options = options;
  config.setup = std::move(setup);
  config.padded = PaddedLength(wide.projection.det_cols);
  config.spectrum = FilterSpectrum(options.filter, options.cutoff, config.padded);
  if (derivative) config.hilbert = HilbertSpectrum(options.filter, options.cutoff, config.padded);
  config.batch = batch;
  config.window_rows = chunking.window_rows;
  config.slab_planes = options.device_memory_bytes > 0 ? chunking.slab_planes : 0;

  std::unique_ptr<FbpBackend> backend;
  if (stream.backend() == Backend::kCpu) {
    TESSERA_ASSIGN_OR_RETURN(backend, MakeCpuBackend(std::move(config)));
  } else {
#if TESSERA_WITH_CUDA
    TESSERA_ASSIGN_OR_RETURN(backend, cuda::MakeBackend(std::move(config)));
#else
    return absl::FailedPreconditionError(
        absl::StrCat("fbp: CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
#endif
  }
  std::unique_ptr<FbpPlan> plan(
      new FbpPlan(geometry, options, batch, std::move(redundancy), std::move(chunking), std::move(backend)));
  plan->derivative_ = derivative;
  return plan;
}

absl::Status FbpPlan::Run(const float* sinogram, float* volume, const FbpProgress& progress, FbpTimings* timings) {
  if (sinogram == nullptr || volume == nullptr) return absl::InvalidArgumentError("fbp: sinogram or volume is null");
  TESSERA_RETURN_IF_ERROR(CheckWholeRows());
  const auto start = std::chrono::steady_clock::now();
  const bool timed = timings != nullptr;
  if (timed) *timings = FbpTimings{};
  const int64_t views = geometry_.projection.num_views();
  for (int64_t v0 = 0; v0 < views; v0 += batch_) {
    const int64_t n = std::min(batch_, views - v0);
    auto t0 = std::chrono::steady_clock::now();
    const int64_t view_floats = geometry_.projection.det_rows * geometry_.projection.det_cols;
    // The derivative method reads each view's neighbours anywhere in the sinogram.
    const float* views_in = derivative_ ? sinogram : sinogram + v0 * view_floats;
    TESSERA_RETURN_IF_ERROR(backend_->FilterBatch(views_in, view_floats, v0, n, /*row0=*/0));
    if (timed) {
      TESSERA_RETURN_IF_ERROR(backend_->Synchronize());
      timings->filter_ms += MsSince(t0);
      t0 = std::chrono::steady_clock::now();
    }
    TESSERA_RETURN_IF_ERROR(backend_->BackprojectBatch(v0, n, FbpWindow{}, /*accumulate=*/v0 > 0, volume));
    if (timed) {
      TESSERA_RETURN_IF_ERROR(backend_->Synchronize());
      timings->backproject_ms += MsSince(t0);
    }
    if (progress) {
      TESSERA_RETURN_IF_ERROR(backend_->Synchronize());
      TESSERA_RETURN_IF_ERROR(progress(v0 + n, views));
    }
  }
  TESSERA_RETURN_IF_ERROR(backend_->Synchronize());
  if (timed) timings->total_ms = MsSince(start);
  return absl::OkStatus();
}

absl::Status FbpPlan::Filter(const float* sinogram, float* filtered) {
  if (sinogram == nullptr || filtered == nullptr) return absl::InvalidArgumentError("fbp: sinogram or output is null");
  TESSERA_RETURN_IF_ERROR(CheckWholeRows());
  const int64_t views = geometry_.projection.num_views();
  for (int64_t v0 = 0; v0 < views; v0 += batch_) {
    const int64_t n = std::min(batch_, views - v0);
    const int64_t view_floats = geometry_.projection.det_rows * geometry_.projection.det_cols;
    const float* views_in = derivative_ ? sinogram : sinogram + v0 * view_floats;
    TESSERA_RETURN_IF_ERROR(backend_->FilterBatch(views_in, view_floats, v0, n, /*row0=*/0));
    TESSERA_RETURN_IF_ERROR(backend_->ExportBatch(v0, n, filtered));
  }
  return backend_->Synchronize();
}

absl::Status FbpPlan::CheckWholeRows() const {
  if (chunking_.window_rows == geometry_.projection.det_rows) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("fbp: this plan reads row windows of ", chunking_.window_rows,
                                                    " of ", geometry_.projection.det_rows,
                                                    " detector rows; use RunOutOfCore"));
}

absl::Status FbpPlan::RunOutOfCore(const float* sinogram, float* volume, const FbpProgress& progress,
                                   FbpTimings* timings) {
  if (sinogram == nullptr || volume == nullptr) return absl::InvalidArgumentError("fbp: sinogram or volume is null");
  if (derivative_) {
    return absl::FailedPreconditionError("fbp: RunOutOfCore is not available with short_scan \"derivative\"; use Run");
  }
  const auto start = std::chrono::steady_clock::now();
  if (timings != nullptr) *timings = FbpTimings{};
  const int64_t views = geometry_.projection.num_views();
  const int64_t plane = geometry_.volume.nx * geometry_.volume.ny;
  const int64_t total = views * static_cast<int64_t>(chunking_.slabs.size());
  int64_t done = 0;
  for (const FdkSlab& slab : chunking_.slabs) {
    float* host_slab = volume + slab.k0 * plane;
    TESSERA_ASSIGN_OR_RETURN(float* x, backend_->SlabVolume(host_slab, slab.nz));
    const FbpWindow window{slab.k0, slab.nz, slab.row0};
    for (int64_t v0 = 0; v0 < views; v0 += batch_) {
      const int64_t n = std::min(batch_, views - v0);
      int64_t stride = 0;
      TESSERA_ASSIGN_OR_RETURN(const float* staged, backend_->StageViews(sinogram, v0, n, slab.row0, &stride));
      TESSERA_RETURN_IF_ERROR(backend_->FilterBatch(staged, stride, v0, n, slab.row0));
      TESSERA_RETURN_IF_ERROR(backend_->BackprojectBatch(v0, n, window, /*accumulate=*/v0 > 0, x));
      done += n;
      if (progress) TESSERA_RETURN_IF_ERROR(progress(done, total));
    }
    TESSERA_RETURN_IF_ERROR(backend_->FinishSlab(host_slab, slab.nz));
  }
  TESSERA_RETURN_IF_ERROR(backend_->Synchronize());
  if (timings != nullptr) timings->total_ms = MsSince(start);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> FbpResidentBytes(const CtGeometry& geometry, const FbpOptions& options, Backend backend) {
  TESSERA_ASSIGN_OR_RETURN(FbpSetup setup, MakeFbpSetup(geometry, options.redundancy_weights));
  const ProjectionGeometry& p = geometry.projection;
  const int64_t batch = DefaultBatch(options, p.num_views(), p.det_rows);
  const FdkChunkInput in = ChunkInputOf(setup, options, backend, batch);
  const int64_t upload_slots = 2 * batch * in.rows * in.input_cols * static_cast<int64_t>(sizeof(float));
  // The derivative method's second FFT buffer (its other tables are small).
  const bool derivative = options.short_scan == ShortScanMethod::kDerivative && p.beam != BeamKind::kParallel;
  const int64_t second_fft =
      derivative ? batch * in.rows * (in.padded + 2) * static_cast<int64_t>(sizeof(float)) : 0;
  return p.sinogram_size() * static_cast<int64_t>(sizeof(float)) + FdkDeviceBytes(in, in.nz, in.rows, batch) -
         upload_slots + second_fft;
}

absl::Status Fbp(const CtGeometry& geometry, const FbpOptions& options, const Stream& stream, const float* sinogram,
                 float* volume) {
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<FbpPlan> plan, FbpPlan::Create(geometry, stream, options));
  return plan->Run(sinogram, volume);
}

}  // namespace fbp
}  // namespace recon
}  // namespace tessera
