// BeamformPlan: argument checks, the geometry tables, the MV workspace and
// backend dispatch of the steps in beamform_kernels.h.
#include "kernels/reconstruction/ultrasound/beamform.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/memory_kind_for.h"
#include "common/status.h"
#include "kernels/reconstruction/linalg/batched_cholesky.h"
#include "kernels/reconstruction/ultrasound/beamform_kernels.h"

namespace tessera {
namespace recon {
namespace ultrasound {
namespace {

using detail::CFloat;

constexpr int64_t kDefaultCovarianceBytes = int64_t{256} << 20;

absl::Status RequireCuda() {
#if TESSERA_WITH_CUDA
  return absl::OkStatus();
#else
  return absl::FailedPreconditionError(
      absl::StrCat("beamform: CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
#endif
}

size_t AlignUp(size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

absl::Status ValidateBeamformOptions(const BeamformOptions& options, int channels) {
  if (options.method == BeamformMethod::kDelayAndSum) {
    const double f = options.das.f_number;
    if (!std::isfinite(f) || f < 0) {
      return absl::InvalidArgumentError(absl::StrCat("das.f_number = ", f, " (must be >= 0; 0: the whole array)"));
    }
    return absl::OkStatus();
  }
  const MvOptions& mv = options.mv;
  const int max_l = std::min(channels, kMaxSubarray);
  if (mv.subarray < 1 || mv.subarray > max_l) {
    return absl::InvalidArgumentError(absl::StrCat("mv.subarray = ", mv.subarray, " (must be 1..", max_l, " for ",
                                                   channels, " channels)"));
  }
  if (!std::isfinite(mv.loading) || mv.loading < 0) {
    return absl::InvalidArgumentError(absl::StrCat("mv.loading = ", mv.loading, " (must be finite and >= 0)"));
  }
  if (mv.temporal_half < 0 || mv.temporal_half > kMaxTemporalHalf) {
    return absl::InvalidArgumentError(
        absl::StrCat("mv.temporal_half = ", mv.temporal_half, " (must be 0..", kMaxTemporalHalf, ")"));
  }
  if ((2 * mv.temporal_half + 1) * int64_t{channels} > detail::kMaxCovarianceRowValues) {
    return absl::InvalidArgumentError(absl::StrCat("mv.temporal_half = ", mv.temporal_half, " with ", channels,
                                                   " channels: (2K + 1) x channels must be <= ",
                                                   detail::kMaxCovarianceRowValues));
  }
  if (mv.chunk_pixels < 0) {
    return absl::InvalidArgumentError(absl::StrCat("mv.chunk_pixels = ", mv.chunk_pixels, " (must be >= 0)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<BeamformPlan>> BeamformPlan::Create(const Stream& stream,
                                                                   const Acquisition& acquisition,
                                                                   const ImageGrid& grid,
                                                                   const BeamformOptions& options) {
  TESSERA_RETURN_IF_ERROR(ValidateAcquisitionGeometry(acquisition));
  TESSERA_RETURN_IF_ERROR(ValidateImageGrid(grid));
  TESSERA_RETURN_IF_ERROR(ValidateBeamformOptions(options, acquisition.probe.channels()));
  if (stream.backend() == Backend::kCuda) TESSERA_RETURN_IF_ERROR(RequireCuda());

  std::unique_ptr<BeamformPlan> plan(new BeamformPlan());
  plan->stream_ = &stream;
  plan->options_ = options;
  const LinearArray& probe = acquisition.probe;
  const TransmitSequence& seq = acquisition.sequence;
  const int n = probe.channels(), t = seq.transmits();
  const bool sa = seq.kind == TransmitKind::kSyntheticAperture;

  // Geometry table: element_x[n], the transmit table, then d_t per transmit.
  std::vector<double>& table = plan->host_geometry_;
  table.assign(probe.element_x.begin(), probe.element_x.end());
  for (int i = 0; i < t; ++i) {
    if (sa) {
      table.push_back(probe.element_x[seq.elements[i]]);
    } else {
      table.push_back(std::sin(seq.angles_rad[i]));
      table.push_back(std::cos(seq.angles_rad[i]));
    }
  }
  const size_t delay_offset = table.size();
  for (int i = 0; i < t; ++i) table.push_back(seq.delays_s.empty() ? 0.0 : seq.delays_s[i]);
  const double* table_ptr = table.data();
  if (stream.backend() == Backend::kCuda) {
    TESSERA_ASSIGN_OR_RETURN(plan->geometry_,
                             Buffer::Allocate(MemoryKind::kDevice, table.size() * sizeof(double), stream.ordinal()));
    TESSERA_RETURN_IF_ERROR(CopyBytes(plan->geometry_->data(), MemoryKind::kDevice, table.data(), MemoryKind::kHost,
                                      table.size() * sizeof(double), stream));
    TESSERA_RETURN_IF_ERROR(stream.Synchronize());  // `table` is pageable host memory
    table_ptr = static_cast<const double*>(plan->geometry_->data());
  }

  detail::BeamformParams& p = plan->params_;
  p.samples = acquisition.data.samples;
  p.channels = n;
  p.transmits = t;
  p.synthetic_aperture = sa;
  p.fs = acquisition.sampling.sampling_frequency_hz;
  p.t0 = acquisition.sampling.initial_time_s;
  p.inv_c = 1.0 / acquisition.sampling.sound_speed;
  p.f_demod = acquisition.sampling.demodulation_frequency_hz;
  p.element_x = table_ptr;
  p.transmit = table_ptr + n;
  p.transmit_delay = table_ptr + delay_offset;
  p.nx = grid.nx;
  p.nz = grid.nz;
  p.x0 = grid.x0;
  p.z0 = grid.z0;
  p.dx = grid.dx;
  p.dz = grid.dz;
  p.window = options.das.window == Apodization::kHann ? detail::kHannWindow : detail::kBoxcarWindow;
  p.f_number = options.das.f_number;
  const double pitch = probe.pitch() > 0 ? probe.pitch() : std::max(probe.element_width, 1e-4);
  p.min_half_aperture = pitch;
  p.array_center = 0.5 * (probe.element_x.front() + probe.element_x.back());
  p.array_half_span = 0.5 * (probe.element_x.back() - probe.element_x.front()) + 0.5 * pitch;

  if (options.method == BeamformMethod::kMinimumVariance) {
    const int64_t l = options.mv.subarray;
    const int64_t bytes_per_pixel_r = l * l * int64_t{sizeof(CFloat)};
    int64_t chunk = options.mv.chunk_pixels > 0 ? options.mv.chunk_pixels : kDefaultCovarianceBytes / bytes_per_pixel_r;
    plan->chunk_columns_ = std::clamp<int64_t>(chunk / grid.nz, 1, grid.nx);
    const int64_t pixels = plan->chunk_columns_ * grid.nz;
    plan->workspace_bytes_ = AlignUp(pixels * n * sizeof(CFloat)) + AlignUp(pixels * bytes_per_pixel_r) +
                             AlignUp(pixels * l * sizeof(CFloat)) + AlignUp(pixels * sizeof(int));
    TESSERA_ASSIGN_OR_RETURN(plan->workspace_,
                             Buffer::Allocate(MemoryKindFor(stream), plan->workspace_bytes_, stream.ordinal()));
  }
  return plan;
}

absl::Status BeamformPlan::Execute(const std::complex<float>* channel_data, std::complex<float>* image) {
  if (channel_data == nullptr || image == nullptr) {
    return absl::InvalidArgumentError("beamform: channel_data or image is null");
  }
  const CFloat* data = reinterpret_cast<const CFloat*>(channel_data);
  CFloat* out = reinterpret_cast<CFloat*>(image);
  if (options_.method == BeamformMethod::kMinimumVariance) return ExecuteMv(data, out);
  if (stream_->backend() == Backend::kCpu) {
    detail::cpu::DelayAndSum(params_, data, out);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return detail::cuda::DelayAndSum(*stream_, params_, data, out);
#else
  return RequireCuda();
#endif
}

absl::Status BeamformPlan::ExecuteMv(const CFloat* data, CFloat* image) {
  const int n = params_.channels, l = options_.mv.subarray;
  const int64_t max_pixels = chunk_columns_ * params_.nz;
  char* base = static_cast<char*>(workspace_->data());
  CFloat* x = reinterpret_cast<CFloat*>(base);
  base += AlignUp(max_pixels * n * sizeof(CFloat));
  CFloat* r = reinterpret_cast<CFloat*>(base);
  base += AlignUp(max_pixels * int64_t{l} * l * sizeof(CFloat));
  CFloat* v = reinterpret_cast<CFloat*>(base);
  base += AlignUp(max_pixels * int64_t{l} * sizeof(CFloat));
  int* info = reinterpret_cast<int*>(base);
  const bool cpu = stream_->backend() == Backend::kCpu;
#if !TESSERA_WITH_CUDA
  if (!cpu) return RequireCuda();
#endif

  for (int col = 0; col < params_.nx; col += static_cast<int>(chunk_columns_)) {
    detail::MvChunk chunk;
    chunk.col_begin = col;
    chunk.cols = static_cast<int>(std::min<int64_t>(chunk_columns_, params_.nx - col));
    chunk.subarray = l;
    chunk.temporal_half = options_.mv.temporal_half;
    chunk.loading = static_cast<float>(options_.mv.loading);
    const linalg::BatchedSolveShape shape{chunk.pixels(params_), l, 1};
    auto* rc = reinterpret_cast<std::complex<float>*>(r);
    auto* vc = reinterpret_cast<std::complex<float>*>(v);
    if (cpu) {
      detail::cpu::DelayedChannels(params_, chunk, data, x);
      detail::cpu::Covariance(params_, chunk, x, r);
      detail::cpu::FillOnes(params_, chunk, v);
      linalg::cpu::BatchedCholeskySolve(shape, 0.0f, rc, vc, vc, info);
      detail::cpu::ApplyWeights(params_, chunk, x, v, info, image);
      continue;
    }
#if TESSERA_WITH_CUDA
    TESSERA_RETURN_IF_ERROR(detail::cuda::DelayedChannels(*stream_, params_, chunk, data, x));
    TESSERA_RETURN_IF_ERROR(detail::cuda::Covariance(*stream_, params_, chunk, x, r));
    TESSERA_RETURN_IF_ERROR(detail::cuda::FillOnes(*stream_, params_, chunk, v));
    TESSERA_RETURN_IF_ERROR(linalg::BatchedCholeskySolve(*stream_, shape, 0.0f, rc, vc, vc, info));
    TESSERA_RETURN_IF_ERROR(detail::cuda::ApplyWeights(*stream_, params_, chunk, x, v, info, image));
#endif
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::complex<float>>> Beamform(const Acquisition& acquisition, const ImageGrid& grid,
                                                          const BeamformOptions& options, Backend backend) {
  TESSERA_RETURN_IF_ERROR(ValidateAcquisition(acquisition));
  const Acquisition analytic_storage = acquisition.data.is_iq() ? Acquisition() : ToAnalytic(acquisition);
  const Acquisition& a = acquisition.data.is_iq() ? acquisition : analytic_storage;
  std::vector<std::complex<float>> image(grid.nx > 0 && grid.nz > 0 ? grid.size() : 0);
  if (backend == Backend::kCpu) {
    const Stream stream = Stream::Cpu();
    TESSERA_ASSIGN_OR_RETURN(auto plan, BeamformPlan::Create(stream, a, grid, options));
    TESSERA_RETURN_IF_ERROR(plan->Execute(a.data.iq.data(), image.data()));
    return image;
  }
  TESSERA_ASSIGN_OR_RETURN(Stream stream, Stream::Create(backend));
  TESSERA_ASSIGN_OR_RETURN(auto plan, BeamformPlan::Create(stream, a, grid, options));
  const size_t data_bytes = a.data.iq.size() * sizeof(std::complex<float>);
  const size_t image_bytes = image.size() * sizeof(std::complex<float>);
  TESSERA_ASSIGN_OR_RETURN(auto d_data, Buffer::Allocate(MemoryKind::kDevice, data_bytes, stream.ordinal()));
  TESSERA_ASSIGN_OR_RETURN(auto d_image, Buffer::Allocate(MemoryKind::kDevice, image_bytes, stream.ordinal()));
  TESSERA_RETURN_IF_ERROR(
      CopyBytes(d_data->data(), MemoryKind::kDevice, a.data.iq.data(), MemoryKind::kHost, data_bytes, stream));
  TESSERA_RETURN_IF_ERROR(plan->Execute(static_cast<const std::complex<float>*>(d_data->data()),
                                        static_cast<std::complex<float>*>(d_image->data())));
  TESSERA_RETURN_IF_ERROR(
      CopyBytes(image.data(), MemoryKind::kHost, d_image->data(), MemoryKind::kDevice, image_bytes, stream));
  TESSERA_RETURN_IF_ERROR(stream.Synchronize());
  return image;
}

ImageGrid DefaultImageGrid(const Acquisition& a, int nx, int nz, double z_min, double z_max) {
  const Sampling& s = a.sampling;
  double depth = 0.5 * s.sound_speed * (s.initial_time_s + (a.data.samples - 1) / s.sampling_frequency_hz);
  if (z_max > 0) depth = std::min(depth, z_max);
  if (!(depth > z_min)) depth = z_min + 1e-3;
  const double x_min = a.probe.element_x.empty() ? -1e-3 : a.probe.element_x.front();
  const double x_max = a.probe.element_x.empty() ? 1e-3 : a.probe.element_x.back();
  return ImageGrid::Span(nx, nz, x_min, x_max, z_min, depth);
}

}  // namespace ultrasound
}  // namespace recon
}  // namespace tessera
